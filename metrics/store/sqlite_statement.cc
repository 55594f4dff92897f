#include "metrics/store/sqlite_statement.h"

#include <cmath>
#include <utility>

#include "metrics/store/sqlite_connection.h"

namespace bakeoff::metrics {

SqliteStatement::SqliteStatement(SqliteConnection* connection, sqlite3_stmt* stmt, bool cached)
    : connection_(connection), stmt_(stmt), cached_(cached) {}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : connection_(other.connection_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      bind_error_(other.bind_error_),
      cached_(other.cached_) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    Release();
    connection_ = other.connection_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_error_ = other.bind_error_;
    cached_ = other.cached_;
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { Release(); }

void SqliteStatement::Release() {
  if (stmt_ == nullptr) return;
  if (cached_ && connection_ != nullptr) {
    connection_->ReturnCached(std::exchange(stmt_, nullptr));
  } else {
    sqlite3_finalize(std::exchange(stmt_, nullptr));
  }
}

void SqliteStatement::NoteBindResult(int rc) {
  if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  NoteBindResult(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, double value) {
  if (!std::isfinite(value)) return BindNull(index);
  NoteBindResult(sqlite3_bind_double(stmt_, index, value));
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view value) {
  NoteBindResult(sqlite3_bind_text64(stmt_, index, value.data(), value.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  NoteBindResult(sqlite3_bind_null(stmt_, index));
  return *this;
}

Result<bool> SqliteStatement::Step() {
  if (bind_error_ != SQLITE_OK) {
    return connection_->StatusFor(bind_error_, std::string("binding parameters of \"") +
                                                   sqlite3_sql(stmt_) + "\"");
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return connection_->StatusFor(rc, std::string("running \"") + sqlite3_sql(stmt_) + "\"");
}

Status SqliteStatement::Run() {
  while (true) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
}

int SqliteStatement::ColumnCount() const { return sqlite3_column_count(stmt_); }

std::string SqliteStatement::ColumnName(int column) const {
  const char* name = sqlite3_column_name(stmt_, column);
  return name != nullptr ? name : "";
}

int SqliteStatement::ColumnType(int column) const { return sqlite3_column_type(stmt_, column); }

bool SqliteStatement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t SqliteStatement::Int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double SqliteStatement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<int64_t> SqliteStatement::OptionalInt64(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int64(column);
}

std::optional<double> SqliteStatement::OptionalDouble(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

}  // namespace bakeoff::metrics
