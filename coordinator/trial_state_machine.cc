#include "coordinator/trial_state_machine.h"

namespace bakeoff::coordinator {

const char* TrialPhaseName(TrialPhase phase) {
  switch (phase) {
    case TrialPhase::kQueued: return "queued";
    case TrialPhase::kAssigned: return "assigned";
    case TrialPhase::kRunning: return "running";
    case TrialPhase::kFinished: return "finished";
  }
  return "finished";
}

Result<int> TrialStateMachine::Assign() {
  if (phase_ != TrialPhase::kQueued) {
    return Status::InvalidArgument(std::string("cannot assign a trial that is ") + TrialPhaseName(phase_));
  }
  if (attempts_used_ >= max_attempts_) {
    return Status::ResourceExhausted("the trial has used all " + std::to_string(max_attempts_) + " attempts");
  }
  ++attempts_used_;
  phase_ = TrialPhase::kAssigned;
  return attempts_used_;
}

bool TrialStateMachine::MarkRunning(int attempt) {
  if (phase_ != TrialPhase::kAssigned || attempt != attempts_used_) return false;
  phase_ = TrialPhase::kRunning;
  return true;
}

TrialStateMachine::Effect TrialStateMachine::Report(int attempt, protocol::Outcome outcome) {
  if (!IsCurrent(attempt)) return Effect::kIgnored;
  if (outcome == protocol::Outcome::kLost && attempts_used_ < max_attempts_) {
    phase_ = TrialPhase::kQueued;
    return Effect::kRequeued;
  }
  phase_ = TrialPhase::kFinished;
  outcome_ = outcome;
  return Effect::kFinished;
}

TrialStateMachine::Effect TrialStateMachine::Cancel() {
  if (phase_ == TrialPhase::kFinished) return Effect::kIgnored;
  phase_ = TrialPhase::kFinished;
  outcome_ = protocol::Outcome::kCancelled;
  return Effect::kFinished;
}

}  // namespace bakeoff::coordinator
