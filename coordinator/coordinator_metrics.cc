#include "coordinator/coordinator_metrics.h"

#include <sstream>

#include <prometheus/text_serializer.h>

#include "coordinator/worker_registry.h"
#include "metrics/store/store_records.h"
#include "metrics/prometheus/prometheus_families.h"

namespace bakeoff::coordinator {
using metrics::AddSample;
using metrics::MakeFamily;
using metrics::RegisterFamily;
using metrics::RegisterSeries;
using prometheus::MetricType;

namespace {

// Submission to first rank started: milliseconds on an idle cluster, hours for a trial
// queued behind a long sweep.
const prometheus::Histogram::BucketBoundaries kDispatchBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400};
// SQLite commits with fsync in WAL mode: tens of microseconds to a slow disk's seconds.
const prometheus::Histogram::BucketBoundaries kStoreBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < path.size()) {
    auto slash = path.find('/', pos);
    std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!part.empty()) out.push_back(part);
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return out;
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(const Clock& clock)
    : clock_(clock),
      registry_(std::make_shared<prometheus::Registry>()),
      http_requests_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_http_requests_total",
        "HTTP API requests answered, by route pattern and status code.")),
      dispatch_latency_(RegisterFamily<prometheus::Histogram>(*registry_, "bakeoff_dispatch_latency_seconds",
        "Time from a trial being queued (submitted or requeued) to its first rank process starting on a worker.")
                            .Add({}, kDispatchBuckets)),
      store_write_(RegisterFamily<prometheus::Histogram>(*registry_, "bakeoff_store_write_seconds",
        "Time of one results-store write (a committed SQLite transaction), by operation.")),
      requeues_(RegisterSeries<prometheus::Counter>(*registry_, "bakeoff_trials_requeued_total",
        "Attempts lost (worker vanished) whose trial was queued again.")),
      event_throttle_(RegisterSeries<prometheus::Counter>(*registry_, "bakeoff_worker_event_throttle_seconds_total",
        "Time worker connections were read later because they sent trainer events over the per-worker rate "
        "limit.")),
      foreign_events_(RegisterSeries<prometheus::Counter>(*registry_, "bakeoff_worker_foreign_events_total",
        "Events and step blocks dropped because the sending worker was not given their attempt and rank.")),
      over_quota_events_(RegisterSeries<prometheus::Counter>(*registry_, "bakeoff_worker_over_quota_events_total",
        "Events and step blocks dropped because their rank of an attempt had stored its quota.")),
      quarantines_(RegisterSeries<prometheus::Counter>(*registry_, "bakeoff_worker_quarantines_total",
        "Workers put in quarantine (no new placements for a while) because their attempts ended within seconds "
        "of starting.")) {}

void CoordinatorMetrics::ObserveHttpRequest(const std::string& target, int status) {
  http_requests_.Add({{"route", RouteOf(target)}, {"code", std::to_string(status)}}).Increment();
}

void CoordinatorMetrics::ObserveDispatch(std::chrono::duration<double> latency) {
  dispatch_latency_.Observe(std::max(0.0, latency.count()));
}

void CoordinatorMetrics::ObserveStoreWrite(const std::string& operation, std::chrono::duration<double> elapsed) {
  auto found = store_write_by_operation_.find(operation);
  if (found == store_write_by_operation_.end()) {
    found = store_write_by_operation_.emplace(operation, &store_write_.Add({{"operation", operation}}, kStoreBuckets))
                .first;
  }
  found->second->Observe(elapsed.count());
}

void CoordinatorMetrics::CountRequeue() { requeues_.Increment(); }
void CoordinatorMetrics::CountQuarantine() { quarantines_.Increment(); }

void CoordinatorMetrics::CountForeignEvents(std::size_t n) { foreign_events_.Increment(static_cast<double>(n)); }

void CoordinatorMetrics::CountDroppedOverQuota(std::size_t n) { over_quota_events_.Increment(static_cast<double>(n)); }

void CoordinatorMetrics::CountEventThrottle(std::chrono::milliseconds delay) {
  event_throttle_.Increment(std::chrono::duration<double>(delay).count());
}

std::string CoordinatorMetrics::RouteOf(const std::string& target) {
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/healthz" || path == "/metrics") return path;
  auto seg = Segments(path);
  if (seg.size() < 3 || seg[0] != "api" || seg[1] != "v1") return "other";
  const std::string base = "/api/v1/" + seg[2];
  if (seg[2] == "sweeps") {
    if (seg.size() == 3) return base;
    if (seg.size() == 4) return base + "/{sweep}";
    if (seg.size() == 5 && (seg[4] == "trials" || seg[4] == "report" || seg[4] == "cancel")) {
      return base + "/{sweep}/" + seg[4];
    }
    return "other";
  }
  if (seg[2] == "workers") {
    if (seg.size() == 3) return base;
    if (seg.size() == 5 && seg[4] == "drain") return base + "/{worker}/drain";
    return "other";
  }
  if (seg.size() == 3 && (seg[2] == "sd" || seg[2] == "query")) return base;
  return "other";
}

