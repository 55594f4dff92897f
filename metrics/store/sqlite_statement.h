// SqliteStatement: an RAII prepared statement of the SQLite C API, with typed binding
// and column access. Made by SqliteConnection::Prepare (finalized on destruction) or
// PrepareCached (reset and handed back to the connection's cache on destruction).
// Thread-safety: none; a statement belongs to the thread using its connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/status.h"

namespace bakeoff::metrics {

class SqliteConnection;

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Parameters are 1-based, as in SQLite. A nullopt binds NULL.
  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  SqliteStatement& Bind(int index, double value);  // a non-finite value binds NULL
  SqliteStatement& Bind(int index, std::string_view value);
  SqliteStatement& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  SqliteStatement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  SqliteStatement& BindNull(int index);
  template <typename T>
  SqliteStatement& Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : BindNull(index);
  }
  // Binds every argument in order from parameter 1.
  template <typename... Args>
  SqliteStatement& BindAll(const Args&... args) {
    int index = 1;
    (Bind(index++, args), ...);
    return *this;
  }

  // Advances: true when a row is available, false when done. A failure (including a
  // bind that failed earlier) is a Status naming the statement.
  Result<bool> Step();
  // Steps to completion, ignoring rows.
  Status Run();
  // Ready to run again with new bindings.
  void Reset();

  int ColumnCount() const;
  std::string ColumnName(int column) const;
  int ColumnType(int column) const;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, ...
  bool IsNull(int column) const;
  int64_t Int64(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  std::optional<int64_t> OptionalInt64(int column) const;
  std::optional<double> OptionalDouble(int column) const;

  sqlite3_stmt* handle() const { return stmt_; }

 private:
  friend class SqliteConnection;
  SqliteStatement(SqliteConnection* connection, sqlite3_stmt* stmt, bool cached = false);
  void NoteBindResult(int rc);
  void Release();  // finalizes, or hands a cached statement back

  SqliteConnection* connection_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bind_error_ = SQLITE_OK;
  bool cached_ = false;
};

}  // namespace bakeoff::metrics
