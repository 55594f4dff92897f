// Trainer: one rank's training run, from configuration to summary. Writes the event
// stream (ready, step, summary, or error) and returns the process exit code; it never
// throws, so every failure reaches the worker as a classified error event.
// Thread-safety: call Run once, from one thread.
#pragma once

#include <memory>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/event_writer.h"
#include "experiments/trainer/trainer_config.h"

namespace bakeoff::trainer {

class Trainer {
 public:
  // REQUIRES: FinalizeConfig(&config) succeeded; events outlives the trainer.
  Trainer(TrainerConfig config, EventWriter* events);
  int Run();

 private:
  int RunOrThrow();

  TrainerConfig config_;
  EventWriter* events_;
};

// Percentile (linear interpolation, q in [0, 1]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double q);

// Learning rate of optimizer step `step` (0-based) out of `total` steps.
double LearningRate(const TrainerConfig& config, int64_t step, int64_t total);

}  // namespace bakeoff::trainer
