// Tests of ResultsStore on real database files: schema and migrations, round trips of
// every table, compare-and-set transitions, stale-attempt refusal and recovery reads.
#include "metrics/store/results_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <thread>

#include "metrics/store/read_only_query.h"
#include "metrics/store/schema_migrations.h"
#include "metrics/store/sqlite_connection.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using testing::kOldRunningAttemptSql;
using testing::MakeSampleSweep;
using testing::Placement;
using testing::Step;

class ResultsStoreTest : public testing::StoreTest {
 protected:
  // A sweep of 2 variants x 2 repeats; returns its trial ids.
  CreatedSweep CreateSample(ResultsStore& store, const std::string& name = "compile-vs-eager") {
    testing::SampleSweep sample = MakeSampleSweep(name);
    Result<CreatedSweep> created = store.CreateSweep(sample.sweep, sample.variants, sample.trials);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : CreatedSweep{};
  }
  // OpenStore with the sample sweep created in it; store is nullptr (and the test has
  // failed) when the store cannot be opened.
  std::pair<std::unique_ptr<ResultsStore>, CreatedSweep> OpenStoreWithSample() {
    auto store = OpenStore();
    CreatedSweep created = store ? CreateSample(*store) : CreatedSweep{};
    return {std::move(store), std::move(created)};
  }

  // Stores the sample sweep and assigns its first trial to worker w1 (attempt 1).
  int64_t AssignFirstTrial(ResultsStore& store) {
    int64_t trial = CreateSample(store).trial_ids.at(0);
    EXPECT_TRUE(store.AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
    return trial;
  }

  // A write refused as kInvalidArgument whose message names `what`.
  static void ExpectRefusedNaming(const Status& status, const std::string& what) {
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(status.message().find(what), std::string::npos) << status.ToString();
  }

  // A refused write (ExpectRefusedNaming) left `table` empty and the store healthy: a
  // refusal is about the input, not the disk.
  void ExpectRefusedAndNothingStored(const ResultsStore& store, const Status& status,
                                     const std::string& what, const std::string& table) {
    ExpectRefusedNaming(status, what);
    EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM " + table), 0);
    EXPECT_TRUE(store.healthy());
  }

  // Runs a one-value query against the file through a separate read-only connection.
  nlohmann::json QueryValue(const std::string& sql) {
    Result<QueryResult> result = RunReadOnlyQuery(db_path_, sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    if (!result.ok() || result->rows.empty()) return nullptr;
    return result->rows[0][0];
  }
};

// --- Schema and migrations -----------------------------------------------------------

TEST_F(ResultsStoreTest, OpenCreatesEmptyDatabaseInWalModeAtLatestVersion) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<int> version = store->Reader()->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestSchemaVersion);
  EXPECT_EQ(QueryValue("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM schema_migrations"), kLatestSchemaVersion);
  EXPECT_EQ(QueryValue("SELECT group_concat(version) FROM schema_migrations"), "1,2,3,4,5,6,7,8");
  EXPECT_TRUE(store->healthy());
}

TEST_F(ResultsStoreTest, CalibrationsRoundTripAndTheNewestOfAWorkloadKeyWins) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t sweep = CreateSample(*store).sweep_id;
  auto none = store->Reader()->LatestCalibration("k1");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  CalibrationRecord first{.workload_key = "k1", .calibrated_sweep = "main", .sweep_id = sweep, .host = "h",
                          .workers = 2, .pairs = 6, .sd_log_ratio = 0.05};
  ASSERT_TRUE(store->RecordCalibration(first).ok());
  EXPECT_GT(first.id, 0);
  EXPECT_EQ(first.created_at, clock_.now_s);
  CalibrationRecord other = first;
  other.workload_key = "k2";
  other.sd_log_ratio = 0.5;
  ASSERT_TRUE(store->RecordCalibration(other).ok());
  CalibrationRecord second = first;
  second.sd_log_ratio = 0.02;
  second.aa_ratio = 1.01;
  second.aa_low = 0.99;
  second.aa_high = 1.03;
  ASSERT_TRUE(store->RecordCalibration(second).ok());
  auto latest = store->Reader()->LatestCalibration("k1");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->id, second.id);
  EXPECT_DOUBLE_EQ((*latest)->sd_log_ratio, 0.02);
  EXPECT_EQ((*latest)->pairs, 6);
  EXPECT_EQ((*latest)->aa_high, 1.03);
  EXPECT_EQ((*latest)->order, "interleaved");
  // Each order has its own newest: a lockstep calibration does not replace the
  // interleaved one (docs/statistics.md, "Calibration").
  CalibrationRecord lockstep = first;
  lockstep.order = "lockstep";
  lockstep.sd_log_ratio = 0.01;
  ASSERT_TRUE(store->RecordCalibration(lockstep).ok());
  auto interleaved = store->Reader()->LatestCalibration("k1", "interleaved");
  ASSERT_TRUE(interleaved.ok() && interleaved->has_value());
  EXPECT_EQ((*interleaved)->id, second.id);
  auto by_order = store->Reader()->LatestCalibration("k1", "lockstep");
  ASSERT_TRUE(by_order.ok() && by_order->has_value());
  EXPECT_EQ((*by_order)->id, lockstep.id);
  EXPECT_EQ((*by_order)->order, "lockstep");
  EXPECT_EQ((*store->Reader()->LatestCalibration("k1"))->id, lockstep.id) << "any order: the newest";
  // A record the table's checks would refuse is refused before it reaches SQLite.
  CalibrationRecord bad = first;
  bad.pairs = 1;
  ExpectRefusedNaming(store->RecordCalibration(bad), "pairs");
}

TEST_F(ResultsStoreTest, ADatabaseOlderThanCalibrationsHasNone) {
  Result<std::unique_ptr<SqliteConnection>> db =
      SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/3).ok());
  auto latest = LatestCalibration(**db, "k1");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_FALSE(latest->has_value());
}

TEST_F(ResultsStoreTest, ReopeningAppliesNoMigrationTwice) {
  { ASSERT_NE(OpenStore(), nullptr); }
  clock_.now_s += 100;
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM schema_migrations"), kLatestSchemaVersion);
  EXPECT_EQ(QueryValue("SELECT MAX(applied_at) FROM schema_migrations"), 1'700'000'000.0);
}

TEST_F(ResultsStoreTest, MigratesVersionOneDatabaseKeepingItsRows) {
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/1).ok());
    Result<int> version = ReadSchemaVersion(**db);
    ASSERT_TRUE(version.ok());
    ASSERT_EQ(*version, 1);
    ASSERT_TRUE((*db)->Exec(kOldRunningAttemptSql).ok());
    ASSERT_TRUE((*db)->Exec(R"sql(
      INSERT INTO step_metrics (trial_id, attempt, rank, phase, step, step_s, tokens, loss, lr,
                                peak_mem_bytes, rss_bytes, comm_s, comm_bytes)
        VALUES (70, 1, 0, 'warmup', 0, 2.0, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
               (70, 1, 0, 'measure', 0, 1.5, 256, 3.25, 0.0001, 1000, 2000, 0.25, 4096),
               (70, 1, 0, 'measure', 1, 1.0, 256, 3.0, 0.0001, 1000, 2000, 0.25, 4096),
               (70, 1, 1, 'measure', 0, 1.25, 256, 3.25, NULL, NULL, NULL, NULL, NULL);
    )sql").ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<int> version = store->Reader()->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestSchemaVersion);
  // v3 moved the steps into one block per rank and phase; the view reads them as rows,
  // every value and type kept.
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_blocks"), 3);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 4);
  EXPECT_EQ(QueryValue("SELECT typeof(step_s) || ' ' || typeof(tokens) || ' ' || typeof(lr) FROM step_metrics "
                       "WHERE rank = 0 AND phase = 'measure' AND step = 1"),
            "real integer real");
  Result<std::vector<StepRecord>> steps = store->Reader()->ReadStepMetrics(70, 1, 0);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[0].phase, "warmup");
  EXPECT_EQ((*steps)[2].row.step, 1);
  EXPECT_DOUBLE_EQ((*steps)[2].row.step_s, 1.0);
  EXPECT_EQ((*steps)[2].row.tokens, 256);
  EXPECT_EQ((*steps)[2].row.comm_bytes, 4096);
  EXPECT_DOUBLE_EQ(*(*steps)[2].row.lr, 0.0001);
  Result<SweepRecord> sweep = store->Reader()->GetSweep(7);
  ASSERT_TRUE(sweep.ok()) << sweep.status().ToString();
  EXPECT_EQ(sweep->name, "old");
  EXPECT_EQ(sweep->counts.running, 1);
  Result<std::vector<AttemptRecord>> attempts = store->Reader()->ListAttempts(70);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_FALSE((*attempts)[0].simulated);  // the v2 column, defaulted
  ASSERT_EQ((*attempts)[0].ranks.size(), 1u);
  EXPECT_EQ((*attempts)[0].ranks[0].host, "node-a");
  // v2's view sees the v1 rows.
  EXPECT_EQ(QueryValue("SELECT worker_id FROM trial_results WHERE trial_id = 70"), "w1");
  EXPECT_EQ(QueryValue("SELECT running FROM sweep_progress WHERE sweep_id = 7"), 1);
}

