// Tests of attempt_live_sums (schema version 8): the live figures of
// GET /api/v1/sweeps/{sweep}/live are kept as steps are stored, equal what a full scan of
// the stored steps gives, and are read without reading a step (security review
// 2026-12-07, A5).

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metrics/store/read_only_query.h"
#include "metrics/store/results_reader.h"
#include "metrics/store/results_store.h"
#include "metrics/store/schema_migrations.h"
#include "metrics/store/sqlite_connection.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using testing::kOldRunningAttemptSql;
using testing::MakeSampleSweep;
using testing::Placement;
using testing::Step;

// The statement /live ran before schema version 8: every stored step of the sweep's
// current attempts, expanded from its block. The reference the sums must equal.
std::string FullScanSql(int64_t sweep_id) {
  return "SELECT t.id, t.attempts_used, "
         "TOTAL(m.rank = 0 AND m.phase = 'measure'), "
         "TOTAL(CASE WHEN m.rank = 0 AND m.phase = 'measure' THEN m.tokens END), "
         "TOTAL(CASE WHEN m.rank = 0 AND m.phase = 'measure' THEN m.step_s END), "
         "MAX(m.peak_mem_bytes) "
         "FROM trials t JOIN step_metrics m ON m.trial_id = t.id AND m.attempt = t.attempts_used "
         "WHERE t.sweep_id = " +
         std::to_string(sweep_id) + " GROUP BY t.id ORDER BY t.order_index";
}

class AttemptLiveSumsTest : public testing::StoreTest {
 protected:
  // A block of `rank`'s steps first..last in `phase` of `trial`'s `attempt`; every
  // seventh step has no peak memory, and rank 1 reports more memory than rank 0.
  static StepBlockRecord Block(int64_t trial, int64_t attempt, int64_t rank, const std::string& phase,
                               int64_t first, int64_t last) {
    StepBlockRecord block{trial, attempt, rank, phase, {}};
    for (int64_t s = first; s <= last; ++s) {
      protocol::StepRow row = Step(trial, attempt, rank, s, phase).row;
      row.tokens = 1000 + s % 13;
      if (s % 7 == 3) row.peak_mem_bytes.reset();
      if (rank == 1 && row.peak_mem_bytes) *row.peak_mem_bytes += 5'000'000;
      block.rows.push_back(row);
    }
    return block;
  }

  static void Append(ResultsStore& store, std::vector<StepBlockRecord> blocks) {
    MetricsBatch batch;
    batch.step_blocks = std::move(blocks);
    Result<BatchResult> written = store.AppendBatch(batch);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
  }

  // The rows of `sql` through a read-only connection of its own (as the /live route
  // runs LiveFiguresSql), as LiveTrialFigures.
  std::vector<LiveTrialFigures> Figures(const std::string& sql) {
    Result<QueryResult> result = RunReadOnlyQuery(db_path_, sql);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    std::vector<LiveTrialFigures> out;
    if (!result.ok()) return out;
    for (const auto& row : result->rows) {
      LiveTrialFigures f;
      f.trial_id = row.at(0).get<int64_t>();
      f.attempt = row.at(1).get<int64_t>();
      f.measured_steps = static_cast<int64_t>(row.at(2).get<double>());
      f.tokens = static_cast<int64_t>(row.at(3).get<double>());
      f.step_s = row.at(4).get<double>();
      if (row.at(5).is_number()) f.peak_mem_bytes = row.at(5).get<int64_t>();
      out.push_back(f);
    }
    return out;
  }

  static void ExpectSame(const std::vector<LiveTrialFigures>& got, const std::vector<LiveTrialFigures>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("trial " + std::to_string(want[i].trial_id));
      EXPECT_EQ(got[i].trial_id, want[i].trial_id);
      EXPECT_EQ(got[i].attempt, want[i].attempt);
      EXPECT_EQ(got[i].measured_steps, want[i].measured_steps);
      EXPECT_EQ(got[i].tokens, want[i].tokens);
      // Summed in another order: equal to rounding.
      EXPECT_NEAR(got[i].step_s, want[i].step_s, 1e-9 * (1 + want[i].step_s));
      EXPECT_EQ(got[i].peak_mem_bytes, want[i].peak_mem_bytes);
    }
  }
};

