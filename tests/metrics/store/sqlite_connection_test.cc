// SqliteConnection's statement cache: a hot statement is compiled once and reused,
// and comes back from the cache reset, with none of its previous bindings.
#include "metrics/store/sqlite_connection.h"

#include <gtest/gtest.h>

#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

std::unique_ptr<SqliteConnection> OpenMemory() {
  auto db = SqliteConnection::Open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(*db) : nullptr;
}

TEST(SqliteConnectionTest, ACachedStatementIsReusedAndComesBackWithoutItsBindings) {
  auto db = OpenMemory();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("CREATE TABLE t (v INTEGER)").ok());
  const std::string insert = "INSERT INTO t (v) VALUES (?)";
  sqlite3_stmt* first = nullptr;
  {
    auto stmt = db->PrepareCached(insert);
    ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
    first = stmt->handle();
    stmt->Bind(1, int64_t{7});
    ASSERT_TRUE(stmt->Run().ok());
  }
  {
    auto stmt = db->PrepareCached(insert);
    ASSERT_TRUE(stmt.ok());
    EXPECT_EQ(stmt->handle(), first) << "the compiled statement is reused";
    ASSERT_TRUE(stmt->Run().ok()) << "no binding left over: inserts NULL";
  }
  auto rows = db->PrepareCached("SELECT COUNT(*), COUNT(v), SUM(v) FROM t");
  ASSERT_TRUE(rows.ok());
  ASSERT_TRUE(*rows->Step());
  EXPECT_EQ(rows->Int64(0), 2);
  EXPECT_EQ(rows->Int64(1), 1);
  EXPECT_EQ(rows->Int64(2), 7);
}

TEST(SqliteConnectionTest, TheSameTextInUseTwiceAtOnceGetsTwoStatements) {
  auto db = OpenMemory();
  ASSERT_NE(db, nullptr);
  auto a = db->PrepareCached("SELECT 1");
  auto b = db->PrepareCached("SELECT 1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->handle(), b->handle());
  ASSERT_TRUE(*a->Step());
  ASSERT_TRUE(*b->Step());
  EXPECT_EQ(a->Int64(0), 1);
  EXPECT_EQ(b->Int64(0), 1);
}

TEST(SqliteConnectionTest, AStatementLeftMidRowDoesNotHoldTheNextCommit) {
  auto db = OpenMemory();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1), (2)").ok());
  {
    auto rows = db->PrepareCached("SELECT v FROM t");
    ASSERT_TRUE(rows.ok());
    ASSERT_TRUE(*rows->Step());  // one row read, then dropped: reset on its way back
  }
  ASSERT_TRUE(db->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(db->ExecCached("INSERT INTO t VALUES (3)").ok());
  EXPECT_TRUE(db->Exec("COMMIT").ok());
}

}  // namespace
}  // namespace bakeoff::metrics
