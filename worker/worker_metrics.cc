#include "worker/worker_metrics.h"

#include <cmath>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "metrics/prometheus/prometheus_families.h"

namespace bakeoff::worker {
using metrics::RegisterFamily;
using metrics::RegisterSeries;

namespace {

// Step times from a few milliseconds (tiny CPU models) to minutes (a compiling first
// step of a large model).
const prometheus::Histogram::BucketBoundaries kStepBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

}  // namespace

WorkerMetrics::WorkerMetrics(std::shared_ptr<NodeCollector> node)
    : registry_(std::make_shared<prometheus::Registry>()),
      node_(std::move(node)),
      tokens_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_trial_tokens_total",
        "Tokens this rank processed in its steps (its share of each step's global tokens).")),
      tokens_per_second_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_tokens_per_second",
        "This rank's share of the global tokens of its last step, over that step's time.")),
      step_seconds_(RegisterFamily<prometheus::Histogram>(*registry_, "bakeoff_trial_step_seconds",
        "Time of each measured optimizer step (after warm-up), taken after a device sync.")),
      steps_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_trial_steps_total",
        "Optimizer steps this rank finished, by phase (warmup or measure).")),
      loss_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_loss",
        "Global mean training loss of the last step.")),
      peak_memory_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_peak_memory_bytes",
        "Peak memory of the rank so far: peak allocated device bytes on CUDA, peak RSS on CPU.")),
      rss_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_rss_bytes",
        "Resident set size of the rank process after its last step.")),
      device_allocated_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_device_allocated_bytes",
        "CUDA memory held by live tensors of the rank after its last step (CUDA ranks only).")),
      device_reserved_peak_(RegisterFamily<prometheus::Gauge>(*registry_, "bakeoff_trial_device_reserved_peak_bytes",
        "Peak CUDA memory reserved by the rank's caching allocator (CUDA ranks only).")),
      collective_seconds_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_trial_collective_seconds_total",
        "Seconds this rank spent in collectives (all-reduce, reduce-scatter, all-gather).")),
      collective_bytes_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_trial_collective_bytes_total",
        "Bytes this rank sent through collectives.")),
      connected_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_connected",
        "1 while the worker is registered with the coordinator, else 0.")),
      buffered_events_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_buffered_events",
        "Trainer events held in the outbox until the coordinator acknowledges them.")),
      running_trials_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_running_trials",
        "Trial attempts running on this worker.")),
      running_ranks_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_running_ranks",
        "Rank processes of running attempts on this worker.")),
      cpu_slots_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_cpu_slots",
        "CPU rank slots this worker offers.")),
      cuda_devices_(RegisterSeries<prometheus::Gauge>(*registry_, "bakeoff_worker_cuda_devices",
        "CUDA devices this worker offers.")),
      finished_(RegisterFamily<prometheus::Counter>(*registry_, "bakeoff_worker_trials_finished_total",
        "Trial attempts that ended on this worker, by outcome.")) {}

void WorkerMetrics::SetCapacity(int cpu_slots, int cuda_devices) {
  cpu_slots_.Set(cpu_slots);
  cuda_devices_.Set(cuda_devices);
}

void WorkerMetrics::SetAgentState(bool connected, std::size_t buffered_events) {
  connected_.Set(connected ? 1 : 0);
  buffered_events_.Set(static_cast<double>(buffered_events));
}

void WorkerMetrics::StartTrial(const protocol::AssignMessage& assign) {
  if (trials_.count(assign.attempt)) return;  // a redelivered assign keeps its series
  TrialSeries trial;
  trial.labels = {{"sweep", assign.sweep_id},
                  {"variant", assign.variant_key},
                  {"trial", std::to_string(assign.attempt.trial_id)}};
  trial.world_size = std::max(1, assign.world_size);
  for (const auto& slot : assign.ranks) trial.local_ranks[slot.rank] = !slot.cuda_devices.empty();
  trials_.emplace(assign.attempt, std::move(trial));
  UpdateRunningGauges();
}