TEST_F(ResultsStoreTest, FailedMigrationLeavesTheWholePreviousVersion) {
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/1).ok());
    // Someone's hand-made object collides with one that v2 creates after its first
    // statement (the ALTER TABLE), so v2 fails half-way.
    ASSERT_TRUE((*db)->Exec("CREATE TABLE attempts_by_worker (x)").ok());
  }
  StoreOptions options;
  options.path = db_path_;
  Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("migration 2"), std::string::npos)
      << store.status().message();
  EXPECT_EQ(QueryValue("PRAGMA user_version"), 1);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM schema_migrations"), 1);
  // The ALTER TABLE of v2 was rolled back with the rest.
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM pragma_table_info('attempts') WHERE name = 'simulated'"), 0);
}

TEST_F(ResultsStoreTest, RefusesDatabaseWrittenByNewerVersion) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
  }
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  StoreOptions options;
  options.path = db_path_;
  Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos) << store.status().message();
}

TEST_F(ResultsStoreTest, OpenOfAFileThatIsNotADatabaseFailsWithIoError) {
  {
    std::FILE* file = std::fopen(db_path_.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("this is not a database, just text long enough to fill a header page.....\n", file);
    std::fclose(file);
  }
  StoreOptions options;
  options.path = db_path_;
  Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kIoError) << store.status().ToString();
  EXPECT_NE(store.status().message().find(db_path_), std::string::npos);
}

TEST_F(ResultsStoreTest, OpenInMissingDirectoryNamesTheFileAndTheFix) {
  StoreOptions options;
  options.path = dir_.File("no-such-dir/results.db");
  Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kIoError);
  EXPECT_NE(store.status().message().find(options.path), std::string::npos);
  EXPECT_NE(store.status().message().find("directory exists"), std::string::npos)
      << store.status().message();
}

// --- Sweeps and variants -------------------------------------------------------------

TEST_F(ResultsStoreTest, SweepVariantsAndTrialsRoundTrip) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  testing::SampleSweep sample = MakeSampleSweep();
  sample.variants[1].counterpart_excluded = true;
  Result<CreatedSweep> created = store->CreateSweep(sample.sweep, sample.variants, sample.trials);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_EQ(created->trial_ids.size(), 4u);

  Result<SweepRecord> sweep = store->Reader()->GetSweep(created->sweep_id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->name, sample.sweep.name);
  EXPECT_EQ(sweep->question, sample.sweep.question);
  EXPECT_EQ(sweep->yaml, sample.sweep.yaml);
  EXPECT_EQ(sweep->spec, sample.sweep.spec);
  EXPECT_EQ(sweep->state, SweepState::kRunning);
  EXPECT_EQ(sweep->created_at, clock_.now_s);
  EXPECT_FALSE(sweep->finished_at.has_value());
  EXPECT_EQ(sweep->variant_count, 2);
  EXPECT_EQ(sweep->trial_count, 4);
  EXPECT_EQ(sweep->counts.queued, 4);

  Result<std::vector<VariantRecord>> variants = store->Reader()->ListVariants(created->sweep_id);
  ASSERT_TRUE(variants.ok());
  ASSERT_EQ(variants->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*variants)[i].key, sample.variants[i].key);
    EXPECT_EQ((*variants)[i].ordinal, sample.variants[i].ordinal);
    EXPECT_EQ((*variants)[i].params, sample.variants[i].params);
    EXPECT_EQ((*variants)[i].trainer_config, sample.variants[i].trainer_config);
    EXPECT_EQ((*variants)[i].counterpart_key, sample.variants[i].counterpart_key);
    EXPECT_EQ((*variants)[i].is_baseline, sample.variants[i].is_baseline);
    EXPECT_EQ((*variants)[i].counterpart_excluded, sample.variants[i].counterpart_excluded);
  }

  Result<std::vector<TrialRecord>> trials = store->Reader()->ListTrials(created->sweep_id);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const TrialRecord& trial = (*trials)[i];
    EXPECT_EQ(trial.id, created->trial_ids[i]);
    EXPECT_EQ(trial.sweep_id, created->sweep_id);
    EXPECT_EQ(trial.variant_key, sample.trials[i].variant_key);
    EXPECT_EQ(trial.repeat, sample.trials[i].repeat);
    EXPECT_EQ(trial.order_index, sample.trials[i].order_index);
    EXPECT_EQ(trial.state, TrialState::kQueued);
    EXPECT_FALSE(trial.outcome.has_value());
    EXPECT_EQ(trial.attempts_used, 0);
    EXPECT_EQ(trial.max_attempts, 3);
    EXPECT_EQ(trial.queued_at, clock_.now_s);
  }
}

TEST_F(ResultsStoreTest, FindSweepByIdOrNameReturnsNewestOfAName) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  CreatedSweep first = CreateSample(*store, "same-name");
  CreatedSweep second = CreateSample(*store, "same-name");
  CreatedSweep other = CreateSample(*store, "other");

  Result<SweepRecord> by_name = store->Reader()->FindSweep("same-name");
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->id, second.sweep_id);
  Result<SweepRecord> by_id = store->Reader()->FindSweep(std::to_string(first.sweep_id));
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_id->id, first.sweep_id);
  Result<SweepRecord> missing = store->Reader()->FindSweep("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);

  Result<std::vector<SweepRecord>> all = store->Reader()->ListSweeps();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, other.sweep_id);  // newest first
}

TEST(SweepIdToTryTest, OneToEighteenDigitsAreAnIdFirstAnythingElseAName) {
  // The one rule the store (FindSweep), the report (LoadReportInput) and every command
  // share; the report's own copy once stopped at 17 digits.
  EXPECT_EQ(SweepIdToTry("12"), std::optional<int64_t>(12));
  EXPECT_EQ(SweepIdToTry("007"), std::optional<int64_t>(7));
  EXPECT_EQ(SweepIdToTry("123456789012345678"), std::optional<int64_t>(123456789012345678));
  EXPECT_EQ(SweepIdToTry("1234567890123456789"), std::nullopt) << "19 digits: a name";
  EXPECT_EQ(SweepIdToTry(""), std::nullopt);
  EXPECT_EQ(SweepIdToTry("-3"), std::nullopt);
  EXPECT_EQ(SweepIdToTry("12a"), std::nullopt);
  EXPECT_EQ(SweepIdToTry(" 12"), std::nullopt);
}

TEST_F(ResultsStoreTest, CreateSweepRejectsTrialOfUnknownVariantAndStoresNothing) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  testing::SampleSweep sample = MakeSampleSweep();
  sample.trials.push_back({"compile_mode=missing", 0, 99, 1});
  Result<CreatedSweep> created = store->CreateSweep(sample.sweep, sample.variants, sample.trials);
  ExpectRefusedAndNothingStored(*store, created.status(), "compile_mode=missing", "sweeps");
}

