#include "coordinator/event_ingest.h"

#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "protocol/trainer_event.h"

namespace bakeoff::coordinator {
namespace {

enum class Provenance { kStore, kStale, kForeign };

// The rule of docs/security.md, "A worker speaks only for its own ranks".
Provenance ProvenanceOf(const TrialTable& table, const std::string& worker_id, const protocol::AttemptRef& attempt,
                        int rank) {
  const TrialEntry* trial = table.FindTrial(attempt.trial_id);
  if (trial == nullptr || !trial->machine.IsCurrent(attempt.attempt)) return Provenance::kStale;
  if (const TrialPart* part = table.CurrentPart(attempt.trial_id, attempt.attempt, worker_id)) {
    for (const auto& slot : part->ranks) {
      if (slot.rank == rank) return Provenance::kStore;
    }
  }
  return Provenance::kForeign;
}

std::string RankName(const protocol::AttemptRef& attempt, int rank) {
  return "trial " + std::to_string(attempt.trial_id) + " attempt " + std::to_string(attempt.attempt) + " rank " +
         std::to_string(rank);
}

}  // namespace

// What one frame dropped, by reason: how many, and the first, for one log line each.
struct EventIngest::Drops {
  struct Kind {
    std::size_t count = 0;
    std::string first;
    void Add(std::size_t n, const std::string& what) {
      if (count == 0) first = what;
      count += n;
    }
  };
  Kind unreadable, foreign, over_quota;
};

EventIngest::EventIngest(std::size_t max_events_per_s, metrics::ResultsStore& store, CoordinatorMetrics& metrics,
                         const logging::Logger& log)
    : max_events_per_s_(max_events_per_s), store_(store), metrics_(metrics), log_(log) {}

bool EventIngest::Keep(const std::string& worker_id, const TrialTable& table, const protocol::AttemptRef& attempt,
                       int rank, Drops& drops) {
  const Provenance p = ProvenanceOf(table, worker_id, attempt, rank);
  if (p == Provenance::kForeign) drops.foreign.Add(1, RankName(attempt, rank));
  return p == Provenance::kStore;
}

bool EventIngest::WithinCount(const protocol::AttemptRef& attempt, int rank, bool steps, std::size_t rows,
                              Drops& drops) {
  Quota& q = quotas_[{attempt.trial_id, attempt.attempt, rank}];
  std::size_t& used = steps ? q.step_rows : q.other_events;
  const std::size_t limit = steps ? kMaxStepRowsPerRank : kMaxOtherEventsPerRank;
  if (used + rows <= limit) {
    used += rows;
    return true;
  }
  drops.over_quota.Add(1, RankName(attempt, rank) + ": over " + std::to_string(limit) +
                              (steps ? " step rows" : " events other than steps and summaries"));
  return false;
}

bool EventIngest::WithinBytes(const protocol::AttemptRef& attempt, int rank, const nlohmann::json& body,
                              Drops& drops) {
  Quota& q = quotas_[{attempt.trial_id, attempt.attempt, rank}];
  const std::size_t bytes = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (q.event_bytes + bytes <= kMaxEventBytesPerRank) {
    q.event_bytes += bytes;
    return true;
  }
  drops.over_quota.Add(1, RankName(attempt, rank) + ": over " + std::to_string(kMaxEventBytesPerRank) +
                              " bytes of events other than steps");
  return false;
}

void EventIngest::AddEvent(const protocol::TrialEvent& ev, metrics::MetricsBatch& batch,
                           std::set<std::int64_t>& started, Drops& drops) {
  // Read once into its type, with the checks the worker applied to the trainer's line:
  // an event that does not read (a worker that skipped them) is dropped, not stored.
  auto read = protocol::TrainerEventFromJson(ev.event);
  if (!read.ok()) {
    drops.unreadable.Add(1, read.status().message());
    return;
  }
  protocol::TrainerEvent& e = *read;
  if (const protocol::StepEvent* step = e.step()) {
    if (!WithinCount(ev.attempt, ev.rank, true, 1, drops)) return;
    // A step outside a block (a sender of protocol 1's form): a block of one.
    batch.step_blocks.push_back(
        metrics::StepBlockRecord{ev.attempt.trial_id, ev.attempt.attempt, ev.rank, step->phase, {step->row}});
  } else if (const protocol::SummaryEvent* summary = e.summary()) {
    if (!WithinBytes(ev.attempt, ev.rank, e.body, drops)) return;
    batch.summaries.push_back(
        metrics::SummaryRecord{ev.attempt.trial_id, ev.attempt.attempt, ev.rank, *summary, std::move(e.body)});
  } else {
    if (!WithinBytes(ev.attempt, ev.rank, e.body, drops)) return;
    if (!WithinCount(ev.attempt, ev.rank, false, 1, drops)) return;
    metrics::EventRecord r;
    r.trial_id = ev.attempt.trial_id;
    r.attempt = ev.attempt.attempt;
    r.rank = ev.rank;
    r.kind = e.kind.empty() ? "unknown" : e.kind;
    r.data = std::move(e.body);
    if (e.at) r.at = *e.at;
    if (ev.seq > 0) r.seq = ev.seq;
    batch.events.push_back(std::move(r));
    if (e.kind == "started" || e.kind == "ready") started.insert(ev.attempt.trial_id);
  }
}

void EventIngest::ReportDrops(const std::string& worker_id, const Drops& drops) {
  if (drops.unreadable.count > 0) {
    log_.Warning("dropped unreadable events or step blocks",
                 {{"worker", worker_id}, {"count", drops.unreadable.count}, {"first", drops.unreadable.first}});
  }
  if (drops.foreign.count > 0) {
    metrics_.CountForeignEvents(drops.foreign.count);
    log_.Warning("dropped events or step blocks for ranks the worker was not given",
                 {{"worker", worker_id}, {"count", drops.foreign.count}, {"first", drops.foreign.first}});
  }
  if (drops.over_quota.count > 0) {
    metrics_.CountDroppedOverQuota(drops.over_quota.count);
    log_.Warning("dropped events or step blocks over their rank's quota",
                 {{"worker", worker_id}, {"count", drops.over_quota.count}, {"first", drops.over_quota.first}});
  }
}

Result<std::set<std::int64_t>> EventIngest::Store(const std::string& worker_id,
                                                  const protocol::EventsMessage& message,
                                                  const TrialTable& table) {
  metrics::MetricsBatch batch;
  std::set<std::int64_t> started;
  Drops drops;
  for (const auto& ev : message.events) {
    if (Keep(worker_id, table, ev.attempt, ev.rank, drops)) AddEvent(ev, batch, started, drops);
  }
  for (const auto& block : message.steps) {
    if (!Keep(worker_id, table, block.attempt, block.rank, drops)) continue;
    if (!WithinCount(block.attempt, block.rank, true, block.rows.size(), drops)) continue;
    batch.step_blocks.push_back(
        metrics::StepBlockRecord{block.attempt.trial_id, block.attempt.attempt, block.rank, block.phase, block.rows});
  }
  if (!message.unreadable_steps.empty()) {
    drops.unreadable.Add(message.unreadable_steps.size(), message.unreadable_steps.front());
  }
  ReportDrops(worker_id, drops);
  if (!batch.step_blocks.empty() || !batch.summaries.empty() || !batch.events.empty()) {
    CoordinatorMetrics::StoreWriteTimer timer(metrics_, "append_events");
    auto written = store_.AppendBatch(batch);
    if (!written.ok()) return written.status();
  }
  return started;
}

void EventIngest::ForgetAttempt(const protocol::AttemptRef& attempt) {
  auto first = quotas_.lower_bound({attempt.trial_id, attempt.attempt, std::numeric_limits<int>::min()});
  auto last = quotas_.upper_bound({attempt.trial_id, attempt.attempt, std::numeric_limits<int>::max()});
  quotas_.erase(first, last);
}

std::chrono::milliseconds EventIngest::ReadDelay(const std::string& worker_id, const nlohmann::json& frame,
                                                 Clock::TimePoint now) {
  if (max_events_per_s_ == 0 || frame.value("type", "") != protocol::kTypeEvents) {
    return std::chrono::milliseconds(0);
  }
  // Each step of a step block counts as an event.
  std::size_t count = 0;
  if (auto events = frame.find("events"); events != frame.end() && events->is_array()) count += events->size();
  if (auto steps = frame.find("steps"); steps != frame.end() && steps->is_array()) {
    for (const auto& block : *steps) {
      auto rows = block.is_object() ? block.find("step") : block.end();
      if (rows != block.end() && rows->is_array()) count += rows->size();
    }
  }
  if (count == 0) return std::chrono::milliseconds(0);
  auto budget = budgets_.try_emplace(worker_id, Budget{EventRateLimiter(max_events_per_s_)}).first;
  auto wait = budget->second.limiter.Take(count, now);
  if (wait.count() > 0) {
    metrics_.CountEventThrottle(wait);
    if (now - budget->second.last_logged > std::chrono::seconds(10)) {
      budget->second.last_logged = now;
      log_.Info("a worker sends over its event rate; reading it more slowly (events are delayed, not dropped)",
                {{"worker", worker_id}, {"max_events_per_s", max_events_per_s_}});
    }
  }
  return wait;
}

}  // namespace bakeoff::coordinator