WorkerMetrics::RankSeries& WorkerMetrics::SeriesFor(TrialSeries& trial, int rank) {
  auto found = trial.ranks.find(rank);
  if (found != trial.ranks.end()) return found->second;
  prometheus::Labels labels = trial.labels;
  labels["rank"] = std::to_string(rank);
  RankSeries s;
  s.tokens = &tokens_.Add(labels);
  s.tokens_per_second = &tokens_per_second_.Add(labels);
  s.step_seconds = &step_seconds_.Add(labels, kStepBuckets);
  prometheus::Labels warmup = labels, measure = labels;
  warmup["phase"] = "warmup";
  measure["phase"] = "measure";
  s.warmup_steps = &steps_.Add(warmup);
  s.measured_steps = &steps_.Add(measure);
  s.loss = &loss_.Add(labels);
  s.peak_memory = &peak_memory_.Add(labels);
  s.rss = &rss_.Add(labels);
  auto cuda = trial.local_ranks.find(rank);
  if (cuda != trial.local_ranks.end() && cuda->second) {
    s.device_allocated = &device_allocated_.Add(labels);
    s.device_reserved_peak = &device_reserved_peak_.Add(labels);
  }
  s.collective_seconds = &collective_seconds_.Add(labels);
  s.collective_bytes = &collective_bytes_.Add(labels);
  return trial.ranks.emplace(rank, s).first->second;
}

void WorkerMetrics::ObserveEvent(const protocol::AttemptRef& attempt, int rank, const protocol::TrainerEvent& event) {
  const protocol::StepEvent* step = event.step();
  if (step == nullptr) return;
  auto found = trials_.find(attempt);
  if (found == trials_.end()) return;  // ended already (a late line) or never started here
  TrialSeries& trial = found->second;
  RankSeries& s = SeriesFor(trial, rank);
  const bool warmup = step->phase == "warmup";
  (warmup ? s.warmup_steps : s.measured_steps)->Increment();
  // The parser guarantees step_s finite and >= 0, counts >= 0, numbers finite.
  if (step->row.tokens) {
    // Step events carry the step's global tokens; each rank counts its share so that
    // a sum over ranks is the trial's throughput.
    const double share = static_cast<double>(*step->row.tokens) / trial.world_size;
    s.tokens->Increment(share);
    if (step->row.step_s > 0) s.tokens_per_second->Set(share / step->row.step_s);
  }
  if (!warmup) s.step_seconds->Observe(step->row.step_s);
  if (step->row.loss) s.loss->Set(*step->row.loss);
  if (step->row.peak_mem_bytes) s.peak_memory->Set(static_cast<double>(*step->row.peak_mem_bytes));
  if (step->row.rss_bytes) s.rss->Set(static_cast<double>(*step->row.rss_bytes));
  if (s.device_allocated) {
    if (step->device_allocated_bytes) s.device_allocated->Set(*step->device_allocated_bytes);
    if (step->device_reserved_peak_bytes) s.device_reserved_peak->Set(*step->device_reserved_peak_bytes);
  }
  if (step->row.comm_s && *step->row.comm_s > 0) s.collective_seconds->Increment(*step->row.comm_s);
  if (step->row.comm_bytes && *step->row.comm_bytes > 0) s.collective_bytes->Increment(static_cast<double>(*step->row.comm_bytes));
}

void WorkerMetrics::RemoveSeries(RankSeries& s) {
  tokens_.Remove(s.tokens);
  tokens_per_second_.Remove(s.tokens_per_second);
  step_seconds_.Remove(s.step_seconds);
  steps_.Remove(s.warmup_steps);
  steps_.Remove(s.measured_steps);
  loss_.Remove(s.loss);
  peak_memory_.Remove(s.peak_memory);
  rss_.Remove(s.rss);
  if (s.device_allocated) device_allocated_.Remove(s.device_allocated);
  if (s.device_reserved_peak) device_reserved_peak_.Remove(s.device_reserved_peak);
  collective_seconds_.Remove(s.collective_seconds);
  collective_bytes_.Remove(s.collective_bytes);
}

void WorkerMetrics::EndTrial(const protocol::AttemptRef& attempt, const std::string& outcome) {
  auto found = trials_.find(attempt);
  if (found == trials_.end()) return;
  for (auto& [rank, series] : found->second.ranks) RemoveSeries(series);
  trials_.erase(found);
  finished_.Add({{"outcome", outcome.empty() ? "unknown" : outcome}}).Increment();
  UpdateRunningGauges();
}

void WorkerMetrics::UpdateRunningGauges() {
  std::size_t ranks = 0;
  for (const auto& [ref, trial] : trials_) ranks += trial.local_ranks.size();
  running_trials_.Set(static_cast<double>(trials_.size()));
  running_ranks_.Set(static_cast<double>(ranks));
}

std::string WorkerMetrics::Render() const {
  auto families = registry_->Collect();
  families.push_back(metrics::BuildInfoFamily("worker"));
  if (node_) {
    auto node = node_->Collect();
    families.insert(families.end(), node.begin(), node.end());
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace bakeoff::worker
