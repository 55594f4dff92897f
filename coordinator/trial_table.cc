#include "coordinator/trial_table.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "coordinator/sweep_intake.h"

namespace bakeoff::coordinator {

Status TrialTable::Recover(metrics::ResultsStore& store, Clock::TimePoint now,
                           std::chrono::milliseconds recovery_grace) {
  auto active = store.Reader()->ListActiveTrials();
  if (!active.ok()) return active.status().WithContext("recovery");
  std::map<std::int64_t, metrics::TrialResult> by_id;
  for (auto& t : *active) by_id[t.trial.id] = t;
  auto sweeps = store.Reader()->ListSweeps(metrics::SweepState::kRunning);
  if (!sweeps.ok()) return sweeps.status().WithContext("recovery");
  for (const auto& record : *sweeps) {
    BAKEOFF_RETURN_IF_ERROR(LoadSweep(store, record, by_id, now, recovery_grace));
  }
  return Status::Ok();
}

Status TrialTable::LoadSweep(metrics::ResultsStore& store, const metrics::SweepRecord& record,
                             const std::map<std::int64_t, metrics::TrialResult>& active, Clock::TimePoint now,
                             std::chrono::milliseconds recovery_grace) {
  auto loaded = SweepFromStore(record, store);
  if (!loaded.ok()) return loaded.status();
  SweepEntry sweep = std::move(loaded).value();
  auto trials = store.Reader()->ListTrials(record.id);
  if (!trials.ok()) return trials.status();
  for (const auto& t : *trials) {
    TrialEntry entry;
    entry.id = t.id;
    entry.sweep_id = t.sweep_id;
    entry.variant_key = t.variant_key;
    entry.order_index = t.order_index;
    entry.repeat = static_cast<int>(t.repeat);
    const TrialState phase = t.state;
    entry.machine = TrialStateMachine(static_cast<int>(t.max_attempts), static_cast<int>(t.attempts_used), phase);
    if (phase == TrialState::kQueued) entry.queued_since = now;  // this process queued it
    if (phase == TrialState::kAssigned || phase == TrialState::kRunning) {
      entry.reclaim_deadline = now + recovery_grace;
      awaiting_reclaim_.insert(t.id);
      auto found = active.find(t.id);
      if (found != active.end() && found->second.attempt) {
        std::map<std::string, TrialPart> parts;
        for (const auto& r : found->second.attempt->ranks) {
          TrialPart& part = parts[r.worker_id];
          part.worker_id = r.worker_id;
          part.reclaimed = false;
          protocol::RankSlot slot;
          slot.rank = static_cast<int>(r.rank);
          slot.local_rank = static_cast<int>(part.ranks.size());
          if (r.device.rfind("cuda:", 0) == 0) {
            part.cuda = true;
            slot.cuda_devices = {std::atoi(r.device.c_str() + 5)};
          }
          part.ranks.push_back(slot);
        }
        for (auto& [wid, part] : parts) entry.parts.push_back(std::move(part));
      }
    }
    // A running trial placed whole on one worker keeps its pair group there.
    if (entry.parts.size() == 1) NamePairWorker(sweep, entry, entry.parts.front().worker_id);
    sweep.trial_order.push_back(t.id);
    trials_[t.id] = std::move(entry);
  }
  sweeps_[sweep.id] = std::move(sweep);
  return Status::Ok();
}

void TrialTable::AddSubmitted(SweepEntry sweep, const std::vector<std::int64_t>& trial_ids,
                              const std::vector<metrics::NewTrial>& trials, int max_attempts, Clock::TimePoint now) {
  for (std::size_t i = 0; i < trial_ids.size(); ++i) {
    TrialEntry entry;
    entry.id = trial_ids[i];
    entry.sweep_id = sweep.id;
    entry.variant_key = trials[i].variant_key;
    entry.order_index = trials[i].order_index;
    entry.repeat = static_cast<int>(trials[i].repeat);
    entry.machine = TrialStateMachine(max_attempts);
    entry.queued_since = now;
    sweep.trial_order.push_back(entry.id);
    trials_[entry.id] = std::move(entry);
  }
  sweeps_[sweep.id] = std::move(sweep);
}

void TrialTable::Clear() {
  trials_.clear();
  sweeps_.clear();
  awaiting_reclaim_.clear();
  attempt_deadlines_.clear();
}

namespace {
// The entry under `key`, or nullptr; one body for the const and the mutable lookups.
template <typename Map>
auto* EntryIn(Map& map, std::int64_t key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}
}  // namespace

SweepEntry* TrialTable::FindSweep(std::int64_t sweep_id) { return EntryIn(sweeps_, sweep_id); }
const SweepEntry* TrialTable::FindSweep(std::int64_t sweep_id) const { return EntryIn(sweeps_, sweep_id); }
TrialEntry* TrialTable::FindTrial(std::int64_t trial_id) { return EntryIn(trials_, trial_id); }
const TrialEntry* TrialTable::FindTrial(std::int64_t trial_id) const { return EntryIn(trials_, trial_id); }

const TrialPart* TrialTable::CurrentPart(std::int64_t trial_id, int attempt, const std::string& worker_id) const {
  const TrialEntry* trial = FindTrial(trial_id);
  if (trial == nullptr || !trial->machine.IsCurrent(attempt)) return nullptr;
  const TrialPart* part = nullptr;
  for (const auto& p : trial->parts) {
    if (p.worker_id == worker_id) part = &p;
  }
  return part;
}

TrialPart* TrialTable::CurrentPart(std::int64_t trial_id, int attempt, const std::string& worker_id) {
  return const_cast<TrialPart*>(std::as_const(*this).CurrentPart(trial_id, attempt, worker_id));
}

std::vector<std::int64_t> TrialTable::RunningOn(const std::string& worker_id) const {
  std::vector<std::int64_t> ids;
  for (const auto& [tid, trial] : trials_) {
    if (!trial.machine.IsCurrent(trial.machine.attempts_used())) continue;
    for (const auto& p : trial.parts) {
      if (p.worker_id == worker_id && !p.finished) {
        ids.push_back(tid);
        break;
      }
    }
  }
  return ids;
}

bool TrialTable::AllFinished(SweepEntry& sweep) const {
  while (sweep.finished_prefix < sweep.trial_order.size() &&
         trials_.at(sweep.trial_order[sweep.finished_prefix]).machine.phase() == TrialState::kFinished) {
    ++sweep.finished_prefix;
  }
  return sweep.finished_prefix == sweep.trial_order.size();
}

std::size_t TrialTable::EvictDone(const std::function<void(const SweepEntry&)>& before) {
  std::size_t evicted = 0;
  for (auto it = sweeps_.begin(); it != sweeps_.end();) {
    const SweepEntry& sweep = it->second;
    if (!sweep.done || !sweep.state_stored) {
      ++it;
      continue;
    }
    before(sweep);
    for (std::int64_t tid : sweep.trial_order) trials_.erase(tid);
    evicted += sweep.trial_order.size();
    it = sweeps_.erase(it);
  }
  return evicted;
}

std::vector<std::int64_t> TrialTable::SweepIds() const {
  std::vector<std::int64_t> ids;
  for (const auto& [id, sweep] : sweeps_) ids.push_back(id);
  return ids;
}

std::size_t TrialTable::QueuedCount() const {
  std::size_t n = 0;
  for (const auto& [id, t] : trials_) n += t.machine.phase() == TrialState::kQueued;
  return n;
}

std::set<std::string> TrialTable::AwaitedWorkers() const {
  std::set<std::string> workers;
  for (std::int64_t id : awaiting_reclaim_) {
    const TrialEntry* t = FindTrial(id);
    if (t == nullptr || !t->reclaim_deadline) continue;
    for (const auto& p : t->parts) {
      if (!p.reclaimed) workers.insert(p.worker_id);
    }
  }
  return workers;
}

std::optional<std::chrono::steady_clock::duration> TrialTable::MarkRunning(TrialEntry& trial, Clock::TimePoint now) {
  trial.machine.MarkRunning(trial.machine.attempts_used());
  if (!trial.queued_since) return std::nullopt;
  const auto waited = now - *trial.queued_since;
  trial.queued_since.reset();
  return waited;
}

void TrialTable::Requeued(TrialEntry& trial, Clock::TimePoint now) {
  trial.queued_since = now;
  // Queued again, possibly before the sweep's cursor.
  if (SweepEntry* sweep = FindSweep(trial.sweep_id)) sweep->queued_from = 0;
}

std::size_t TrialTable::AdvanceQueueCursor(std::int64_t sweep_id) {
  SweepEntry& sweep = sweeps_.at(sweep_id);
  // Trials before queued_from are not queued (assigned, running or finished; a requeue
  // resets it).
  while (sweep.queued_from < sweep.trial_order.size() &&
         trials_.at(sweep.trial_order[sweep.queued_from]).machine.phase() != TrialState::kQueued) {
    ++sweep.queued_from;
  }
  return sweep.queued_from;
}

TrialTable::Cancelling TrialTable::CancelSweep(SweepEntry& sweep) {
  sweep.cancelled = true;
  Cancelling cancelling;
  for (std::int64_t tid : sweep.trial_order) {
    TrialEntry& trial = trials_.at(tid);
    if (trial.machine.phase() == TrialState::kQueued) {
      trial.machine.Cancel();
    } else if (trial.machine.phase() != TrialState::kFinished) {
      trial.cancel_requested = true;
      ++cancelling.stopping;
      const protocol::AttemptRef ref{tid, trial.machine.attempts_used()};
      for (const auto& p : trial.parts) {
        if (!p.finished) cancelling.cancels.emplace_back(p.worker_id, ref);
      }
    }
  }
  return cancelling;
}

std::vector<TrialEntry*> TrialTable::QueuedTrialsOf(const SweepEntry& sweep, const std::string& variant_key) {
  std::vector<TrialEntry*> queued;
  for (std::int64_t id : sweep.trial_order) {
    TrialEntry& trial = trials_.at(id);
    if (trial.variant_key == variant_key && trial.machine.phase() == TrialState::kQueued && !trial.cancel_requested) {
      queued.push_back(&trial);
    }
  }
  return queued;
}

TrialTable::Reclaim TrialTable::ReclaimWorker(const std::string& worker_id,
                                              const std::vector<protocol::AttemptRef>& running,
                                              const std::set<protocol::AttemptRef>& held) {
  Reclaim reclaim;
  for (const auto& ref : running) {
    TrialPart* part = CurrentPart(ref.trial_id, ref.attempt, worker_id);
    if (part == nullptr) {
      reclaim.stale.push_back(ref);
    } else if (!part->reclaimed || !held.count(ref)) {
      part->reclaimed = true;
      reclaim.parts.emplace_back(ref, part);
    }
  }
  const std::set<protocol::AttemptRef> claimed(running.begin(), running.end());
  for (std::int64_t tid : RunningOn(worker_id)) {
    if (!claimed.count(protocol::AttemptRef{tid, trials_.at(tid).machine.attempts_used()})) reclaim.lost.push_back(tid);
  }
  return reclaim;
}

std::vector<std::int64_t> TrialTable::TakeUnreclaimed(Clock::TimePoint now) {
  // Only the attempts recovered after a restart have a reclaim deadline: walk those, not
  // every trial held.
  std::vector<std::int64_t> lost;
  for (auto waiting = awaiting_reclaim_.begin(); waiting != awaiting_reclaim_.end();) {
    TrialEntry* trial = FindTrial(*waiting);
    if (trial == nullptr || !trial->reclaim_deadline) {
      waiting = awaiting_reclaim_.erase(waiting);
      continue;
    }
    if (now < *trial->reclaim_deadline) {
      ++waiting;
      continue;
    }
    waiting = awaiting_reclaim_.erase(waiting);
    trial->reclaim_deadline.reset();
    bool all_reclaimed = !trial->parts.empty();
    for (const auto& p : trial->parts) all_reclaimed = all_reclaimed && p.reclaimed;
    if (!all_reclaimed && trial->machine.IsCurrent(trial->machine.attempts_used())) lost.push_back(trial->id);
  }
  return lost;
}

void TrialTable::SetAttemptDeadline(TrialEntry& trial, Clock::TimePoint at) {
  trial.attempt_deadline = at;
  attempt_deadlines_.insert({at, trial.id});
}

std::vector<std::int64_t> TrialTable::TakeOverdue(Clock::TimePoint now) {
  std::vector<std::int64_t> overdue;
  while (!attempt_deadlines_.empty() && attempt_deadlines_.begin()->first <= now) {
    const auto [at, trial_id] = *attempt_deadlines_.begin();
    attempt_deadlines_.erase(attempt_deadlines_.begin());
    TrialEntry* trial = FindTrial(trial_id);
    if (trial == nullptr || trial->attempt_deadline != at) continue;  // stale
    trial->attempt_deadline.reset();
    if (trial->machine.IsCurrent(trial->machine.attempts_used())) overdue.push_back(trial_id);
  }
  return overdue;
}

std::optional<metrics::TrialCounts> TrialTable::LiveCounts(std::int64_t sweep_id) const {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.done) return std::nullopt;
  const SweepEntry& sweep = it->second;
  if (sweep.trial_order.empty()) return std::nullopt;
  // A sweep's trial ids are one range (stored together): walk that range of the id-ordered
  // table instead of looking each trial up.
  const auto [lo, hi] = std::minmax_element(sweep.trial_order.begin(), sweep.trial_order.end());
  metrics::TrialCounts counts;
  std::size_t seen = 0;
  for (auto t = trials_.lower_bound(*lo); t != trials_.end() && t->first <= *hi; ++t) {
    const TrialEntry& trial = t->second;
    if (trial.sweep_id != sweep_id) continue;
    ++seen;
    switch (trial.machine.phase()) {
      case TrialState::kQueued: ++counts.queued; break;
      case TrialState::kAssigned: ++counts.assigned; break;
      case TrialState::kRunning: ++counts.running; break;
      case TrialState::kFinished:
        ++counts.finished;
        ++(trial.machine.outcome() == protocol::Outcome::kSucceeded ? counts.succeeded : counts.unsuccessful);
        if (trial.machine.outcome() == protocol::Outcome::kCancelled) ++counts.cancelled;
        break;
    }
  }
  // Every trial of the sweep is held while it runs; if not, the store counts.
  if (seen != sweep.trial_order.size()) return std::nullopt;
  return counts;
}

}  // namespace bakeoff::coordinator