// Many steps over two ranks and both phases, redelivered and overlapping blocks, a
// requeued trial (its first attempt's steps no longer count), a trial with rank 1's steps
// only and one with none: the sums are the full scan's figures, from both readers.
TEST_F(AttemptLiveSumsTest, TheLiveFiguresEqualAFullScanOfTheSteps) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  testing::SampleSweep sample = MakeSampleSweep("live", /*repeats=*/3);
  Result<CreatedSweep> created = store->CreateSweep(sample.sweep, sample.variants, sample.trials);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::vector<int64_t>& trials = created->trial_ids;
  ASSERT_GE(trials.size(), 5u);
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(store->AssignTrial(trials[i], 0, Placement("w1", "node-a"))->applied);
    ASSERT_TRUE(store->MarkRunning(trials[i], 1)->applied);
  }
  // Trial 0: 2 ranks, warm-up and 20,000 measured steps in blocks of 500, each sent twice.
  for (int64_t rank = 0; rank < 2; ++rank) {
    Append(*store, {Block(trials[0], 1, rank, "warmup", 0, 4)});
    for (int64_t first = 5; first < 20'005; first += 500) {
      Append(*store, {Block(trials[0], 1, rank, "measure", first, first + 499)});
      Append(*store, {Block(trials[0], 1, rank, "measure", first, first + 499)});  // a redelivery
    }
  }
  // Trial 1: overlapping blocks (a sender that regrouped its steps).
  Append(*store, {Block(trials[1], 1, 0, "measure", 0, 99)});
  Append(*store, {Block(trials[1], 1, 0, "measure", 50, 149), Block(trials[1], 1, 0, "measure", 200, 220)});
  Append(*store, {Block(trials[1], 1, 0, "measure", 140, 260)});
  // Trial 2: steps of attempt 1, then requeued; attempt 2 has its own.
  Append(*store, {Block(trials[2], 1, 0, "measure", 0, 999)});
  ASSERT_TRUE(store->RequeueTrial(trials[2], 1, protocol::Outcome::kLost, "worker lost")->applied);
  ASSERT_TRUE(store->AssignTrial(trials[2], 1, Placement("w2", "node-b"))->applied);
  ASSERT_TRUE(store->MarkRunning(trials[2], 2)->applied);
  Append(*store, {Block(trials[2], 2, 0, "measure", 0, 9), Block(trials[2], 2, 1, "measure", 0, 9)});
  // Trial 3: rank 1's steps only (rank 0's have not come yet): no measured step, a peak.
  Append(*store, {Block(trials[3], 1, 1, "measure", 0, 5)});

  const std::vector<LiveTrialFigures> scanned = Figures(FullScanSql(created->sweep_id));
  ASSERT_EQ(scanned.size(), 4u) << "trials without a step have no row, as before";
  EXPECT_EQ(scanned[0].measured_steps, 20'000);
  EXPECT_EQ(scanned[1].measured_steps, 261);
  EXPECT_EQ(scanned[2].attempt, 2);
  EXPECT_EQ(scanned[2].measured_steps, 10);
  EXPECT_EQ(scanned[3].measured_steps, 0);

  Result<std::vector<LiveTrialFigures>> stored = store->Reader()->LiveFigures(created->sweep_id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ExpectSame(*stored, scanned);
  ExpectSame(Figures(LiveFiguresSql(created->sweep_id)), scanned);
}

// The figures come from the sums alone: with every stored step gone (no trigger fires on
// a delete), they are unchanged; and the statement names no table of steps. So a call
// costs a row per trial however many steps the sweep stored.
TEST_F(AttemptLiveSumsTest, TheLiveFiguresReadNoStep) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  testing::SampleSweep sample = MakeSampleSweep("live");
  Result<CreatedSweep> created = store->CreateSweep(sample.sweep, sample.variants, sample.trials);
  ASSERT_TRUE(created.ok());
  const int64_t trial = created->trial_ids.at(0);
  ASSERT_TRUE(store->AssignTrial(trial, 0, Placement("w1", "node-a"))->applied);
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  for (int64_t first = 0; first < 5000; first += 250) Append(*store, {Block(trial, 1, 0, "measure", first, first + 249)});
  const std::vector<LiveTrialFigures> before = Figures(LiveFiguresSql(created->sweep_id));
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].measured_steps, 5000);

  {
    Result<std::unique_ptr<SqliteConnection>> db = SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("DELETE FROM step_blocks").ok());
  }
  ExpectSame(Figures(LiveFiguresSql(created->sweep_id)), before);
  Result<std::vector<LiveTrialFigures>> stored = store->Reader()->LiveFigures(created->sweep_id);
  ASSERT_TRUE(stored.ok());
  ExpectSame(*stored, before);
  for (const char* steps : {"step_blocks", "step_metrics"}) {
    EXPECT_EQ(LiveFiguresSql(created->sweep_id).find(steps), std::string::npos) << LiveFiguresSql(created->sweep_id);
  }
}

// A database of version 7 gets the sums of the steps it already stored when it is
// migrated, and keeps them up to date afterwards.
TEST_F(AttemptLiveSumsTest, MigratingSumsTheStepsAlreadyStored) {
  {
    Result<std::unique_ptr<SqliteConnection>> db =
        SqliteConnection::Open(db_path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 1.0, /*target_version=*/7).ok());
    ASSERT_TRUE((*db)->Exec(kOldRunningAttemptSql).ok());
    ASSERT_TRUE((*db)->Exec(R"sql(
      INSERT INTO step_blocks (trial_id, attempt, rank, phase, first_step, last_step, steps, rows_json)
        VALUES (70, 1, 0, 'measure', 0, 1, 2, '[[0,1.5,256,3.25,0.0001,1000],[1,1.0,256]]'),
               (70, 1, 1, 'warmup', 0, 0, 1, '[[0,9.0,256,3.25,0.0001,3000]]');
    )sql").ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Reader()->SchemaVersion().value(), kLatestSchemaVersion);
  ExpectSame(Figures(LiveFiguresSql(7)), Figures(FullScanSql(7)));
  const std::vector<LiveTrialFigures> migrated = Figures(LiveFiguresSql(7));
  ASSERT_EQ(migrated.size(), 1u);
  EXPECT_EQ(migrated[0].measured_steps, 2);
  EXPECT_EQ(migrated[0].tokens, 512);
  EXPECT_DOUBLE_EQ(migrated[0].step_s, 2.5);
  EXPECT_EQ(migrated[0].peak_mem_bytes, 3000);

  Append(*store, {Block(70, 1, 0, "measure", 2, 40)});
  ExpectSame(Figures(LiveFiguresSql(7)), Figures(FullScanSql(7)));
  EXPECT_EQ(Figures(LiveFiguresSql(7)).at(0).measured_steps, 41);
}

}  // namespace
}  // namespace bakeoff::metrics
