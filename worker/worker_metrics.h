// WorkerMetrics: what the worker's `/metrics` serves (docs/metrics.md;
// worker/metrics_http_server.h is the endpoint). Live per-rank series of the attempts
// running here (labels sweep, variant, trial, rank), updated from the trainer's step events and removed when the attempt ends, so the
// series count stays bounded by the running ranks (the history is in SQLite); the
// worker's own state (connection, running trials, buffered events, outcomes); and the
// node's CPU, memory and GPUs (worker/node_collector.h).
// Thread-safety: every method runs on the agent's executor (the endpoint renders there
// too); prometheus-cpp's families are thread-safe besides.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "protocol/messages.h"
#include "protocol/trainer_event.h"
#include "worker/node_collector.h"

namespace bakeoff::worker {

class WorkerMetrics {
 public:
  // `node` may be null (no node or GPU series).
  explicit WorkerMetrics(std::shared_ptr<NodeCollector> node = nullptr);

  // Fixed figures of this worker (set once, after its configuration is final).
  void SetCapacity(int cpu_slots, int cuda_devices);
  // Called whenever the agent's state may have changed (cheap: a few gauge stores).
  void SetAgentState(bool connected, std::size_t buffered_events);

  // An attempt starts here: remembers its labels (sweep id, variant key, trial id) and
  // which of its ranks run on a CUDA device (only those get device-memory series).
  void StartTrial(const protocol::AssignMessage& assign);
  // One trainer event of one rank; only `step` events change series.
  void ObserveEvent(const protocol::AttemptRef& attempt, int rank, const protocol::TrainerEvent& event);
  // The attempt ended with `outcome`: its series are removed and the outcome counted.
  void EndTrial(const protocol::AttemptRef& attempt, const std::string& outcome);

  // The text exposition of everything /metrics serves (registry and node figures).
  std::string Render() const;

 private:
  struct RankSeries {
    prometheus::Counter* tokens = nullptr;
    prometheus::Gauge* tokens_per_second = nullptr;
    prometheus::Histogram* step_seconds = nullptr;
    prometheus::Counter* warmup_steps = nullptr;
    prometheus::Counter* measured_steps = nullptr;
    prometheus::Gauge* loss = nullptr;
    prometheus::Gauge* peak_memory = nullptr;
    prometheus::Gauge* rss = nullptr;
    prometheus::Gauge* device_allocated = nullptr;      // CUDA ranks only
    prometheus::Gauge* device_reserved_peak = nullptr;  // CUDA ranks only
    prometheus::Counter* collective_seconds = nullptr;
    prometheus::Counter* collective_bytes = nullptr;
  };
  struct TrialSeries {
    prometheus::Labels labels;  // sweep, variant, trial
    int world_size = 1;
    std::map<int, bool> local_ranks;  // the ranks this worker runs -> on a CUDA device
    std::map<int, RankSeries> ranks;
  };

  RankSeries& SeriesFor(TrialSeries& trial, int rank);
  void RemoveSeries(RankSeries& series);
  void UpdateRunningGauges();

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<NodeCollector> node_;

  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Gauge>& tokens_per_second_;
  prometheus::Family<prometheus::Histogram>& step_seconds_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& peak_memory_;
  prometheus::Family<prometheus::Gauge>& rss_;
  prometheus::Family<prometheus::Gauge>& device_allocated_;
  prometheus::Family<prometheus::Gauge>& device_reserved_peak_;
  prometheus::Family<prometheus::Counter>& collective_seconds_;
  prometheus::Family<prometheus::Counter>& collective_bytes_;

  prometheus::Gauge& connected_;
  prometheus::Gauge& buffered_events_;
  prometheus::Gauge& running_trials_;
  prometheus::Gauge& running_ranks_;
  prometheus::Gauge& cpu_slots_;
  prometheus::Gauge& cuda_devices_;
  prometheus::Family<prometheus::Counter>& finished_;

  std::map<protocol::AttemptRef, TrialSeries> trials_;
};

}  // namespace bakeoff::worker
