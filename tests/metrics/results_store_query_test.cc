// RunReadOnlyQuery (what `bakeoff query` runs): one statement, opened read-only, rows
// and time bounded, results typed; a statement that would write is refused and the
// database is unchanged.
#include "metrics/read_only_query.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "metrics/results_store.h"
#include "metrics/schema_migrations.h"
#include "tests/metrics/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using testing::MakeSampleSweep;
using testing::TempDir;

class ReadOnlyQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.path = db_path_;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    testing::SampleSweep sample = MakeSampleSweep("query-me", /*repeats=*/5);
    ASSERT_TRUE(store_->CreateSweep(sample.sweep, sample.variants, sample.trials).ok());
  }

  int64_t TrialCount() {
    Result<QueryResult> count = RunReadOnlyQuery(db_path_, "SELECT COUNT(*) FROM trials");
    EXPECT_TRUE(count.ok()) << count.status().ToString();
    return count.ok() ? count->rows[0][0].get<int64_t>() : -1;
  }

  TempDir dir_;
  std::string db_path_ = dir_.File("results.db");
  std::unique_ptr<ResultsStore> store_;
};

TEST_F(ReadOnlyQueryTest, ReturnsColumnNamesAndTypedValues) {
  Result<QueryResult> result = RunReadOnlyQuery(
      db_path_, "SELECT name, trial_count, 0.5 AS half, NULL AS empty, x'0aff' AS raw "
                "FROM sweeps;  ");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->columns,
            (std::vector<std::string>{"name", "trial_count", "half", "empty", "raw"}));
  ASSERT_EQ(result->rows.size(), 1u);
  EXPECT_EQ(result->rows[0][0], "query-me");
  EXPECT_EQ(result->rows[0][1], 10);
  EXPECT_TRUE(result->rows[0][1].is_number_integer());
  EXPECT_EQ(result->rows[0][2], 0.5);
  EXPECT_TRUE(result->rows[0][3].is_null());
  EXPECT_EQ(result->rows[0][4], "x'0aff'");
  EXPECT_FALSE(result->truncated);
}

TEST_F(ReadOnlyQueryTest, StatementsThatWriteAreRefusedAndChangeNothing) {
  const char* writes[] = {
      "DELETE FROM trials",
      "UPDATE trials SET state = 'finished', outcome = 'succeeded'",
      "INSERT INTO workers (id, name, host, resources_json, state, registered_at) "
      "VALUES ('x', 'x', 'x', '{}', 'idle', 0)",
      "DROP TABLE trials",
      "CREATE TABLE scratch (a)",
      "PRAGMA user_version = 42",
      "VACUUM",
      "WITH doomed AS (SELECT id FROM trials) DELETE FROM trials WHERE id IN doomed",
  };
  for (const char* sql : writes) {
    Result<QueryResult> result = RunReadOnlyQuery(db_path_, sql);
    ASSERT_FALSE(result.ok()) << sql;
    EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument) << sql;
    EXPECT_NE(result.status().message().find("read-only"), std::string::npos)
        << sql << ": " << result.status().message();
  }
  EXPECT_EQ(TrialCount(), 10);
  Result<int> version = store_->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestSchemaVersion);
}

TEST_F(ReadOnlyQueryTest, OtherFilesCannotBeAttachedAndHugeValuesAreRefused) {
  std::string other = dir_.File("other.db");
  Result<QueryResult> attach = RunReadOnlyQuery(db_path_, "ATTACH '" + other + "' AS other");
  ASSERT_FALSE(attach.ok());
  EXPECT_FALSE(std::filesystem::exists(other));
  Result<QueryResult> huge = RunReadOnlyQuery(db_path_, "SELECT length(randomblob(1000000000))");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().ToString().find("too big"), std::string::npos) << huge.status().ToString();
}

TEST_F(ReadOnlyQueryTest, MoreThanOneStatementIsRefused) {
  Result<QueryResult> result = RunReadOnlyQuery(db_path_, "SELECT 1; DELETE FROM trials");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(result.status().message().find("one statement"), std::string::npos);
  EXPECT_EQ(TrialCount(), 10);
}

TEST_F(ReadOnlyQueryTest, RowsBeyondTheLimitAreCutAndFlagged) {
  QueryLimits limits;
  limits.max_rows = 3;
  Result<QueryResult> result = RunReadOnlyQuery(db_path_, "SELECT id FROM trials ORDER BY id", limits);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rows.size(), 3u);
  EXPECT_TRUE(result->truncated);

  limits.max_rows = 10;
  result = RunReadOnlyQuery(db_path_, "SELECT id FROM trials", limits);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rows.size(), 10u);
  EXPECT_FALSE(result->truncated);
}

TEST_F(ReadOnlyQueryTest, QueryPastItsTimeLimitIsInterrupted) {
  QueryLimits limits;
  limits.timeout = std::chrono::milliseconds(200);
  // Counts forever unless interrupted: without the limit the future below never becomes
  // ready, and the wait's deadline (not a timing assertion) fails the test.
  auto running = std::async(std::launch::async, [&] {
    return RunReadOnlyQuery(db_path_,
                            "WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever) "
                            "SELECT COUNT(*) FROM forever",
                            limits);
  });
  ASSERT_EQ(running.wait_for(std::chrono::seconds(120)), std::future_status::ready)
      << "the query was not interrupted";
  Result<QueryResult> result = running.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kTimeout) << result.status().ToString();
  EXPECT_NE(result.status().message().find("200 ms"), std::string::npos);
}

TEST_F(ReadOnlyQueryTest, MissingDatabaseIsNotFoundAndNotCreated) {
  std::string missing = dir_.File("absent.db");
  Result<QueryResult> result = RunReadOnlyQuery(missing, "SELECT 1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kNotFound);
  EXPECT_NE(result.status().message().find(missing), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(ReadOnlyQueryTest, SyntaxErrorSaysWhatIsWrong) {
  Result<QueryResult> result = RunReadOnlyQuery(db_path_, "SELEKT * FROM trials");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(result.status().message().find("SELEKT"), std::string::npos);
  Result<QueryResult> empty = RunReadOnlyQuery(db_path_, "  ");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(ReadOnlyQueryTest, ReadsAClosedDatabaseWithoutChangingIt) {
  store_.reset();  // a clean close checkpoints and removes the WAL
  Result<QueryResult> result = RunReadOnlyQuery(db_path_, "SELECT COUNT(*) FROM variants");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->rows[0][0], 2);
}

}  // namespace
}  // namespace bakeoff::metrics