TEST_F(ResultsStoreTest, SweepStateAndCountsFollowTrials) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  int64_t t0 = created.trial_ids[0];
  ASSERT_TRUE(store->AssignTrial(t0, 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE(store->FinishTrial(t0, 1, Outcome::kSucceeded, "")->applied);
  ASSERT_TRUE(store->AssignTrial(created.trial_ids[1], 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE(store->FinishTrial(created.trial_ids[1], 1, Outcome::kOom, "out of memory")->applied);
  ASSERT_TRUE(store->AssignTrial(created.trial_ids[2], 0, Placement("w2", "node-b"))->applied);

  Result<SweepRecord> sweep = store->Reader()->GetSweep(created.sweep_id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->counts.queued, 1);
  EXPECT_EQ(sweep->counts.assigned, 1);
  EXPECT_EQ(sweep->counts.finished, 2);
  EXPECT_EQ(sweep->counts.succeeded, 1);
  EXPECT_EQ(sweep->counts.unsuccessful, 1);

  Result<int64_t> cancelled = store->CancelQueuedTrials(created.sweep_id, "cancelled by user");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, 1);
  Result<TrialRecord> last = store->Reader()->GetTrial(created.trial_ids[3]);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->state, TrialState::kFinished);
  EXPECT_EQ(last->outcome, Outcome::kCancelled);
  EXPECT_EQ(last->reason, "cancelled by user");

  clock_.now_s += 60;
  ASSERT_TRUE(store->SetSweepState(created.sweep_id, SweepState::kCancelled).ok());
  sweep = store->Reader()->GetSweep(created.sweep_id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state, SweepState::kCancelled);
  EXPECT_EQ(sweep->finished_at, clock_.now_s);
  Result<std::vector<SweepRecord>> running = store->Reader()->ListSweeps(SweepState::kRunning);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->empty());
  EXPECT_EQ(store->SetSweepState(12345, SweepState::kFinished).code(), Status::Code::kNotFound);
}

// --- Trial transitions ---------------------------------------------------------------

TEST_F(ResultsStoreTest, TrialLifecycleIsStoredWithItsAttempt) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  int64_t trial = created.trial_ids[0];

  AttemptRecord placement = Placement("w1", "node-a");
  placement.simulated = true;
  clock_.now_s = 100;
  Result<TransitionResult> assigned = store->AssignTrial(trial, 0, placement);
  ASSERT_TRUE(assigned.ok()) << assigned.status().ToString();
  EXPECT_TRUE(assigned->applied);
  EXPECT_EQ(assigned->attempt, 1);
  EXPECT_EQ(assigned->state, TrialState::kAssigned);

  clock_.now_s = 101;
  Result<TransitionResult> running = store->MarkRunning(trial, 1);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->applied);
  EXPECT_EQ(running->state, TrialState::kRunning);

  clock_.now_s = 150;
  Result<TransitionResult> finished = store->FinishTrial(trial, 1, Outcome::kDiverged, "loss is nan at step 7");
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->applied);

  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, TrialState::kFinished);
  EXPECT_EQ(stored->outcome, Outcome::kDiverged);
  EXPECT_EQ(stored->reason, "loss is nan at step 7");
  EXPECT_EQ(stored->attempts_used, 1);
  EXPECT_EQ(stored->finished_at, 150);

  Result<std::vector<AttemptRecord>> attempts = store->Reader()->ListAttempts(trial);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  const AttemptRecord& attempt = (*attempts)[0];
  EXPECT_EQ(attempt.trial_id, trial);
  EXPECT_EQ(attempt.attempt, 1);
  EXPECT_EQ(attempt.worker_id, "w1");
  EXPECT_EQ(attempt.host, "node-a");
  ASSERT_EQ(attempt.ranks.size(), 2u);
  EXPECT_EQ(attempt.ranks[1].rank, 1);
  EXPECT_EQ(attempt.ranks[1].device, "cpu");
  EXPECT_TRUE(attempt.simulated);
  EXPECT_EQ(attempt.assigned_at, 100);
  EXPECT_EQ(attempt.started_at, 101);
  EXPECT_EQ(attempt.ended_at, 150);
  EXPECT_EQ(attempt.outcome, Outcome::kDiverged);
  EXPECT_EQ(attempt.reason, "loss is nan at step 7");
}

TEST_F(ResultsStoreTest, DuplicateTransitionsApplyOnce) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = CreateSample(*store).trial_ids[0];

  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  Result<TransitionResult> again = store->AssignTrial(trial, 0, Placement("w2", "node-b"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->state, TrialState::kAssigned);
  EXPECT_EQ(again->attempts_used, 1);

  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  EXPECT_FALSE(store->MarkRunning(trial, 1)->applied);

  ASSERT_TRUE(store->FinishTrial(trial, 1, Outcome::kSucceeded, "")->applied);
  Result<TransitionResult> second_finish = store->FinishTrial(trial, 1, Outcome::kFailed, "late");
  ASSERT_TRUE(second_finish.ok());
  EXPECT_FALSE(second_finish->applied);
  EXPECT_EQ(second_finish->outcome, Outcome::kSucceeded);
  EXPECT_FALSE(store->RequeueTrial(trial, 1, Outcome::kLost, "late heartbeat loss")->applied);

  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->outcome, Outcome::kSucceeded);
  Result<std::vector<AttemptRecord>> attempts = store->Reader()->ListAttempts(trial);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].worker_id, "w1");
}

TEST_F(ResultsStoreTest, TransitionsForAnotherAttemptAreNotApplied) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  EXPECT_FALSE(store->MarkRunning(trial, 2)->applied);
  EXPECT_FALSE(store->FinishTrial(trial, 2, Outcome::kSucceeded, "")->applied);
  EXPECT_FALSE(store->RequeueTrial(trial, 0, Outcome::kLost, "")->applied);
  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, TrialState::kAssigned);

  Result<TransitionResult> unknown = store->AssignTrial(999999, 0, Placement("w1", "node-a"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
}

TEST_F(ResultsStoreTest, LostAttemptIsRequeuedAndRetriedAsNextAttempt) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);

  Result<TransitionResult> requeued = store->RequeueTrial(trial, 1, Outcome::kLost, "worker w1 missed heartbeats");
  ASSERT_TRUE(requeued.ok());
  EXPECT_TRUE(requeued->applied);
  EXPECT_EQ(requeued->state, TrialState::kQueued);
  // Double delivery of the loss changes nothing.
  EXPECT_FALSE(store->RequeueTrial(trial, 1, Outcome::kLost, "again")->applied);

  // The retry must expect one attempt used: a stale assignment expecting 0 is refused.
  EXPECT_FALSE(store->AssignTrial(trial, 0, Placement("w2", "node-b"))->applied);
  Result<TransitionResult> retry = store->AssignTrial(trial, 1, Placement("w2", "node-b"));
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->applied);
  EXPECT_EQ(retry->attempt, 2);
  ASSERT_TRUE(store->FinishTrial(trial, 2, Outcome::kSucceeded, "")->applied);

  Result<std::vector<AttemptRecord>> attempts = store->Reader()->ListAttempts(trial);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].outcome, Outcome::kLost);
  EXPECT_EQ((*attempts)[0].reason, "worker w1 missed heartbeats");
  EXPECT_EQ((*attempts)[1].outcome, Outcome::kSucceeded);
  EXPECT_EQ((*attempts)[1].worker_id, "w2");
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM trials WHERE state = 'finished'"), 1);
}

TEST_F(ResultsStoreTest, QueuedTrialCanFinishWithoutAnAttempt) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  ASSERT_TRUE(store->RequeueTrial(trial, 1, Outcome::kLost, "worker lost")->applied);
  // Attempts exhausted (the coordinator's decision): finish the queued trial as lost.
  Result<TransitionResult> finished = store->FinishTrial(trial, 1, Outcome::kLost, "no attempts left");
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->applied);
  Result<std::vector<AttemptRecord>> attempts = store->Reader()->ListAttempts(trial);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].reason, "worker lost");  // the attempt keeps its own reason
}

// --- Metrics, summaries and events ---------------------------------------------------

