// A real results database for the report's tests: a sweep parsed and expanded by the
// spec code and stored by the ResultsStore exactly as the coordinator does, with
// helpers that run trials through the store's transitions (steps, summaries, outcome).
// Test-only; one fixture per test, single-threaded.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"
#include "metrics/store/results_store.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {

// compile_mode [eager, jit] x micro_batch [1, 4], baseline eager, 2 repeats, interleaved.
inline constexpr const char* kSweepYaml = R"yaml(
name: loader-test
question: How much faster is jit, and at what memory cost?
workload:
  executor: lora
  model: tiny
  seq_len: 16
  warmup_steps: 1
  steps: 6
method: grid
parameters:
  compile_mode: {values: [eager, jit]}
  micro_batch: {values: [1, 4]}
  world_size: {value: 2}
baseline: {compile_mode: eager}
repeats: 2
order: interleaved
resources: {device: cpu}
limits: {trial_timeout: 10m, max_attempts: 2}
)yaml";

class ReportStoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("results.db");
    StoreOptions options;
    options.path = path_;
    options.env = &env_;
    auto store = ResultsStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  // Stores the sweep as the coordinator does; returns its id.
  int64_t CreateSweep() {
    auto spec = spec::ParseSweepText(kSweepYaml, "loader-test.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    auto expanded = spec::Expand(*spec);
    EXPECT_TRUE(expanded.ok()) << expanded.status().ToString();
    SweepRecord record;
    record.name = spec->name;
    record.question = spec->question;
    record.yaml = kSweepYaml;
    record.spec = spec::ToJson(*spec);
    std::vector<VariantRecord> variants;
    for (const auto& v : expanded->variants) {
      VariantRecord vr;
      vr.key = v.key;
      vr.ordinal = static_cast<int64_t>(v.index);
      for (const auto& [axis, value] : v.axis_values) vr.params[axis] = value;
      vr.trainer_config = v.config.Merged();
      vr.counterpart_key = v.counterpart_key;
      vr.is_baseline = v.is_baseline;
      vr.counterpart_excluded = v.counterpart_excluded;
      variants.push_back(vr);
    }
    std::vector<NewTrial> trials;
    for (const auto& t : expanded->trials) {
      trials.push_back({expanded->variants[t.variant].key, t.repeat,
                        static_cast<int64_t>(t.index), spec->limits.max_attempts});
    }
    auto created = store_->CreateSweep(record, variants, trials);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    trial_ids_ = created->trial_ids;
    EXPECT_TRUE(store_->UpsertWorker({"w-1", "node-a", "node-a", {}, "", WorkerState::kIdle}).ok());
    EXPECT_TRUE(store_->UpsertWorker({"w-2", "node-b", "node-b", {}, "", WorkerState::kIdle}).ok());
    return created->sweep_id;
  }

  int64_t Assign(int64_t trial_id, int64_t expected_attempts, const std::string& worker) {
    AttemptRecord placement;
    placement.worker_id = worker;
    placement.host = worker == "w-1" ? "node-a" : "node-b";
    placement.ranks = {{0, worker, placement.host, "cpu"}, {1, worker, placement.host, "cpu"}};
    auto assigned = store_->AssignTrial(trial_id, expected_attempts, placement);
    EXPECT_TRUE(assigned.ok() && assigned->applied);
    EXPECT_TRUE(store_->MarkRunning(trial_id, assigned->attempt).ok());
    return assigned->attempt;
  }

  // Runs a trial to success: two ranks, 6 measured steps of `step_s`, rank 1 a bit
  // slower on every step; loss only meaningful on rank 0.
  void Succeed(int64_t trial_id, const std::string& worker, double step_s, int64_t peak_bytes,
               bool jit) {
    int64_t attempt = Assign(trial_id, 0, worker);
    MetricsBatch batch;
    for (int rank = 0; rank < 2; ++rank) {
      StepRecord warm;
      warm.trial_id = trial_id;
      warm.attempt = attempt;
      warm.rank = rank;
      warm.row.step = 0;
      warm.phase = "warmup";
      warm.row.step_s = 5.0;
      warm.row.loss = 9.0;
      batch.steps.push_back(warm);
      for (int step = 1; step <= 6; ++step) {
        StepRecord m = warm;
        m.phase = "measure";
        m.row.step = step;
        m.row.step_s = step_s * (1 + 0.01 * (step % 3)) + (rank == 1 ? 0.001 : 0.0);
        m.row.loss = rank == 0 ? std::optional<double>(2.0 - 0.05 * step) : std::nullopt;
        batch.steps.push_back(m);
      }
      TrialSummary summary;
      summary.trial_id = trial_id;
      summary.attempt = attempt;
      summary.rank = rank;
      summary.summary = {{"startup_s", 0.5},
                         {"first_step_s", jit ? 4.0 : 1.0},
                         {"warmup_s", jit ? 5.0 : 1.5},
                         {"step_s_median", step_s},
                         {"step_s_p10", step_s},
                         {"step_s_p90", step_s},
                         {"tokens_per_s", 1024.0 / step_s},
                         {"flops_per_s", 1e9},
                         {"mfu", 0.1},
                         {"peak_mem_bytes", peak_bytes - rank},
                         {"frozen_bytes", 1000},
                         {"trainable_bytes", 100},
                         {"grad_bytes", 100},
                         {"optimizer_bytes", 200},
                         {"comm_s_per_step", 0.001},
                         {"comm_bytes_per_step", 4096},
                         {"applied", {{"compile_mode", jit ? "jit" : "eager"}, {"graphs", jit ? 2 : 0}}}};
      if (auto env = environment_by_worker_.find(worker); env != environment_by_worker_.end()) {
        summary.summary["environment"] = env->second;
      }
      batch.summaries.push_back(ReadSummaryRecord(summary).value());
    }
    auto written = store_->AppendBatch(batch);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    auto finished = store_->FinishTrial(trial_id, attempt, Outcome::kSucceeded, "");
    ASSERT_TRUE(finished.ok() && finished->applied);
  }

  // Runs every trial of the stored sweep: jit 1.25x faster with 20% more memory,
  // micro-batch 4 four times slower per step, jit at micro-batch 4 out of memory.
  // Repeat 0 on w-1 (node-a), repeat 1 on w-2 (node-b). Marks the sweep finished.
  void RunWholeSweep(int64_t sweep_id) {
    auto trials = store_->Reader()->ListTrials(sweep_id);
    ASSERT_TRUE(trials.ok());
    for (const TrialRecord& t : *trials) {
      bool jit = t.variant_key.find("compile_mode=jit") != std::string::npos;
      bool big = t.variant_key.find("micro_batch=4") != std::string::npos;
      if (jit && big) {
        int64_t attempt = Assign(t.id, 0, "w-1");
        ASSERT_TRUE(store_->FinishTrial(t.id, attempt, Outcome::kOom, "out of memory").ok());
        continue;
      }
      double step_s = (big ? 0.4 : 0.1) * (jit ? 0.8 : 1.0) * (t.repeat == 0 ? 1.0 : 1.02);
      Succeed(t.id, t.repeat == 0 ? "w-1" : "w-2", step_s, jit ? 1'200'000 : 1'000'000, jit);
    }
    ASSERT_TRUE(store_->SetSweepState(sweep_id, SweepState::kFinished).ok());
  }

  // The `environment` object each worker's trainers report in their summaries (none when
  // a worker is absent).
  std::map<std::string, nlohmann::json> environment_by_worker_;
  testing::TempDir dir_;
  testing::SettableClock clock_;
  TestEnv env_{clock_};
  std::string path_;
  std::unique_ptr<ResultsStore> store_;
  std::vector<int64_t> trial_ids_;
};

}  // namespace bakeoff::metrics
