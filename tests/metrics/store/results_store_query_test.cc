// RunReadOnlyQuery (what `bakeoff query` runs): one statement, opened read-only, rows
// and time bounded, results typed; a statement that would write is refused and the
// database is unchanged.
#include "metrics/store/read_only_query.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "metrics/store/results_store.h"
#include "metrics/store/schema_migrations.h"
#include "tests/metrics/store/results_store_test_util.h"

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

  int64_t TrialCount() { return testing::CountRows(db_path_, "trials"); }

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
  Result<int> version = store_->Reader()->SchemaVersion();
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
  EXPECT_EQ(huge.status().code(), Status::Code::kResourceExhausted) << huge.status().ToString();
  EXPECT_NE(huge.status().ToString().find("builds a value over 4194304 bytes"), std::string::npos) << huge.status().ToString();
}

// A statement may only read: pragmas that change the connection or the whole process
// (hard_heap_limit once broke every later query and submit until restart) and functions
// that reach outside the database are refused while the statement is prepared.
TEST_F(ReadOnlyQueryTest, PragmasWithSideEffectsAndOutsideFunctionsAreRefusedAndLaterQueriesWork) {
  for (const char* sql : {"PRAGMA hard_heap_limit=1", "PRAGMA soft_heap_limit=1", "PRAGMA temp_store_directory='/tmp'",
                          "PRAGMA cache_size=1", "PRAGMA journal_mode=DELETE", "SELECT fts3_tokenizer('simple')",
                          "SELECT load_extension('/tmp/x.so')"}) {
    Result<QueryResult> result = RunReadOnlyQuery(db_path_, sql);
    ASSERT_FALSE(result.ok()) << sql;
    EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument) << sql;
    EXPECT_NE(result.status().message().find("not allowed"), std::string::npos) << result.status().message();
  }
  Result<QueryResult> after = RunReadOnlyQuery(db_path_, "SELECT COUNT(*) FROM trials");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->rows[0][0], 10);
  EXPECT_TRUE(store_->Reader()->ListSweeps().ok()) << "the store's own connection is unharmed";
  // Pragmas that describe the schema still work.
  Result<QueryResult> info = RunReadOnlyQuery(db_path_, "PRAGMA table_info(trials)");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->rows.size(), 3u);
  for (const char* sql : {"PRAGMA user_version", "PRAGMA journal_mode", "PRAGMA quick_check", "PRAGMA integrity_check(5)"}) {
    EXPECT_TRUE(RunReadOnlyQuery(db_path_, sql).ok()) << sql;
  }
}

TEST_F(ReadOnlyQueryTest, AResultIsCutAtItsByteBoundAndFlagged) {
  QueryLimits limits;
  limits.max_result_bytes = 1 << 20;
  // 143 bytes of SQL once returned 480 MB.
  Result<QueryResult> result = RunReadOnlyQuery(
      db_path_,
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) "
      "SELECT hex(zeroblob(50000)) FROM n",
      limits);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->truncated);
  EXPECT_EQ(result->rows.size(), 10u) << "10 rows of 100,000 bytes fit in 1 MiB, the 11th does not";
}

// The bound is on the answer as JSON encodes it (security review 2026-12-07, A3): a
// NUL byte is sent as \u0000, six bytes, so 100,000 of them count 600,002 and only one
// such row fits in 1 MiB. Counted by their stored length, ten did (a 161-byte query
// once returned a 100 MB answer under a 16 MiB bound).
TEST_F(ReadOnlyQueryTest, TheByteBoundCountsEscapedBytes) {
  QueryLimits limits;
  limits.max_result_bytes = 1 << 20;
  Result<QueryResult> result = RunReadOnlyQuery(
      db_path_,
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) "
      "SELECT CAST(zeroblob(100000) AS TEXT) FROM n",
      limits);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->truncated);
  ASSERT_EQ(result->rows.size(), 1u);
  EXPECT_LE(nlohmann::json(result->rows).dump().size(), limits.max_result_bytes);
  // Many small values: each counts its layout too, so 1 MiB holds far fewer than the
  // 131,072 rows that 8 bytes a value would allow.
  limits.max_rows = 1'000'000;
  result = RunReadOnlyQuery(db_path_,
                            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
                            "SELECT i FROM n",
                            limits);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->truncated);
  EXPECT_LT(result->rows.size(), 30000u);
  const nlohmann::json answer = {{"rows", result->rows}};
  EXPECT_LE(answer.dump(2).size(), limits.max_result_bytes);
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