TEST_F(ResultsStoreTest, BatchedStepMetricsRoundTripInStepOrder) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);

  std::vector<StepRecord> steps;
  for (int rank = 1; rank >= 0; --rank) {
    for (int step = 9; step >= 0; --step) steps.push_back(Step(trial, 1, rank, step, "measure"));
    for (int step = 2; step >= 0; --step) steps.push_back(Step(trial, 1, rank, step, "warmup"));
  }
  steps.back().row.loss = std::numeric_limits<double>::quiet_NaN();
  steps.back().row.comm_bytes.reset();
  Result<BatchResult> written = store->AppendStepMetrics(steps);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->written, 26);
  EXPECT_EQ(written->duplicates, 0);
  EXPECT_EQ(written->stale, 0);

  Result<std::vector<StepRecord>> rank0 = store->Reader()->ReadStepMetrics(trial, std::nullopt, 0);
  ASSERT_TRUE(rank0.ok());
  ASSERT_EQ(rank0->size(), 13u);
  EXPECT_EQ((*rank0)[0].phase, "warmup");
  EXPECT_EQ((*rank0)[0].row.step, 0);
  EXPECT_FALSE((*rank0)[0].row.loss.has_value());  // NaN is stored as NULL
  EXPECT_FALSE((*rank0)[0].row.comm_bytes.has_value());
  EXPECT_EQ((*rank0)[3].phase, "measure");
  EXPECT_EQ((*rank0)[3].row.step, 0);
  const StepRecord expected = Step(trial, 1, 0, 9);
  const StepRecord& last = (*rank0)[12];
  EXPECT_EQ(last.row.step, 9);
  EXPECT_DOUBLE_EQ(last.row.step_s, expected.row.step_s);
  EXPECT_EQ(last.row.tokens, expected.row.tokens);
  EXPECT_EQ(last.row.loss, expected.row.loss);
  EXPECT_EQ(last.row.lr, expected.row.lr);
  EXPECT_EQ(last.row.peak_mem_bytes, expected.row.peak_mem_bytes);
  EXPECT_EQ(last.row.rss_bytes, expected.row.rss_bytes);
  EXPECT_EQ(last.row.comm_s, expected.row.comm_s);
  EXPECT_EQ(last.row.comm_bytes, expected.row.comm_bytes);

  Result<std::vector<StepRecord>> all = store->Reader()->ReadStepMetrics(trial);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 26u);
  EXPECT_EQ(all->front().rank, 0);
  EXPECT_EQ(all->back().rank, 1);

  // Redelivery of the same batch stores nothing twice.
  Result<BatchResult> again = store->AppendStepMetrics(steps);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->written, 0);
  EXPECT_EQ(again->duplicates, 26);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 26);
}

TEST_F(ResultsStoreTest, BatchWithInvalidPhaseIsRejectedWhole) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  std::vector<StepRecord> steps = {Step(trial, 1, 0, 0), Step(trial, 1, 0, 1, "cooldown")};
  Result<BatchResult> written = store->AppendStepMetrics(steps);
  ExpectRefusedAndNothingStored(*store, written.status(), "cooldown", "step_metrics");
}

TEST_F(ResultsStoreTest, WritesForStaleOrLostAttemptsAreRefused) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  int64_t trial = created.trial_ids[0];
  int64_t queued_trial = created.trial_ids[1];
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE(store->AppendStepMetrics({Step(trial, 1, 0, 0)})->written == 1);

  // Attempt 1 is lost and requeued: its late rows are refused, as are rows for an
  // attempt that never existed and for a trial never assigned.
  ASSERT_TRUE(store->RequeueTrial(trial, 1, Outcome::kLost, "worker lost")->applied);
  MetricsBatch late;
  late.steps = {Step(trial, 1, 0, 1), Step(trial, 2, 0, 0), Step(queued_trial, 1, 0, 0),
                Step(424242, 1, 0, 0)};
  late.events = {{trial, 1, 0, "error", {{"kind", "failed"}}, 0, std::nullopt}};
  TrialSummary summary;
  summary.trial_id = trial;
  summary.attempt = 1;
  summary.summary = {{"tokens_per_s", 1.0}};
  late.summaries = {ReadSummaryRecord(summary).value()};
  Result<BatchResult> refused = store->AppendBatch(late);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->written, 0);
  EXPECT_EQ(refused->stale, 6);

  // The retry (attempt 2) writes; attempt 1's late rows still do not.
  ASSERT_TRUE(store->AssignTrial(trial, 1, Placement("w2", "node-b"))->applied);
  Result<BatchResult> mixed = store->AppendStepMetrics({Step(trial, 2, 0, 0), Step(trial, 1, 0, 2)});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->written, 1);
  EXPECT_EQ(mixed->stale, 1);

  // A trial finished as lost (no attempts left) accepts nothing more for that attempt.
  ASSERT_TRUE(store->FinishTrial(trial, 2, Outcome::kLost, "no attempts left")->applied);
  Result<BatchResult> after_lost = store->AppendStepMetrics({Step(trial, 2, 0, 1)});
  ASSERT_TRUE(after_lost.ok());
  EXPECT_EQ(after_lost->stale, 1);

  Result<std::vector<StepRecord>> attempt1 = store->Reader()->ReadStepMetrics(trial, 1);
  ASSERT_TRUE(attempt1.ok());
  EXPECT_EQ(attempt1->size(), 1u);  // only what arrived while attempt 1 was current
}

// The summary figures are declared once (protocol::SummaryFigures): every figure the
// table stores in a column is one of trial_summaries', and a summary with every figure
// set lands in those columns; one kept in summary_json only is not a column. A row added
// to the table without its migration fails here (issue 48, item 1).
TEST_F(ResultsStoreTest, EverySummaryFigureOfTheTableLandsInItsColumn) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  nlohmann::json body = nlohmann::json::object();
  double value = 1;
  for (const protocol::SummaryFigure& figure : protocol::SummaryFigures()) body[figure.name] = value++;
  ASSERT_TRUE(store->RecordSummary(TrialSummary{trial, 1, 0, body}).ok());
  value = 1;
  for (const protocol::SummaryFigure& figure : protocol::SummaryFigures()) {
    const double expected = value++;
    const bool is_column =
        QueryValue(std::string("SELECT COUNT(*) FROM pragma_table_info('trial_summaries') WHERE name = '") +
                   figure.name + "'") == 1;
    EXPECT_EQ(is_column, figure.column) << figure.name;
    if (!figure.column) continue;
    EXPECT_EQ(QueryValue(std::string("SELECT ") + figure.name + " FROM trial_summaries"), expected) << figure.name;
  }
}

TEST_F(ResultsStoreTest, AMistypedSummaryIsRefusedNamingTheField) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  Result<BatchResult> refused = store->RecordSummary(TrialSummary{trial, 1, 0, {{"tokens_per_s", "fast"}}});
  ExpectRefusedNaming(refused.status(), "\"tokens_per_s\"");
  // A fractional byte count is rounded into its integer column, as before.
  ASSERT_TRUE(store->RecordSummary(TrialSummary{trial, 1, 0, {{"grad_bytes", 10.6}}}).ok());
  Result<QueryResult> row = RunReadOnlyQuery(db_path_, "SELECT grad_bytes FROM trial_summaries");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_EQ(row->rows.size(), 1u);
  EXPECT_EQ(row->rows[0][0], 11);
}

