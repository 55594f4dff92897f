// The sweeps the integration suites submit, written once: the `lora` executor on the
// tiny model, with what differs between suites (length, axes, repeats, limits) as fields.
// Thread-safety: a value type.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace bakeoff::testing {

struct TinyLoraSweep {
  std::string name;
  std::string question;
  int seq_len = 16;
  int warmup_steps = 1;
  int steps = 3;
  bool one_thread = true;  // `threads: 1`
  // The axes under `parameters:`, one a line.
  std::vector<std::string> parameters = {"micro_batch: {values: [1, 2]}"};
  std::string baseline = "{micro_batch: 1}";  // "": none
  int repeats = 2;
  std::string more;  // top-level lines between `repeats` and `limits`, each ending in "\n"
  std::string trial_timeout = "5m";
  int max_attempts = 2;

  // The sweep as YAML, one key a line in the order above.
  std::string Yaml() const {
    std::string yaml = "name: " + name + "\nquestion: " + question +
                       "\nworkload:\n  executor: lora\n  model: tiny\n  seq_len: " + std::to_string(seq_len) +
                       "\n  warmup_steps: " + std::to_string(warmup_steps) + "\n  steps: " + std::to_string(steps) +
                       "\n" + (one_thread ? "  threads: 1\n" : "") + "parameters:\n";
    for (const auto& axis : parameters) yaml += "  " + axis + "\n";
    if (!baseline.empty()) yaml += "baseline: " + baseline + "\n";
    yaml += "repeats: " + std::to_string(repeats) + "\n" + more;
    return yaml + "limits: {trial_timeout: " + trial_timeout + ", max_attempts: " + std::to_string(max_attempts) +
           "}\n";
  }
};

// A sweep `name` of two short trials a repeat (micro_batch 1 and 2, the baseline 1) of
// `steps` steps each, its workload in flow style, with `more_workload` (", key: value"
// each) added to it.
inline std::string QuickSweep(const std::string& name, int steps, int repeats = 1,
                              const std::string& more_workload = "") {
  return "name: " + name + "\nworkload: {executor: lora, model: tiny, steps: " + std::to_string(steps) +
         ", warmup_steps: 0, seq_len: 16" + more_workload +
         "}\nparameters:\n  micro_batch: {values: [1, 2]}\nbaseline: {micro_batch: 1}\nrepeats: " +
         std::to_string(repeats) + "\n";
}

// The head of an executor catalog (docs/executors.md) whose one template, `probe`, runs
// {dir}/probe.py with the system's Python and experiments/python (bakeoff_report) on its
// path; the template's other keys (trainer_fields, fields, args) follow, indented by 4.
inline constexpr const char* kProbeCatalogHead =
    "python: /usr/bin/python3\n"
    "templates:\n"
    "  probe:\n"
    "    argv: [\"{python}\", \"{dir}/probe.py\", \"--config\", \"{config}\"]\n"
    "    env:\n"
    "      pass: [PATH]\n"
    "      set: {PYTHONPATH: \"" BAKEOFF_SOURCE_DIR "/experiments/python\"}\n";

// 7 axes (1,000,000 grid points) and an exclude rule for each of the 127 combinations of
// them: 448 axes named, 448,000,000 steps of exclude work, over the default limit.
inline std::string EveryCombinationOfSevenAxes() {
  const std::vector<std::pair<std::string, int>> axes = {
      {"seed", 10}, {"micro_batch", 10}, {"grad_accum", 10}, {"steps", 10},
      {"seq_len", 10}, {"lora_rank", 5}, {"warmup_steps", 2}};
  std::string text = "name: shapes\nworkload: {executor: lora, model: tiny}\nparameters:\n";
  for (const auto& [axis, n] : axes) {
    text += "  " + axis + ": {values: [";
    for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(i + 2);
    text += "]}\n";
  }
  text += "repeats: 1\nexclude:\n";
  for (int mask = 1; mask < 128; ++mask) {
    std::string rule;
    for (int a = 0; a < 7; ++a) {
      if (mask & (1 << a)) rule += (rule.empty() ? "" : ", ") + axes[a].first + ": 3";
    }
    text += "  - {" + rule + "}\n";
  }
  return text;
}

// Four one-rank trials of the real trainer, each a few seconds long on a 2-core machine.
inline const std::string kFourTrialSweep =
    TinyLoraSweep{.name = "faults",
                  .question = "does every trial end exactly once?",
                  .seq_len = 64,
                  .steps = 300,
                  .max_attempts = 3}
        .Yaml();

}  // namespace bakeoff::testing
