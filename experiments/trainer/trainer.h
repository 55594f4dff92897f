// Trainer: one rank's training run, from configuration to summary. Writes the event
// stream (ready, step, summary, or error) and returns the process exit code; it never
// throws, so every failure reaches the worker as a classified error event.
// Thread-safety: call Run once, from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>

#include "experiments/trainer/communicator.h"
#include "experiments/trainer/event_writer.h"
#include "experiments/trainer/trainer_config.h"
#include "experiments/trainer/turn_client.h"

namespace bakeoff::trainer {

class LoraModel;

class Trainer {
 public:
  // REQUIRES: FinalizeConfig(&config) succeeded; events outlives the trainer.
  Trainer(TrainerConfig config, EventWriter* events);
  int Run();

 private:
  // The run's state between its phases (defined in trainer.cc).
  struct Machine;      // what was decided and set up for this machine
  struct Parts;        // communicator, data, model, optimizer
  struct StepTotals;   // what the summary needs from the steps
  struct StepFigures;  // one step, as its "step" event reports it

  // The phases, in order. One that returns an exit code has written the error event.
  int RunOrThrow();
  // Settings whose best value depends on this machine (threads, bf16_matmul), decided on
  // it, each with its reason; config_ then holds what runs.
  Machine DecideForThisMachine();
  // The fuser, the JIT executor and the host allocator, as decided or requested.
  std::optional<int> ConfigureRuntime(const torch::Device& device, Machine& machine);
  // The communicator (process group) over every rank of the trial.
  std::optional<int> Connect(const torch::Device& device, Parts& parts);
  // The data, the model, the optimizer and the micro-batch runner (graphed or not).
  std::optional<int> BuildModel(const torch::Device& device, Parts& parts);
  // The "ready" event; returns the environment, which the summary repeats.
  nlohmann::json AnnounceReady(const Machine& machine, const torch::Device& device, const Parts& parts);
  // Steps [first, end), each reported as a "step" event; measured ones add to totals.
  std::optional<int> RunSteps(int64_t first, int64_t end, const torch::Device& device, Parts& parts,
                              StepTotals& totals);
  // Ends the lockstep turns and passes `exit_code` on.
  int EndTurns(int exit_code) {
    turns_.End();
    return exit_code;
  }
  // One optimizer step over grad_accum micro-batches, timed; adds the lengths it ran.
  StepFigures RunStep(int64_t step, const torch::Device& device, Parts& parts, std::set<int64_t>& seq_lengths);
  // Rank 0's trained adapters to adapters_out, when the sweep names one.
  std::optional<int> WriteAdapters(LoraModel& model);
  // The summary's evidence of what ran (applied), which the report sets beside the request.
  nlohmann::json Applied(const Machine& machine, const torch::Device& device, Parts& parts,
                         std::size_t seq_lengths);
  // The "summary" event; returns the exit code of a run that succeeded.
  int WriteSummary(const Machine& machine, const torch::Device& device, Parts& parts, const StepTotals& totals,
                   const nlohmann::json& environment, double startup_s);

  TrainerConfig config_;
  EventWriter* events_;
  // Lockstep turns (docs/lockstep.md): inactive unless the worker gave a turn channel.
  TurnClient turns_ = TurnClient::FromEnvironment();
};

// Percentile (linear interpolation, q in [0, 1]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double q);

// Learning rate of optimizer step `step` (0-based) out of `total` steps.
double LearningRate(const TrainerConfig& config, int64_t step, int64_t total);

}  // namespace bakeoff::trainer
