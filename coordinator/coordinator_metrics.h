// CoordinatorMetrics: the coordinator's Prometheus exposition (GET /metrics,
// docs/metrics.md). Event-driven figures (HTTP requests, dispatch latency, store write
// latency, requeues) live in a prometheus::Registry and are recorded as they happen;
// state figures (trials, sweeps, workers, queue, cluster capacity) are computed from a
// snapshot of the service at scrape time, so they can never drift from the service's
// own view and a finished sweep's or a forgotten worker's series need no cleanup.
// Thread-safety: used on the coordinator's io thread (prometheus-cpp's own types are
// thread-safe as well).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "protocol/clock.h"

namespace bakeoff::coordinator {

// The state figures at one moment, filled by CoordinatorService::MetricsSnapshot.
struct CoordinatorSnapshot {
  struct Sweep {
    std::int64_t id = 0;
    // "" unless /metrics needs the token: the open /metrics names no sweep (a name may
    // say what a team is working on); bakeoff_sweep_info then has no name label.
    std::string name;
    bool active = false;                        // not finished, not cancelled
    std::map<std::string, int> trials_by_state;  // queued, assigned, running, finished
    std::map<std::string, int> outcomes;         // finished trials by outcome
    int queue_depth = 0;                         // its queued trials waiting for a placement
  };
  std::vector<Sweep> sweeps;
  std::map<std::string, int> workers_by_state;  // alive, draining, lost
  int workers_connected = 0;
  int queue_depth = 0;  // queued trials waiting for a placement
  int cpu_slots_total = 0, cpu_slots_used = 0;        // over live (alive, draining) workers
  int cuda_devices_total = 0, cuda_devices_used = 0;
};

class CoordinatorMetrics {
 public:
  // `clock` times the store writes (StoreWriteTimer); it must outlive this.
  explicit CoordinatorMetrics(const Clock& clock = SystemClock::Instance());

  // One answered HTTP request; `target` is the raw request target (its route
  // pattern is the label, never the raw path: sweep names must not become series).
  void ObserveHttpRequest(const std::string& target, int status);
  // Time from a trial being queued (submitted or requeued) to its first rank process
  // starting on a worker.
  void ObserveDispatch(std::chrono::duration<double> latency);
  void ObserveStoreWrite(const std::string& operation, std::chrono::duration<double> elapsed);
  void CountRequeue();
  // A worker put in quarantine (worker_quarantine.h).
  void CountQuarantine();
  // A worker's connection read later because it sent events over the rate limit.
  void CountEventThrottle(std::chrono::milliseconds delay);
  // Events or step blocks a worker sent for ranks it was not given (dropped).
  void CountForeignEvents(std::size_t n);
  // Events or step blocks over their rank's quota (dropped; EventIngest).
  void CountDroppedOverQuota(std::size_t n);

  // Measures one store write from construction to destruction.
  class StoreWriteTimer {
   public:
    StoreWriteTimer(CoordinatorMetrics& metrics, const char* operation)
        : metrics_(metrics), operation_(operation), start_(metrics.clock_.Now()) {}
    ~StoreWriteTimer() { metrics_.ObserveStoreWrite(operation_, metrics_.clock_.Now() - start_); }
    StoreWriteTimer(const StoreWriteTimer&) = delete;
    StoreWriteTimer& operator=(const StoreWriteTimer&) = delete;

   private:
    CoordinatorMetrics& metrics_;
    const char* operation_;
    Clock::TimePoint start_;
  };

  // The text exposition (format 0.0.4) of the registry plus the snapshot's figures.
  std::string Render(const CoordinatorSnapshot& snapshot) const;

  // "/api/v1/sweeps/{sweep}/report" for "/api/v1/sweeps/demo/report?format=json".
  static std::string RouteOf(const std::string& target);

 private:
  const Clock& clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& http_requests_;
  prometheus::Histogram& dispatch_latency_;
  prometheus::Family<prometheus::Histogram>& store_write_;
  prometheus::Counter& requeues_;
  prometheus::Counter& event_throttle_;
  prometheus::Counter& foreign_events_;
  prometheus::Counter& over_quota_events_;
  prometheus::Counter& quarantines_;
  std::map<std::string, prometheus::Histogram*> store_write_by_operation_;
};

}  // namespace bakeoff::coordinator
