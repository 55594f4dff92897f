// Helpers shared by the results-store tests: a temporary directory removed at the end,
// a settable clock (through a TestEnv), and a small sweep to store.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "tests/protocol/test_env.h"

namespace bakeoff::metrics::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "bakeoff-store-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Rows any schema version holds, for the migration tests: sweep 7 ("old") with one
// variant and trial 70, running its attempt 1 on worker w1 (node-a). Each test adds the
// rows of the version it migrates from.
inline constexpr const char* kOldRunningAttemptSql = R"sql(
  INSERT INTO sweeps (id, name, yaml, state, created_at, variant_count, trial_count)
    VALUES (7, 'old', 'name: old', 'running', 5.0, 1, 1);
  INSERT INTO variants (sweep_id, key, ordinal, params_json, trainer_config_json,
                        counterpart_key, is_baseline, counterpart_excluded)
    VALUES (7, 'default', 0, '{}', '{}', 'default', 1, 0);
  INSERT INTO trials (id, sweep_id, variant_key, repeat, order_index, state,
                      attempts_used, max_attempts, queued_at)
    VALUES (70, 7, 'default', 0, 0, 'running', 1, 3, 5.0);
  INSERT INTO attempts (trial_id, attempt, worker_id, host, ranks_json, assigned_at)
    VALUES (70, 1, 'w1', 'node-a', '[{"rank":0,"worker_id":"w1","host":"node-a"}]', 6.0);
)sql";

// A clock the test sets by hand: `now_s` is the wall time the store stamps (seconds since
// the Unix epoch); steady time follows it. The store reads it through a TestEnv
// (tests/protocol/test_env.h) given as StoreOptions::env.
struct SettableClock : Clock {
  double now_s = 1'700'000'000.0;
  TimePoint Now() const override { return TimePoint(std::chrono::duration_cast<TimePoint::duration>(Seconds())); }
  WallTimePoint WallNow() const override {
    return WallTimePoint(std::chrono::duration_cast<WallTimePoint::duration>(Seconds()));
  }

 private:
  std::chrono::duration<double> Seconds() const { return std::chrono::duration<double>(now_s); }
};

// The base of the store's fixtures: a database file in a fresh directory, opened through a
// TestEnv on a SettableClock (so that every time the store writes is the test's).
class StoreTest : public ::testing::Test {
 protected:
  // The store at db_path_; nullptr (and the test has failed) when it cannot be opened.
  std::unique_ptr<ResultsStore> OpenStore() {
    StoreOptions options;
    options.path = db_path_;
    options.env = &env_;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  TempDir dir_;
  std::string db_path_ = dir_.File("results.db");
  SettableClock clock_;
  TestEnv env_{clock_};
};

// Two variants (eager baseline, jit) x `repeats` repeats, interleaved.
struct SampleSweep {
  SweepRecord sweep;
  std::vector<VariantRecord> variants;
  std::vector<NewTrial> trials;
};

inline SampleSweep MakeSampleSweep(const std::string& name = "compile-vs-eager",
                                   int repeats = 2, int max_attempts = 3) {
  SampleSweep sample;
  sample.sweep.name = name;
  sample.sweep.question = "Is jit faster than eager?";
  sample.sweep.yaml = "name: " + name + "\nparameters:\n  compile_mode: {values: [eager, jit]}\n";
  sample.sweep.spec = {{"name", name}, {"repeats", repeats}};
  // eager is the baseline, and the counterpart of both.
  auto variant = [](const std::string& mode, int64_t ordinal) {
    VariantRecord v;
    v.key = "compile_mode=" + mode;
    v.ordinal = ordinal;
    v.params = {{"compile_mode", mode}};
    v.trainer_config = {{"compile_mode", mode}, {"model", "tiny"}, {"world_size", 2}};
    v.counterpart_key = "compile_mode=eager";
    v.is_baseline = mode == "eager";
    return v;
  };
  sample.variants = {variant("eager", 0), variant("jit", 1)};
  int order = 0;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (const VariantRecord& variant : sample.variants) {
      sample.trials.push_back({variant.key, repeat, order++, max_attempts});
    }
  }
  return sample;
}

inline AttemptRecord Placement(const std::string& worker_id, const std::string& host,
                               int world_size = 2) {
  AttemptRecord placement;
  placement.worker_id = worker_id;
  placement.host = host;
  for (int rank = 0; rank < world_size; ++rank) {
    placement.ranks.push_back({rank, worker_id, host, "cpu"});
  }
  return placement;
}

inline StepRecord Step(int64_t trial_id, int64_t attempt, int64_t rank, int64_t step,
                       const std::string& phase = "measure") {
  StepRecord metric;
  metric.trial_id = trial_id;
  metric.attempt = attempt;
  metric.rank = rank;
  metric.row.step = step;
  metric.phase = phase;
  metric.row.step_s = 0.25 + 0.001 * static_cast<double>(step);
  metric.row.tokens = 1024;
  metric.row.loss = 10.0 - 0.01 * static_cast<double>(step);
  metric.row.lr = 1e-3;
  metric.row.peak_mem_bytes = 1'000'000 + step;
  metric.row.rss_bytes = 2'000'000;
  metric.row.comm_s = 0.01;
  metric.row.comm_bytes = 4096;
  return metric;
}

// The number of rows in `table`, read through a read-only connection of its own; -1
// (with a test failure) when the query fails.
inline int64_t CountRows(const std::string& db_path, const std::string& table) {
  Result<QueryResult> count = RunReadOnlyQuery(db_path, "SELECT COUNT(*) FROM " + table);
  EXPECT_TRUE(count.ok()) << count.status().ToString();
  return count.ok() ? count->rows[0][0].get<int64_t>() : -1;
}

}  // namespace bakeoff::metrics::testing
