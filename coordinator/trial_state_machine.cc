#include "coordinator/trial_state_machine.h"

namespace bakeoff::coordinator {

Result<int> TrialStateMachine::Assign() {
  if (phase_ != TrialState::kQueued) {
    return Status::InvalidArgument(std::string("cannot assign a trial that is ") + TrialStateName(phase_));
  }
  if (attempts_used_ >= max_attempts_) {
    return Status::ResourceExhausted("the trial has used all " + std::to_string(max_attempts_) + " attempts");
  }
  ++attempts_used_;
  phase_ = TrialState::kAssigned;
  return attempts_used_;
}

bool TrialStateMachine::MarkRunning(int attempt) {
  if (phase_ != TrialState::kAssigned || attempt != attempts_used_) return false;
  phase_ = TrialState::kRunning;
  return true;
}

TrialStateMachine::Effect TrialStateMachine::Report(int attempt, protocol::Outcome outcome) {
  if (!IsCurrent(attempt)) return Effect::kIgnored;
  if (outcome == protocol::Outcome::kLost && attempts_used_ < max_attempts_) {
    phase_ = TrialState::kQueued;
    return Effect::kRequeued;
  }
  phase_ = TrialState::kFinished;
  outcome_ = outcome;
  return Effect::kFinished;
}

TrialStateMachine::Effect TrialStateMachine::Cancel() {
  if (phase_ == TrialState::kFinished) return Effect::kIgnored;
  phase_ = TrialState::kFinished;
  outcome_ = protocol::Outcome::kCancelled;
  return Effect::kFinished;
}

}  // namespace bakeoff::coordinator
