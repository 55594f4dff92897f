// Hand-made ReportInputs for the report's tests: a sweep over compile_mode (eager, the
// baseline, and jit) and micro_batch (1, 4), with trials whose numbers the tests choose.
// Header-only test helper; not thread-safe (tests build fixtures on one thread).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_model.h"

namespace bakeoff::metrics::testing {

inline std::string KeyOf(const std::string& mode, const std::string& micro_batch) {
  return "compile_mode=" + mode + ",micro_batch=" + micro_batch;
}

// Four variants, baseline compile_mode=eager, interleaved order, no trials yet.
inline ReportInput TwoByTwoSweep() {
  ReportInput input;
  input.sweep_id = "7";
  input.sweep_name = "compile-vs-eager";
  input.question = "Is jit faster than eager, and what does it cost?";
  input.order = "interleaved";
  input.baseline = {{"compile_mode", "eager"}};
  input.axes = {{"compile_mode", {"eager", "jit"}}, {"micro_batch", {"1", "4"}}};
  for (const std::string mb : {"1", "4"}) {
    for (const std::string mode : {"eager", "jit"}) {
      VariantInput v;
      v.key = KeyOf(mode, mb);
      v.params = {{"compile_mode", mode}, {"micro_batch", mb}};
      v.counterpart_key = KeyOf("eager", mb);
      v.is_baseline = mode == "eager";
      input.variants.push_back(v);
    }
  }
  return input;
}

struct TrialSpec {
  double tokens_per_s = 1000;
  double first_step_s = 2.0;
  double warmup_s = 3.0;
  std::int64_t peak_bytes = 1'000'000'000;
  int steps = 10;
  double loss_start = 2.0;
  double jitter = 0.01;  // relative step-time wobble
  std::string worker = "w1";
  std::int64_t tokens_per_step = 512;
};

// A succeeded trial of two ranks: rank 0 holds `peak_bytes`, rank 1 a little less.
inline TrialInput Succeeded(const std::string& variant, int repeat, const TrialSpec& spec,
                            int order_index = -1) {
  static std::int64_t next_id = 1;
  TrialInput t;
  t.id = next_id++;
  t.variant_key = variant;
  t.repeat = repeat;
  t.order_index = order_index >= 0 ? order_index : static_cast<int>(t.id);
  t.worker = spec.worker;
  t.outcome = TrialStanding::FromText("succeeded");
  double step_s = static_cast<double>(spec.tokens_per_step) / spec.tokens_per_s;
  for (int rank = 0; rank < 2; ++rank) {
    RankSummary r;
    r.rank = rank;
    r.figures.first_step_s = spec.first_step_s;
    r.figures.warmup_s = spec.warmup_s;
    r.figures.step_s_median = step_s;
    r.figures.tokens_per_s = spec.tokens_per_s;
    r.figures.mfu = 0.3;
    r.figures.peak_mem_bytes = rank == 0 ? spec.peak_bytes : spec.peak_bytes - 1000;
    r.figures.frozen_bytes = spec.peak_bytes / 2;
    r.figures.trainable_bytes = spec.peak_bytes / 100;
    r.figures.grad_bytes = spec.peak_bytes / 100;
    r.figures.optimizer_bytes = spec.peak_bytes / 50;
    t.ranks.push_back(r);
  }
  for (int i = 0; i < spec.steps; ++i) {
    StepSample s;
    s.step = i;
    s.step_s = step_s * (1 + spec.jitter * ((i % 3) - 1));
    s.loss = spec.loss_start * std::exp(-0.01 * i);
    t.steps.push_back(s);
  }
  t.applied = {{"compile_mode", variant.find("jit") != std::string::npos ? "jit" : "eager"}};
  return t;
}

inline TrialInput Unsuccessful(const std::string& variant, int repeat, const std::string& outcome,
                               const std::string& reason, const std::string& worker = "w1") {
  static std::int64_t next_id = 100000;
  TrialInput t;
  t.id = next_id++;
  t.variant_key = variant;
  t.repeat = repeat;
  t.order_index = static_cast<int>(t.id);
  t.worker = worker;
  t.outcome = TrialStanding::FromText(outcome);
  t.reason = reason;
  return t;
}

// Fills every variant with `repeats` succeeded trials; jit runs `speedup` times faster
// than eager and micro-batch 4 three times faster than micro-batch 1. Repeat r has a
// shared drift so that pairing matters.
inline void AddTrials(ReportInput& input, int repeats, double speedup) {
  int order = 0;
  for (int r = 0; r < repeats; ++r) {
    double drift = 1 + 0.02 * ((r % 3) - 1);
    for (const VariantInput& v : input.variants) {
      TrialSpec spec;
      double base = v.params.at("micro_batch") == "4" ? 3000 : 1000;
      // jit also has its own small noise (-0.8%, 0, +0.8%, ...) so intervals have width.
      double own = 1 + 0.004 * ((r * 7) % 5 - 2);
      spec.tokens_per_s =
          base * drift * (v.params.at("compile_mode") == "jit" ? speedup * own : 1.0);
      spec.first_step_s = v.params.at("compile_mode") == "jit" ? 12.0 : 2.0;
      spec.warmup_s = v.params.at("compile_mode") == "jit" ? 13.0 : 3.0;
      input.trials.push_back(Succeeded(v.key, r, spec, order++));
    }
  }
}

// Replaces every trial of `variant` with one unsuccessful trial (Unsuccessful, repeat 0).
inline void OnlyUnsuccessful(ReportInput& input, const std::string& variant, const std::string& outcome,
                             const std::string& reason) {
  std::erase_if(input.trials, [&](const TrialInput& t) { return t.variant_key == variant; });
  input.trials.push_back(Unsuccessful(variant, 0, outcome, reason));
}

// Expects `text` to contain each of `parts`; a failure names the missing part.
inline void ExpectContains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part;
  }
}

}  // namespace bakeoff::metrics::testing