TEST_F(ResultsStoreTest, SummaryFieldsBecomeColumnsAndTrialResultsCarryThem) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  int64_t trial = created.trial_ids[0];
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  nlohmann::json applied = {{"compile_mode", "jit"}, {"zero_stage", 2}, {"fusion_groups", 12}};
  nlohmann::json fields = {
      {"startup_s", 1.5},         {"first_step_s", 9.25},      {"warmup_s", 12.0},
      {"step_s_median", 0.5},     {"step_s_p10", 0.45},        {"step_s_p90", 0.6},
      {"tokens_per_s", 2048.0},   {"flops_per_s", 1e12},       {"mfu", 0.31},
      {"peak_mem_bytes", 123456}, {"frozen_bytes", 1000},      {"trainable_bytes", 200},
      {"grad_bytes", 200},        {"optimizer_bytes", 400},    {"comm_s_per_step", 0.05},
      {"comm_bytes_per_step", 8192}, {"applied", applied},     {"extra_field", "kept"}};
  for (int rank = 0; rank < 2; ++rank) {
    TrialSummary summary{trial, 1, rank, fields};
    if (rank == 1) summary.summary["peak_mem_bytes"] = 999999;
    Result<BatchResult> written = store->RecordSummary(summary);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    EXPECT_EQ(written->written, 1);
  }
  // A duplicate summary keeps the first.
  TrialSummary duplicate{trial, 1, 0, {{"tokens_per_s", 1.0}}};
  EXPECT_EQ(store->RecordSummary(duplicate)->duplicates, 1);
  ASSERT_TRUE(store->FinishTrial(trial, 1, Outcome::kSucceeded, "")->applied);

  Result<QueryResult> row = RunReadOnlyQuery(db_path_,
      "SELECT startup_s, first_step_s, warmup_s, step_s_median, step_s_p10, step_s_p90, "
      "tokens_per_s, flops_per_s, mfu, peak_mem_bytes, frozen_bytes, trainable_bytes, "
      "grad_bytes, optimizer_bytes, comm_s_per_step, comm_bytes_per_step, applied_json, "
      "json_extract(summary_json, '$.extra_field') FROM trial_summaries WHERE rank = 0");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_EQ(row->rows.size(), 1u);
  const std::vector<nlohmann::json>& r = row->rows[0];
  const char* names[] = {"startup_s", "first_step_s", "warmup_s", "step_s_median", "step_s_p10",
                         "step_s_p90", "tokens_per_s", "flops_per_s", "mfu", "peak_mem_bytes",
                         "frozen_bytes", "trainable_bytes", "grad_bytes", "optimizer_bytes",
                         "comm_s_per_step", "comm_bytes_per_step"};
  for (size_t i = 0; i < std::size(names); ++i) {
    EXPECT_DOUBLE_EQ(r[i].get<double>(), fields[names[i]].get<double>()) << names[i];
  }
  EXPECT_EQ(nlohmann::json::parse(r[16].get<std::string>()), applied);
  EXPECT_EQ(r[17], "kept");

  Result<std::vector<TrialResult>> results = store->Reader()->ListTrialResults(created.sweep_id);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  ASSERT_EQ(results->size(), 4u);
  const TrialResult& first = (*results)[0];
  EXPECT_EQ(first.trial.id, trial);
  EXPECT_EQ(first.trial.outcome, Outcome::kSucceeded);
  ASSERT_TRUE(first.attempt.has_value());
  EXPECT_EQ(first.attempt->worker_id, "w1");
  ASSERT_EQ(first.summaries.size(), 2u);
  EXPECT_EQ(first.summaries[0].body, fields);
  EXPECT_EQ(first.summaries[1].rank, 1);
  EXPECT_FALSE((*results)[1].attempt.has_value());
  EXPECT_TRUE((*results)[1].summaries.empty());

  // The trial_results view: rank 0's throughput, the largest rank's peak memory.
  Result<QueryResult> view = RunReadOnlyQuery(db_path_,
      "SELECT tokens_per_s, peak_mem_bytes, worker_id, is_baseline FROM trial_results "
      "WHERE trial_id = " + std::to_string(trial));
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->rows.size(), 1u);
  EXPECT_EQ(view->rows[0][0], 2048.0);
  EXPECT_EQ(view->rows[0][1], 999999);
  EXPECT_EQ(view->rows[0][2], "w1");
  EXPECT_EQ(view->rows[0][3], 1);
}

TEST_F(ResultsStoreTest, EventsRoundTripAndSequencedEventsAreStoredOnce) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  std::vector<EventRecord> events = {
      {trial, 1, 0, "ready", {{"threads", 4}}, 10.0, 1},
      {trial, 1, 1, "ready", {{"threads", 4}}, 10.5, 1},
      {trial, 1, std::nullopt, "assigned", {{"worker", "w1"}}, 0, std::nullopt},
      {trial, 1, 0, "error", {{"kind", "oom"}, {"message", "bad \xff byte"}}, 11.0, 2},
  };
  Result<BatchResult> written = store->AppendEvents(events);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->written, 4);
  Result<BatchResult> again = store->AppendEvents({events[0], events[3]});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->duplicates, 2);

  Result<std::vector<EventRecord>> stored = store->Reader()->ReadEvents(trial);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 4u);
  EXPECT_EQ((*stored)[0].kind, "ready");
  EXPECT_EQ((*stored)[0].data, events[0].data);
  EXPECT_EQ((*stored)[0].at, 10.0);
  EXPECT_EQ((*stored)[0].seq, 1);
  EXPECT_EQ((*stored)[1].rank, 1);
  EXPECT_FALSE((*stored)[2].rank.has_value());
  EXPECT_EQ((*stored)[2].at, clock_.now_s);  // 0 means the store's clock
  EXPECT_EQ((*stored)[3].data["kind"], "oom");
}

// --- Workers ---------------------------------------------------------------------------

TEST_F(ResultsStoreTest, WorkersRoundTripAndKeepRegistrationTime) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  WorkerRecord worker{.id = "w1", .name = "node-a-worker", .host = "node-a"};
  worker.resources = {{"cpu_slots", 4}, {"cuda_devices", nlohmann::json::array()}};
  worker.metrics_url = "http://node-a:9400/metrics";
  clock_.now_s = 500;
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  ASSERT_TRUE(store->RecordWorkerHeartbeat("w1", 510).ok());
  ASSERT_TRUE(store->SetWorkerState("w1", WorkerState::kBusy).ok());

  Result<std::vector<WorkerRecord>> workers = store->Reader()->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].name, worker.name);
  EXPECT_EQ((*workers)[0].host, worker.host);
  EXPECT_EQ((*workers)[0].resources, worker.resources);
  EXPECT_EQ((*workers)[0].metrics_url, worker.metrics_url);
  EXPECT_EQ((*workers)[0].state, WorkerState::kBusy);
  EXPECT_EQ((*workers)[0].registered_at, 500);
  EXPECT_EQ((*workers)[0].last_heartbeat_at, 510);

  // Re-registration after a reconnect updates the row but keeps the first registration.
  clock_.now_s = 900;
  worker.resources = {{"cpu_slots", 8}};
  worker.state = WorkerState::kIdle;
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  workers = store->Reader()->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].resources["cpu_slots"], 8);
  EXPECT_EQ((*workers)[0].state, WorkerState::kIdle);
  EXPECT_EQ((*workers)[0].registered_at, 500);
  EXPECT_EQ((*workers)[0].last_heartbeat_at, 510);

  EXPECT_EQ(store->SetWorkerState("nobody", WorkerState::kLost).code(), Status::Code::kNotFound);
}

TEST_F(ResultsStoreTest, AWorkersSecretHashIsKeptUntilANewOneReplacesIt) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  WorkerRecord worker{.id = "w1", .name = "w1", .host = "node-a"};
  worker.secret_sha256 = std::string(64, 'a');
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  worker.secret_sha256 = "";  // an update that carries none keeps the stored hash
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  EXPECT_EQ(store->Reader()->ListWorkers().value()[0].secret_sha256, std::string(64, 'a'));
  worker.secret_sha256 = std::string(64, 'b');
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  EXPECT_EQ(store->Reader()->ListWorkers().value()[0].secret_sha256, std::string(64, 'b'));
}

TEST_F(ResultsStoreTest, MigratesVersionFourWorkersToAnEmptySecretHash) {
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/4).ok());
    ASSERT_TRUE((*db)->Exec(R"sql(
      INSERT INTO workers (id, name, host, resources_json, metrics_url, state, registered_at)
        VALUES ('w1', 'w1', 'node-a', '{"cpu_slots":2}', '', 'busy', 5.0);
    )sql").ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Reader()->SchemaVersion().value(), kLatestSchemaVersion);
  Result<std::vector<WorkerRecord>> workers = store->Reader()->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status().ToString();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].host, "node-a");
  EXPECT_EQ((*workers)[0].state, WorkerState::kBusy);
  EXPECT_EQ((*workers)[0].secret_sha256, "") << "a worker stored before v5 has no hash: its name is free";
}