std::string CoordinatorMetrics::Render(const CoordinatorSnapshot& snapshot) const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  families.push_back(metrics::BuildInfoFamily("coordinator"));

  auto trials = MakeFamily("bakeoff_trials", "Trials of the sweeps this coordinator holds, by state.", MetricType::Gauge);
  std::map<std::string, int> trial_totals;
  auto sweep_trials = MakeFamily("bakeoff_sweep_trials", "Trials of one sweep, by state.", MetricType::Gauge);
  auto sweep_outcomes = MakeFamily("bakeoff_sweep_trial_outcomes",
                                   "Finished trials of one sweep, by outcome.", MetricType::Gauge);
  auto sweep_info = MakeFamily("bakeoff_sweep_info",
                               "1 for each sweep; carries its name when /metrics needs the token.",
                               MetricType::Gauge);
  int active = 0;
  for (const auto& sweep : snapshot.sweeps) {
    const std::string id = std::to_string(sweep.id);
    active += sweep.active;
    if (sweep.name.empty()) {
      AddSample(sweep_info, {{"sweep", id}, {"active", sweep.active ? "true" : "false"}}, 1);
    } else {
      AddSample(sweep_info, {{"sweep", id}, {"name", sweep.name}, {"active", sweep.active ? "true" : "false"}}, 1);
    }
    for (metrics::TrialState trial_state : metrics::kTrialStates) {
      const char* state = metrics::TrialStateName(trial_state);
      auto found = sweep.trials_by_state.find(state);
      const int n = found == sweep.trials_by_state.end() ? 0 : found->second;
      trial_totals[state] += n;
      AddSample(sweep_trials, {{"sweep", id}, {"state", state}}, n);
    }
    for (const auto& [outcome, n] : sweep.outcomes) AddSample(sweep_outcomes, {{"sweep", id}, {"outcome", outcome}}, n);
  }
  for (metrics::TrialState trial_state : metrics::kTrialStates) {
    const char* state = metrics::TrialStateName(trial_state);
    AddSample(trials, {{"state", state}}, trial_totals[state]);
  }
  families.push_back(std::move(trials));
  if (!sweep_trials.metric.empty()) {
    families.push_back(std::move(sweep_info));
    families.push_back(std::move(sweep_trials));
  }
  if (!sweep_outcomes.metric.empty()) families.push_back(std::move(sweep_outcomes));

  auto sweeps_active = MakeFamily("bakeoff_sweeps_active", "Sweeps with trials still to run.", MetricType::Gauge);
  AddSample(sweeps_active, {}, active);
  families.push_back(std::move(sweeps_active));

  auto queue = MakeFamily("bakeoff_queue_depth", "Queued trials waiting for a placement.", MetricType::Gauge);
  AddSample(queue, {}, snapshot.queue_depth);
  families.push_back(std::move(queue));

  auto workers = MakeFamily("bakeoff_workers", "Workers known to the coordinator, by state.", MetricType::Gauge);
  for (WorkerLiveness liveness : kWorkerLivenesses) {
    const char* state = WorkerLivenessName(liveness);
    auto found = snapshot.workers_by_state.find(state);
    AddSample(workers, {{"state", state}}, found == snapshot.workers_by_state.end() ? 0 : found->second);
  }
  families.push_back(std::move(workers));
  auto connected = MakeFamily("bakeoff_workers_connected", "Workers with an open protocol connection.",
                              MetricType::Gauge);
  AddSample(connected, {}, snapshot.workers_connected);
  families.push_back(std::move(connected));

  auto slots = MakeFamily("bakeoff_cluster_cpu_slots", "CPU rank slots of live workers, by use.", MetricType::Gauge);
  AddSample(slots, {{"state", "used"}}, snapshot.cpu_slots_used);
  AddSample(slots, {{"state", "free"}}, snapshot.cpu_slots_total - snapshot.cpu_slots_used);
  families.push_back(std::move(slots));
  auto devices = MakeFamily("bakeoff_cluster_cuda_devices", "CUDA devices of live workers, by use.",
                            MetricType::Gauge);
  AddSample(devices, {{"state", "used"}}, snapshot.cuda_devices_used);
  AddSample(devices, {{"state", "free"}}, snapshot.cuda_devices_total - snapshot.cuda_devices_used);
  families.push_back(std::move(devices));

  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace bakeoff::coordinator
