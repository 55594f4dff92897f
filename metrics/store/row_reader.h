// The row readers of the results store (internal to metrics/store/): a record's fields
// read from a SELECT's columns in order by type (ReadColumns), enums through their stored
// names (an unknown name is a damaged database), and the QueryAll/QueryOne helpers that
// run cached statements. Shared by the reader (results_reader.cc) and the writer's
// compare-and-set reads (results_store.cc); not part of either's API.
// Thread-safety: functions of the connection they are given, which must not be used by
// two threads at once.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/store/sqlite_connection.h"
#include "metrics/store/sqlite_statement.h"
#include "metrics/store/store_records.h"
#include "protocol/status.h"

namespace bakeoff::metrics::rows {

inline nlohmann::json ParseJsonOr(const std::string& text, nlohmann::json fallback) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? fallback : parsed;
}

inline std::vector<RankPlacement> RanksFromJson(const std::string& text) {
  std::vector<RankPlacement> ranks;
  nlohmann::json array = ParseJsonOr(text, nlohmann::json::array());
  if (!array.is_array()) return ranks;
  for (const nlohmann::json& item : array) {
    if (!item.is_object()) continue;
    RankPlacement rank;
    rank.rank = item.value("rank", int64_t{0});
    rank.worker_id = item.value("worker_id", std::string());
    rank.host = item.value("host", std::string());
    rank.device = item.value("device", std::string());
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

// Converts a stored enum name, treating an unknown one as a damaged database.
template <typename Enum>
Result<Enum> ParseStored(Result<Enum> parsed, const SqliteConnection& db, const char* column) {
  if (parsed.ok()) return parsed;
  return Status::IoError("results database " + db.path() + ": column " + column +
                         " holds an unexpected value (" + parsed.status().message() + ")");
}

// --- Row readers: the column lists and the code reading them stay side by side. ----
// A reader names a record's fields in column order; ReadColumns fills them by type.

// A JSON column read into `out`, `fallback` when NULL or not JSON.
struct JsonOr {
  nlohmann::json& out;
  nlohmann::json fallback;
};

// A column holding an enum's SQL name (store_records.h), into Enum or std::optional<Enum>
// (NULL: nullopt); an unknown name is a damaged database.
template <typename Enum, typename Target = Enum>
struct Stored {
  Target& out;
  Result<Enum> (*parse)(const std::string&);
  const char* column;
};
template <typename Enum>
Stored(Enum&, Result<Enum> (*)(const std::string&), const char*) -> Stored<Enum, Enum>;
template <typename Enum>
Stored(std::optional<Enum>&, Result<Enum> (*)(const std::string&), const char*)
    -> Stored<Enum, std::optional<Enum>>;

class ColumnReader {
 public:
  ColumnReader(const SqliteStatement& row, const SqliteConnection& db) : row_(row), db_(db) {}

  template <typename Field>
  void Next(Field&& field) {
    if (status_.ok()) Read(std::forward<Field>(field));
    ++column_;
  }
  const Status& status() const { return status_; }

 private:
  void Read(int64_t& out) { out = row_.Int64(column_); }
  void Read(double& out) { out = row_.Double(column_); }
  void Read(bool& out) { out = row_.Int64(column_) != 0; }
  void Read(std::string& out) { out = row_.Text(column_); }
  void Read(std::optional<int64_t>& out) { out = row_.OptionalInt64(column_); }
  void Read(std::optional<double>& out) { out = row_.OptionalDouble(column_); }
  void Read(nlohmann::json& out) { out = ParseJsonOr(row_.Text(column_), nlohmann::json::object()); }
  void Read(JsonOr field) { field.out = ParseJsonOr(row_.Text(column_), field.fallback); }
  void Read(std::vector<RankPlacement>& out) { out = RanksFromJson(row_.Text(column_)); }
  template <typename Enum, typename Target>
  void Read(Stored<Enum, Target> field) {
    if constexpr (!std::is_same_v<Enum, Target>) {
      if (row_.IsNull(column_)) return;  // an optional enum stays nullopt
    }
    Result<Enum> parsed = ParseStored(field.parse(row_.Text(column_)), db_, field.column);
    if (parsed.ok()) {
      field.out = *parsed;
    } else {
      status_ = parsed.status();
    }
  }

  const SqliteStatement& row_;
  const SqliteConnection& db_;
  int column_ = 0;
  Status status_;
};

// Fills `fields` from columns 0, 1, ... of the current row; the first unknown enum name
// is an IoError (ParseStored).
template <typename... Fields>
Status ReadColumns(const SqliteStatement& row, const SqliteConnection& db, Fields&&... fields) {
  ColumnReader reader(row, db);
  (reader.Next(std::forward<Fields>(fields)), ...);
  return reader.status();
}


// Reads every row of `stmt` with `read` into a vector.
template <typename T, typename Reader>
Result<std::vector<T>> ReadAll(SqliteStatement& stmt, Reader read) {
  std::vector<T> rows;
  while (true) {
    Result<bool> has_row = stmt.Step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) return rows;
    Result<T> row = read(stmt);
    if (!row.ok()) return row.status();
    rows.push_back(std::move(*row));
  }
}

// `sql` prepared (cached) with `args` bound from parameter 1.
template <typename... Args>
Result<SqliteStatement> PrepareBound(SqliteConnection& db, const std::string& sql, const Args&... args) {
  Result<SqliteStatement> stmt = db.PrepareCached(sql);
  if (stmt.ok()) stmt->BindAll(args...);
  return stmt;
}

// Runs `sql` (cached) with `args` bound and reads every row with read(row, db).
template <typename T, typename... Args>
Result<std::vector<T>> QueryAll(SqliteConnection& db, const std::string& sql,
                                Result<T> (*read)(const SqliteStatement&, const SqliteConnection&),
                                const Args&... args) {
  Result<SqliteStatement> stmt = PrepareBound(db, sql, args...);
  if (!stmt.ok()) return stmt.status();
  return ReadAll<T>(*stmt, [&](const SqliteStatement& row) { return read(row, db); });
}

// As QueryAll for the first row; `not_found` when there is none.
template <typename T, typename... Args>
Result<T> QueryOne(SqliteConnection& db, const std::string& sql, const Status& not_found,
                   Result<T> (*read)(const SqliteStatement&, const SqliteConnection&),
                   const Args&... args) {
  Result<SqliteStatement> stmt = PrepareBound(db, sql, args...);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return not_found;
  return read(*stmt, db);
}

}  // namespace bakeoff::metrics::rows