// v6 adds the lockstep turn (docs/lockstep.md) as step_metrics' last column: blocks stored
// before it are unchanged and read it as NULL; new ones carry it and read it back.
TEST_F(ResultsStoreTest, MigratesVersionFiveStepsToAViewWithATurnColumn) {
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/5).ok());
    ASSERT_TRUE((*db)->Exec(kOldRunningAttemptSql).ok());
    ASSERT_TRUE((*db)->Exec(R"sql(
      INSERT INTO step_blocks (trial_id, attempt, rank, phase, first_step, last_step, steps, rows_json)
        VALUES (70, 1, 0, 'measure', 0, 1, 2,
                '[[0,1.5,256,3.25,0.0001,1000,2000,0.25,4096],[1,1.0,256]]');
    )sql").ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Reader()->SchemaVersion().value(), kLatestSchemaVersion);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics WHERE turn IS NULL"), 2);
  EXPECT_EQ(QueryValue("SELECT comm_bytes FROM step_metrics WHERE step = 0"), 4096) << "older columns unchanged";
  Result<std::vector<StepRecord>> old_steps = store->Reader()->ReadStepMetrics(70, 1, 0);
  ASSERT_TRUE(old_steps.ok()) << old_steps.status().ToString();
  ASSERT_EQ(old_steps->size(), 2u);
  EXPECT_FALSE((*old_steps)[0].row.turn.has_value());
  EXPECT_EQ((*old_steps)[0].row.comm_bytes, 4096);

  // New steps with a turn, written after the migration.
  const std::vector<std::pair<int64_t, int64_t>> turns = {{2, 8}, {3, 10}};
  MetricsBatch batch;
  StepBlockRecord block{70, 1, 0, "measure", {}};
  for (auto [step, turn] : turns) {
    protocol::StepRow row{step, 0.5, 256};
    row.turn = turn;
    block.rows.push_back(row);
  }
  batch.step_blocks.push_back(block);
  ASSERT_TRUE(store->AppendBatch(batch).ok());
  EXPECT_EQ(QueryValue("SELECT typeof(turn) || ' ' || turn FROM step_metrics WHERE step = 3"), "integer 10");
  Result<std::vector<StepRecord>> steps = store->Reader()->ReadStepMetrics(70, 1, 0);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 4u);
  EXPECT_EQ((*steps)[2].row.turn, 8);
  EXPECT_EQ((*steps)[3].row.turn, 10);
}

// The report's measured steps carry each step's tokens and turn, the lowest rank's that
// reported them (every rank of a lockstep side shares its turn).
TEST_F(ResultsStoreTest, MeasuredStepsCarryTheTokensAndTurnOfTheLowestRankThatReportedThem) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  const int64_t trial = created.trial_ids[0];
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  std::vector<StepRecord> steps = {Step(trial, 1, 0, 0), Step(trial, 1, 1, 0), Step(trial, 1, 0, 1),
                                   Step(trial, 1, 1, 1)};
  steps[0].row.turn = 6;
  steps[1].row.turn = 6;
  steps[0].row.tokens = std::nullopt;  // rank 1's tokens stand at step 0
  steps[1].row.tokens = 2048;
  steps[2].row.turn = std::nullopt;  // step 1: only rank 1 reported the turn
  steps[3].row.turn = 8;
  ASSERT_TRUE(store->AppendStepMetrics(steps).ok());
  Result<std::vector<MeasuredStep>> measured = store->Reader()->MeasuredSteps(created.sweep_id);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  ASSERT_EQ(measured->size(), 2u);
  EXPECT_EQ((*measured)[0].turn, 6);
  EXPECT_EQ((*measured)[0].tokens, 2048);
  EXPECT_EQ((*measured)[1].turn, 8);
  EXPECT_EQ((*measured)[1].tokens, 1024);
}

// --- Recovery ----------------------------------------------------------------------------

TEST_F(ResultsStoreTest, ReopenedStoreListsAssignedAndRunningTrialsWithTheirAttempt) {
  std::vector<int64_t> trials;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    trials = CreateSample(*store).trial_ids;
    ASSERT_TRUE(store->AssignTrial(trials[0], 0, Placement("w1", "node-a"))->applied);
    ASSERT_TRUE(store->MarkRunning(trials[0], 1)->applied);
    ASSERT_TRUE(store->AssignTrial(trials[1], 0, Placement("w2", "node-b"))->applied);
    ASSERT_TRUE(store->RequeueTrial(trials[1], 1, Outcome::kLost, "lost")->applied);
    ASSERT_TRUE(store->AssignTrial(trials[1], 1, Placement("w3", "node-c"))->applied);
    ASSERT_TRUE(store->AssignTrial(trials[2], 0, Placement("w1", "node-a"))->applied);
    ASSERT_TRUE(store->FinishTrial(trials[2], 1, Outcome::kSucceeded, "")->applied);
  }
  auto store = OpenStore();  // as after a coordinator restart
  ASSERT_NE(store, nullptr);
  Result<std::vector<TrialResult>> active = store->Reader()->ListActiveTrials();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].trial.id, trials[0]);
  EXPECT_EQ((*active)[0].trial.state, TrialState::kRunning);
  ASSERT_TRUE((*active)[0].attempt.has_value());
  EXPECT_EQ((*active)[0].attempt->attempt, 1);
  EXPECT_EQ((*active)[0].attempt->worker_id, "w1");
  EXPECT_EQ((*active)[1].trial.id, trials[1]);
  EXPECT_EQ((*active)[1].trial.state, TrialState::kAssigned);
  ASSERT_TRUE((*active)[1].attempt.has_value());
  EXPECT_EQ((*active)[1].attempt->attempt, 2);
  EXPECT_EQ((*active)[1].attempt->worker_id, "w3");

  // The coordinator's grace period ends: the running trial is requeued.
  ASSERT_TRUE(store->RequeueTrial(trials[0], 1, Outcome::kLost, "worker did not reconnect")->applied);
  active = store->Reader()->ListActiveTrials();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->size(), 1u);
}

TEST_F(ResultsStoreTest, StoreMayBeUsedFromSeveralThreads) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t trial = AssignFirstTrial(*store);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      for (int step = 0; step < 25; ++step) {
        Result<BatchResult> written = store->AppendStepMetrics({Step(trial, 1, rank, step)});
        EXPECT_TRUE(written.ok());
        Result<std::vector<StepRecord>> read = store->Reader()->ReadStepMetrics(trial, 1, rank);
        EXPECT_TRUE(read.ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 100);
}

// --- ResultsReader: the read side on a connection of its own ------------------------

TEST_F(ResultsStoreTest, AReaderReadsBesideTheWriterAndSeesItsLaterCommits) {
  auto writer = OpenStore();
  ASSERT_NE(writer, nullptr);
  CreatedSweep created = CreateSample(*writer);
  ASSERT_TRUE(writer->AssignTrial(created.trial_ids[0], 0, Placement("w1", "node-a"))->applied);

  Result<std::unique_ptr<ResultsReader>> reader = ResultsReader::Open(db_path_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  Result<std::vector<TrialResult>> trials = (*reader)->ListTrialResults(created.sweep_id);
  ASSERT_TRUE(trials.ok()) << trials.status().ToString();
  ASSERT_EQ(trials->size(), 4u);
  EXPECT_EQ((*trials)[0].trial.state, TrialState::kAssigned);
  Result<SweepRecord> by_name = (*reader)->FindSweep("compile-vs-eager");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->id, created.sweep_id);

  ASSERT_TRUE(writer->FinishTrial(created.trial_ids[0], 1, Outcome::kSucceeded, "")->applied);
  Result<TrialRecord> trial = (*reader)->GetTrial(created.trial_ids[0]);
  ASSERT_TRUE(trial.ok());
  EXPECT_EQ(trial->outcome, Outcome::kSucceeded);
  // A snapshot holds one state of the file while the writer goes on.
  {
    ResultsReader::Snapshot snapshot = (*reader)->BeginSnapshot();
    EXPECT_EQ((*reader)->GetTrial(created.trial_ids[1])->state, TrialState::kQueued);
    ASSERT_TRUE(writer->AssignTrial(created.trial_ids[1], 0, Placement("w1", "node-a"))->applied);
    EXPECT_EQ((*reader)->GetTrial(created.trial_ids[1])->state, TrialState::kQueued);
  }
  EXPECT_EQ((*reader)->GetTrial(created.trial_ids[1])->state, TrialState::kAssigned);
}

TEST_F(ResultsStoreTest, AReaderOpensNoMissingFileAndNoOtherSchemaVersion) {
  Result<std::unique_ptr<ResultsReader>> absent = ResultsReader::Open(dir_.File("absent.db"));
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), Status::Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("absent.db")));

  ASSERT_NE(OpenStore(), nullptr);
  {
    auto db = SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = " + std::to_string(kLatestSchemaVersion + 1)).ok());
  }
  Result<std::unique_ptr<ResultsReader>> newer = ResultsReader::Open(db_path_);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(newer.status().message().find("use a newer bakeoff"), std::string::npos) << newer.status().ToString();
}

