#include "metrics/store/store_records.h"

#include <array>
#include <utility>

namespace bakeoff::metrics {
namespace {

template <typename Enum, size_t N>
Result<Enum> ParseName(const std::array<std::pair<Enum, const char*>, N>& names,
                       const std::string& name, const char* what) {
  std::string allowed;
  for (const auto& [value, text] : names) {
    if (name == text) return value;
    allowed += allowed.empty() ? "" : ", ";
    allowed += text;
  }
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + name +
                                 "': expected one of " + allowed);
}

template <typename Enum, size_t N>
const char* NameOf(const std::array<std::pair<Enum, const char*>, N>& names, Enum value) {
  for (const auto& [v, text] : names) {
    if (v == value) return text;
  }
  return "unknown";
}

constexpr std::array<std::pair<TrialState, const char*>, 4> kTrialStateNames{{
    {TrialState::kQueued, "queued"},
    {TrialState::kAssigned, "assigned"},
    {TrialState::kRunning, "running"},
    {TrialState::kFinished, "finished"},
}};

constexpr std::array<std::pair<SweepState, const char*>, 3> kSweepStateNames{{
    {SweepState::kRunning, "running"},
    {SweepState::kFinished, "finished"},
    {SweepState::kCancelled, "cancelled"},
}};

constexpr std::array<std::pair<WorkerState, const char*>, 5> kWorkerStateNames{{
    {WorkerState::kIdle, "idle"},
    {WorkerState::kBusy, "busy"},
    {WorkerState::kDraining, "draining"},
    {WorkerState::kLost, "lost"},
    {WorkerState::kGone, "gone"},
}};

}  // namespace

const char* TrialStateName(TrialState state) { return NameOf(kTrialStateNames, state); }
const char* SweepStateName(SweepState state) { return NameOf(kSweepStateNames, state); }
const char* WorkerStateName(WorkerState state) { return NameOf(kWorkerStateNames, state); }

Result<TrialState> ParseTrialState(const std::string& name) {
  return ParseName(kTrialStateNames, name, "trial state");
}
Result<Outcome> ParseOutcome(const std::string& name) {
  if (auto outcome = protocol::ParseOutcome(name)) return *outcome;
  std::string allowed;
  for (Outcome o : protocol::kAllOutcomes) allowed += (allowed.empty() ? "" : ", ") + std::string(OutcomeName(o));
  return Status::InvalidArgument("unknown outcome '" + name + "': expected one of " + allowed);
}
Result<SweepState> ParseSweepState(const std::string& name) {
  return ParseName(kSweepStateNames, name, "sweep state");
}
Result<WorkerState> ParseWorkerState(const std::string& name) {
  return ParseName(kWorkerStateNames, name, "worker state");
}

Result<SummaryRecord> ReadSummaryRecord(const TrialSummary& summary) {
  auto figures = protocol::ReadSummaryEvent(summary.summary);
  if (!figures.ok()) {
    return figures.status().WithContext("summary of trial " + std::to_string(summary.trial_id) + " rank " +
                                        std::to_string(summary.rank));
  }
  return SummaryRecord{summary.trial_id, summary.attempt, summary.rank, std::move(figures).value(), summary.summary};
}

std::optional<int64_t> SweepIdToTry(const std::string& id_or_name) {
  if (id_or_name.empty() || id_or_name.size() > 18 ||
      id_or_name.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(id_or_name);
}

}  // namespace bakeoff::metrics