TEST_F(ResultsStoreTest, SummariesComeBackTypedAndMeasuredStepsTakeTheSlowestRank) {
  auto [store, created] = OpenStoreWithSample();
  ASSERT_NE(store, nullptr);
  const int64_t trial = created.trial_ids[0];
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE(store->RecordSummary(TrialSummary{trial, 1, 0, {{"tokens_per_s", 160.0}, {"custom", 1}}}).ok());
  std::vector<StepRecord> steps = {Step(trial, 1, 0, 0), Step(trial, 1, 1, 0), Step(trial, 1, 0, 1),
                                   Step(trial, 1, 1, 1), Step(trial, 1, 0, 0, "warmup")};
  steps[0].row.step_s = 0.5;
  steps[1].row.step_s = 0.7;  // rank 1 is the slower at step 0
  steps[2].row.step_s = 0.9;  // rank 0 at step 1
  steps[3].row.step_s = 0.4;
  steps[0].row.loss = std::nullopt;  // rank 0 reported no loss at step 0: rank 1's stands
  steps[1].row.loss = 2.5;
  ASSERT_TRUE(store->AppendStepMetrics(steps).ok());

  Result<std::unique_ptr<ResultsReader>> reader = ResultsReader::Open(db_path_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto results = (*reader)->ListTrialResults(created.sweep_id);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ((*results)[0].summaries.size(), 1u);
  EXPECT_EQ((*results)[0].summaries[0].figures.tokens_per_s, 160.0);
  EXPECT_EQ((*results)[0].summaries[0].body["custom"], 1) << "the body is kept as written";

  auto measured = (*reader)->MeasuredSteps(created.sweep_id);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  ASSERT_EQ(measured->size(), 2u) << "measured steps only, one per step across ranks";
  EXPECT_EQ((*measured)[0].step, 0);
  EXPECT_DOUBLE_EQ((*measured)[0].step_s, 0.7);
  EXPECT_EQ((*measured)[0].loss, 2.5);
  EXPECT_EQ((*measured)[1].step, 1);
  EXPECT_DOUBLE_EQ((*measured)[1].step_s, 0.9);
  EXPECT_EQ((*measured)[1].loss, steps[2].row.loss);
}

TEST_F(ResultsStoreTest, WriteObserverSeesEveryWriteWithItsOperationAndOutcome) {
  std::vector<std::pair<std::string, bool>> seen;
  StoreOptions options;
  options.path = db_path_;
  options.env = &env_;
  options.write_observer = [&](const char* operation, const Status& status, double seconds) {
    EXPECT_GE(seconds, 0.0);
    seen.emplace_back(operation, status.ok());
  };
  Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
  ASSERT_TRUE(store.ok());
  CreatedSweep created = CreateSample(**store);
  ASSERT_TRUE((*store)->AssignTrial(created.trial_ids[0], 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE((*store)->AppendStepMetrics({Step(created.trial_ids[0], 1, 0, 0)}).ok());
  EXPECT_FALSE((*store)->SetWorkerState("nobody", WorkerState::kIdle).ok());
  std::vector<std::pair<std::string, bool>> expected = {
      {"create_sweep", true}, {"assign_trial", true}, {"append_batch", true},
      {"set_worker_state", false}};
  EXPECT_EQ(seen, expected);
}

// --- Group commit --------------------------------------------------------------------

// --- Checkpoints ------------------------------------------------------------------------

// Writes 200,000 step rows (about 12 MB of pages) to `trial` in ten commits, steps from
// `first_step` on.
// `count` steps of rank 0 from step `first`, in one batch (one commit).
void AppendSteps(ResultsStore& store, int64_t trial, int64_t first, int count) {
  MetricsBatch rows;
  for (int i = 0; i < count; ++i) rows.steps.push_back(Step(trial, 1, 0, first + i));
  ASSERT_TRUE(store.AppendBatch(rows).ok());
}

void WriteManyPages(ResultsStore& store, int64_t trial, int64_t first_step = 0) {
  for (int batch = 0; batch < 10; ++batch) AppendSteps(store, trial, first_step + batch * 20000, 20000);
}

std::uintmax_t FileBytes(const std::string& path) {
  std::error_code ec;
  auto bytes = std::filesystem::file_size(path, ec);
  return ec ? 0 : bytes;
}

// The writer's commits leave the WAL to the checkpoint thread below 4,000 pages: SQLite's
// automatic checkpoint (at 1,000 pages, inside the commit) copied pages and fsync'd the
// database on the coordinator's event loop.
TEST_F(ResultsStoreTest, CommitsLeaveCheckpointsToTheStoresThread) {
  StoreOptions options;
  options.path = db_path_;
  options.checkpoint_interval = std::chrono::hours(1);  // the thread waits: only commits run
  auto store = ResultsStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const int64_t trial = AssignFirstTrial(**store);
  ASSERT_TRUE((*store)->MarkRunning(trial, 1)->applied);
  const auto before = FileBytes(db_path_);
  WriteManyPages(**store, trial);
  EXPECT_EQ(FileBytes(db_path_), before) << "a commit checkpointed into the database file";
  EXPECT_GT(FileBytes(db_path_ + "-wal"), 8u << 20);
}

// How far the WAL's checkpoints have come, read from the WAL index (the -shm file) without
// taking part: https://www.sqlite.org/walformat.html, "the WAL-index header" (mxFrame at
// byte 16 of the first header copy) and "the checkpoint info" (nBackfill at byte 96),
// both in the host's byte order.
struct WalProgress {
  uint32_t frames = 0;      // mxFrame: valid frames in the WAL
  uint32_t backfilled = 0;  // nBackfill: frames already copied into the database
};
std::optional<WalProgress> ReadWalIndex(const std::string& shm_path) {
  std::ifstream in(shm_path, std::ios::binary);
  char header[136];
  if (!in.read(header, sizeof header)) return std::nullopt;
  WalProgress progress;
  std::memcpy(&progress.frames, header + 16, sizeof progress.frames);
  std::memcpy(&progress.backfilled, header + 96, sizeof progress.backfilled);
  return progress;
}

// The thread copies the WAL into the database, and the WAL is reused once it caught up.
TEST_F(ResultsStoreTest, TheCheckpointThreadCopiesTheWalIntoTheDatabaseAndReusesIt) {
  StoreOptions options;
  options.path = db_path_;
  options.checkpoint_interval = std::chrono::milliseconds(10);
  auto store = ResultsStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const int64_t trial = AssignFirstTrial(**store);
  ASSERT_TRUE((*store)->MarkRunning(trial, 1)->applied);
  WriteManyPages(**store, trial);  // 12 MB: under the writer's own 16 MB checkpoint
  // Only the thread copies here. The deadlines are for a loaded machine; a quiet one takes
  // well under a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (FileBytes(db_path_) < (8u << 20) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(FileBytes(db_path_), 8u << 20) << "the rows never reached the database file";
  // Caught up: every frame is in the database. A settle time on the file's size was not
  // enough on a loaded CI machine (two flakes): the thread can be off the CPU mid-copy.
  std::optional<WalProgress> progress;
  while (std::chrono::steady_clock::now() < deadline) {
    progress = ReadWalIndex(db_path_ + "-shm");
    if (progress && progress->frames > 0 && progress->backfilled == progress->frames) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(progress.has_value()) << "no WAL index";
  ASSERT_EQ(progress->backfilled, progress->frames) << "the thread never caught up with the WAL";
  // The next commit starts the WAL again from its beginning: a write far smaller than the
  // WAL (about 120 KB against megabytes) leaves the file's size as it was. Appended
  // instead, it would grow it.
  const auto wal = FileBytes(db_path_ + "-wal");
  AppendSteps(**store, trial, 200000, 2000);
  EXPECT_EQ(FileBytes(db_path_ + "-wal"), wal) << "the commit was appended: the WAL was not reused";
  const auto after = ReadWalIndex(db_path_ + "-shm");
  ASSERT_TRUE(after.has_value());
  EXPECT_LT(after->frames, progress->frames) << "the WAL did not start again";
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 202000);
}

// A block of steps first..last of rank 0, phase measure, of `trial`'s attempt 1.
StepBlockRecord Block(int64_t trial, int64_t first, int64_t last) {
  StepBlockRecord block{trial, 1, 0, "measure", {}};
  for (int64_t s = first; s <= last; ++s) {
    block.rows.push_back(Step(trial, 1, 0, s).row);
  }
  return block;
}

// A block redelivered is stored once; one that overlaps stored blocks (a sender that
// regrouped its steps) adds only the steps outside them, so no step is ever stored twice.
TEST_F(ResultsStoreTest, StepBlocksAreStoredOnceAndOverlapsAddOnlyTheirNewSteps) {
  auto store = OpenStore();
  const int64_t trial = AssignFirstTrial(*store);
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  auto append = [&](std::vector<StepBlockRecord> blocks) {
    MetricsBatch batch;
    batch.step_blocks = std::move(blocks);
    Result<BatchResult> written = store->AppendBatch(batch);
    EXPECT_TRUE(written.ok()) << written.status().ToString();
    return written.ok() ? *written : BatchResult{};
  };
  BatchResult first = append({Block(trial, 0, 4)});
  EXPECT_EQ(first.written, 5);
  BatchResult again = append({Block(trial, 0, 4)});
  EXPECT_EQ(again.written, 0);
  EXPECT_EQ(again.duplicates, 5);
  BatchResult tail = append({Block(trial, 3, 7), Block(trial, 10, 12)});
  EXPECT_EQ(tail.written, 3 + 3);
  EXPECT_EQ(tail.duplicates, 2);
  // Around two stored blocks: 8-9 and 13-15 are new, 10-12 are not.
  BatchResult around = append({Block(trial, 8, 15)});
  EXPECT_EQ(around.written, 5);
  EXPECT_EQ(around.duplicates, 3);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 16);
  EXPECT_EQ(QueryValue("SELECT COUNT(DISTINCT step) FROM step_metrics"), 16);
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_blocks"), 5);
  Result<std::vector<StepRecord>> steps = store->Reader()->ReadStepMetrics(trial, 1, 0);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 16u);
  for (int64_t s = 0; s < 16; ++s) {
    EXPECT_EQ((*steps)[s].row.step, s);
    EXPECT_DOUBLE_EQ((*steps)[s].row.step_s, Step(trial, 1, 0, s).row.step_s);
    EXPECT_EQ((*steps)[s].row.peak_mem_bytes, 1'000'000 + s);
  }
}

// Every column of a step reads back from its block with its value and SQL type; an
// absent one is NULL, and a step time of a whole number of seconds stays REAL.
TEST_F(ResultsStoreTest, AStepBlockKeepsEveryValueAndType) {
  auto store = OpenStore();
  const int64_t trial = AssignFirstTrial(*store);
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  MetricsBatch batch;
  batch.step_blocks.push_back(StepBlockRecord{
      trial, 1, 2, "warmup",
      {protocol::StepRow{7, 2.0, int64_t{9'007'199'254'740'993}, 1.0 / 3.0, 3e-5, int64_t{0}, std::nullopt,
                         std::nullopt, int64_t{1}},
       protocol::StepRow{9, 0.0, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt, 1e-300,
                         std::nullopt}}});
  ASSERT_EQ(store->AppendBatch(batch)->written, 2);
  EXPECT_EQ(QueryValue("SELECT typeof(step) || typeof(step_s) || typeof(tokens) || typeof(loss) || typeof(lr) || "
                       "typeof(peak_mem_bytes) || typeof(rss_bytes) || typeof(comm_s) || typeof(comm_bytes) "
                       "FROM step_metrics WHERE step = 7"),
            "integerrealintegerrealrealintegernullnullinteger");
  Result<std::vector<StepRecord>> steps = store->Reader()->ReadStepMetrics(trial, 1, 2);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 2u);
  const StepRecord& a = (*steps)[0];
  EXPECT_EQ(a.phase, "warmup");
  EXPECT_DOUBLE_EQ(a.row.step_s, 2.0);
  EXPECT_EQ(a.row.tokens, int64_t{9'007'199'254'740'993}) << "an integer past 2^53 is exact";
  EXPECT_EQ(a.row.loss, 1.0 / 3.0) << "a double round-trips exactly";
  EXPECT_EQ(a.row.lr, 3e-5);
  EXPECT_EQ(a.row.peak_mem_bytes, 0);
  EXPECT_FALSE(a.row.rss_bytes.has_value());
  EXPECT_EQ((*steps)[1].row.comm_s, 1e-300);
  EXPECT_FALSE((*steps)[1].row.loss.has_value());
}

// A block whose steps do not increase is refused whole, and nothing of its batch stays.
TEST_F(ResultsStoreTest, AStepBlockWhoseStepsDoNotIncreaseIsRefused) {
  auto store = OpenStore();
  const int64_t trial = AssignFirstTrial(*store);
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  MetricsBatch batch;
  batch.step_blocks.push_back(Block(trial, 0, 2));
  batch.step_blocks.push_back(Block(trial, 5, 6));
  std::swap(batch.step_blocks[1].rows[0], batch.step_blocks[1].rows[1]);
  ExpectRefusedAndNothingStored(*store, store->AppendBatch(batch).status(), "steps do not increase", "step_blocks");
}

TEST_F(ResultsStoreTest, GroupedWritesAreInvisibleToOtherConnectionsUntilTheGroupCommits) {
  auto store = OpenStore();
  CreatedSweep sweep = CreateSample(*store);
  const int64_t trial = sweep.trial_ids[0];
  store->BeginGroup();
  EXPECT_TRUE(store->in_group());
  EXPECT_FALSE(store->group_pending()) << "an empty group has nothing to commit";
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  EXPECT_TRUE(store->group_pending());
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  MetricsBatch batch;
  batch.steps = {Step(trial, 1, 0, 0), Step(trial, 1, 0, 1)};
  ASSERT_EQ(store->AppendBatch(batch)->written, 2);
  // Not committed: another connection (a user's query, a crash) sees none of it.
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 0);
  EXPECT_EQ(QueryValue("SELECT state FROM trials WHERE id = " + std::to_string(trial)), "queued");
  ASSERT_TRUE(store->CommitGroup().ok());
  EXPECT_FALSE(store->in_group());
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM step_metrics"), 2);
  EXPECT_EQ(QueryValue("SELECT state FROM trials WHERE id = " + std::to_string(trial)), "running");
}

TEST_F(ResultsStoreTest, AWriteRefusedInAGroupIsUndoneAloneAndTheGroupKeepsTheRest) {
  auto store = OpenStore();
  CreatedSweep sweep = CreateSample(*store);
  store->BeginGroup();
  ASSERT_TRUE(store->AssignTrial(sweep.trial_ids[0], 0, Placement("w1", "node-a"))->applied);
  // A write that fails half-way (the sweep does not exist): its error as outside a group.
  Status refused = store->SetSweepState(sweep.sweep_id + 100, SweepState::kFinished);
  EXPECT_EQ(refused.code(), Status::Code::kNotFound) << refused.ToString();
  // Compare-and-set still sees the group's own writes: a second assign is not applied.
  auto again = store->AssignTrial(sweep.trial_ids[0], 0, Placement("w2", "node-b"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  ASSERT_TRUE(store->AssignTrial(sweep.trial_ids[1], 0, Placement("w2", "node-b"))->applied);
  ASSERT_TRUE(store->CommitGroup().ok());
  EXPECT_TRUE(store->healthy());
  EXPECT_EQ(QueryValue("SELECT COUNT(*) FROM attempts"), 2);
  EXPECT_EQ(QueryValue("SELECT worker_id FROM attempts WHERE trial_id = " + std::to_string(sweep.trial_ids[0])),
            "w1");
}

TEST_F(ResultsStoreTest, AReadDuringAGroupCommitsItFirstSoNoReaderSeesALosableWrite) {
  auto store = OpenStore();
  CreatedSweep sweep = CreateSample(*store);
  const int64_t trial = sweep.trial_ids[0];
  store->BeginGroup();
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  // The store's own read answers "assigned": by then it is committed, so another
  // connection sees it too.
  auto read = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->state, TrialState::kAssigned);
  EXPECT_EQ(QueryValue("SELECT state FROM trials WHERE id = " + std::to_string(trial)), "assigned");
  // The group goes on in a new transaction.
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  EXPECT_EQ(QueryValue("SELECT state FROM trials WHERE id = " + std::to_string(trial)), "assigned");
  ASSERT_TRUE(store->CommitGroup().ok());
  EXPECT_EQ(QueryValue("SELECT state FROM trials WHERE id = " + std::to_string(trial)), "running");
}

}  // namespace
}  // namespace bakeoff::metrics
