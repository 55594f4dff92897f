#include "metrics/store/read_only_query.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "metrics/store/sqlite_connection.h"

namespace bakeoff::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// Largest string or blob a query may build (randomblob(1e10) would otherwise try); a
// smaller result cap lowers it (a value larger than the whole result can never be sent).
// Nothing stored is larger: every stored value came in a frame (4 MiB) or a request body
// (1 MiB).
constexpr int kMaxValueBytes = 4 << 20;
// Result columns (and table columns) a statement may have: the results schema has fewer
// than 40, and each column of a wide SELECT is built before the byte cap can see it.
constexpr int kMaxColumns = 100;

// What SQLite may allocate for one query beyond what it held when the query began, checked
// where its program loops (rows, sorts, recursive CTEs): SQLite calls the progress handler
// at jumps only, so one straight-line row is bounded by the column and value caps instead
// (100 x 4 MiB, twice that while a CAST copies). sqlite3_memory_used() counts the whole
// process, so a busy store can take a little of this budget.
constexpr sqlite3_int64 kMaxQueryMemoryBytes = 256 << 20;

struct Deadline {
  Clock::time_point at;
  sqlite3_int64 memory_limit = 0;  // sqlite3_memory_used() at which the query stops
  bool passed = false;
  bool out_of_memory = false;
};

// Called by SQLite every few virtual-machine instructions; non-zero interrupts.
int CheckDeadline(void* arg) {
  auto* deadline = static_cast<Deadline*>(arg);
  if (Clock::now() >= deadline->at) deadline->passed = true;
  if (sqlite3_memory_used() > deadline->memory_limit) deadline->out_of_memory = true;
  return deadline->passed || deadline->out_of_memory ? 1 : 0;
}

bool OnlyWhitespaceOrSemicolons(const char* text) {
  for (; text != nullptr && *text != '\0'; ++text) {
    if (!std::isspace(static_cast<unsigned char>(*text)) && *text != ';') return false;
  }
  return true;
}

nlohmann::json ColumnValue(sqlite3_stmt* stmt, int column) {
  switch (sqlite3_column_type(stmt, column)) {
    case SQLITE_INTEGER:
      return sqlite3_column_int64(stmt, column);
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt, column);
    case SQLITE_TEXT: {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
      return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
    }
    case SQLITE_BLOB: {
      static constexpr char kDigits[] = "0123456789abcdef";
      const auto* bytes = static_cast<const unsigned char*>(sqlite3_column_blob(stmt, column));
      const int size = sqlite3_column_bytes(stmt, column);
      std::string hex(2 * static_cast<std::size_t>(size) + 3, '\'');
      hex[0] = 'x';
      for (int i = 0; i < size; ++i) {
        hex[2 + 2 * i] = kDigits[bytes[i] >> 4];
        hex[3 + 2 * i] = kDigits[bytes[i] & 15];
      }
      return hex;
    }
    default:
      return nullptr;
  }
}

bool StartsWithKeyword(const std::string& sql, const std::string& keyword) {
  size_t start = 0;
  while (start < sql.size() && std::isspace(static_cast<unsigned char>(sql[start]))) ++start;
  if (sql.size() - start < keyword.size()) return false;
  for (size_t i = 0; i < keyword.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(sql[start + i])) != keyword[i]) return false;
  }
  size_t end = start + keyword.size();
  return end == sql.size() || !std::isalnum(static_cast<unsigned char>(sql[end]));
}

// What a user's statement may do beyond reading tables. The authorizer runs while the
// statement is prepared, before any pragma's side effect (some pragmas act during
// sqlite3_prepare_v2, and hard_heap_limit or temp_store_directory change the whole
// process, the coordinator's own store included).
struct Authorization {
  std::string denied;  // why the statement was refused; "" = allowed so far
};

std::string Lower(const char* s) {
  std::string out = s != nullptr ? s : "";
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int Authorize(void* context, int action, const char* arg1, const char* arg2, const char*, const char*) {
  auto* auth = static_cast<Authorization*>(context);
  // Pragmas that only describe the schema or the file; the ones in kTakesAName accept a
  // table or index name as their argument, the others none (an argument sets a value).
  static const std::set<std::string> kDescribe = {
      "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
      "foreign_key_list", "collation_list", "database_list", "function_list", "module_list",
      "pragma_list", "compile_options", "user_version", "schema_version", "application_id",
      "page_count", "page_size", "freelist_count", "encoding", "journal_mode", "synchronous",
      "auto_vacuum", "data_version", "integrity_check", "quick_check", "foreign_key_check"};
  static const std::set<std::string> kTakesAName = {"table_info", "table_xinfo", "table_list", "index_list",
                                                    "index_info", "index_xinfo", "foreign_key_list",
                                                    "integrity_check", "quick_check", "foreign_key_check"};
  static const std::set<std::string> kDeniedFunctions = {"fts3_tokenizer", "load_extension", "readfile",
                                                         "writefile", "edit", "sqlite_offset"};
  if (action == SQLITE_PRAGMA) {
    const std::string name = Lower(arg1);
    if (kDescribe.count(name) && (arg2 == nullptr || kTakesAName.count(name))) return SQLITE_OK;
    auth->denied = "PRAGMA " + name + (arg2 != nullptr ? " = " + std::string(arg2) : std::string()) +
                   " is not allowed: bakeoff query is read-only and may not change connection or process "
                   "settings (pragmas that describe the schema, such as table_info, are allowed)";
    return SQLITE_DENY;
  }
  if (action == SQLITE_FUNCTION && kDeniedFunctions.count(Lower(arg2))) {
    auth->denied = "function " + Lower(arg2) + "() is not allowed in bakeoff query (it reaches outside the "
                   "database or the process's safety)";
    return SQLITE_DENY;
  }
  if (action == SQLITE_ATTACH || action == SQLITE_DETACH) {
    auth->denied = "ATTACH and DETACH are not allowed: bakeoff query reads the results database only";
    return SQLITE_DENY;
  }
  return SQLITE_OK;
}

// Bytes a string takes in the JSON answer, quotes included: what JSON escapes counts as
// escaped (a control character 6, "\n" or a quote 2), and a byte outside ASCII 3 (the
// most it can become: invalid UTF-8 is replaced by U+FFFD).
std::size_t EncodedStringBytes(const unsigned char* text, std::size_t length) {
  std::size_t bytes = 2;
  for (std::size_t i = 0; i < length; ++i) {
    const unsigned char c = text[i];
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
      bytes += 2;
    } else if (c < 0x20) {
      bytes += 6;
    } else if (c >= 0x80) {
      bytes += 3;
    } else {
      bytes += 1;
    }
  }
  return bytes;
}

// Bytes column `column` of the current row adds to the encoded answer, known before the
// value is copied: text as JSON escapes it, a blob by its hex form ("x'..'"), a number
// as its longest form, each with the layout around a value (kValueLayoutBytes).
std::size_t ValueBytes(sqlite3_stmt* stmt, int column) {
  // Indentation, comma and newline around each value of the coordinator's answer.
  constexpr std::size_t kValueLayoutBytes = 8;
  switch (sqlite3_column_type(stmt, column)) {
    case SQLITE_TEXT: {
      const unsigned char* text = sqlite3_column_text(stmt, column);
      const auto length = static_cast<std::size_t>(sqlite3_column_bytes(stmt, column));
      return kValueLayoutBytes + (text == nullptr ? 2 : EncodedStringBytes(text, length));
    }
    case SQLITE_BLOB:
      return kValueLayoutBytes + 2 * static_cast<std::size_t>(sqlite3_column_bytes(stmt, column)) + 5;
    case SQLITE_NULL:
      return kValueLayoutBytes + 4;
    default:
      return kValueLayoutBytes + 24;  // "-1.2345678901234567e+308"
  }
}

// The layout around one row of the answer (its brackets, indentation and comma).
constexpr std::size_t kRowLayoutBytes = 16;

std::string Abbreviate(const std::string& sql) {
  std::string shown = sql.substr(0, 60);
  for (char& c : shown) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return sql.size() > 60 ? shown + "..." : shown;
}

// The errors a query ends with, each naming the query (abbreviated) and what to do.
struct QueryFailures {
  const std::string& sql;
  const std::string& db_path;
  const QueryLimits& limits;
  std::size_t value_cap;

  Status Memory() const {
    return Status::ResourceExhausted("query \"" + Abbreviate(sql) + "\" needs more than " +
                                     std::to_string(kMaxQueryMemoryBytes >> 20) +
                                     " MiB of memory in the database engine; select fewer or smaller columns");
  }
  Status Timeout() const {
    return Status::Timeout("query \"" + Abbreviate(sql) + "\" on " + db_path + " ran past its limit of " +
                           std::to_string(limits.timeout.count()) + " ms; narrow it (WHERE, LIMIT) or raise the limit");
  }
  // A step that ended with `rc`, neither a row nor done.
  Status Step(int rc, const Deadline& deadline, SqliteConnection& db) const {
    if (deadline.out_of_memory) return Memory();
    if (deadline.passed || (rc & 0xff) == SQLITE_INTERRUPT) return Timeout();
    if ((rc & 0xff) == SQLITE_READONLY) {
      return Status::InvalidArgument("query \"" + Abbreviate(sql) +
                                     "\" tried to modify the database; bakeoff query is read-only");
    }
    if ((rc & 0xff) == SQLITE_TOOBIG) {
      return Status::ResourceExhausted("query \"" + Abbreviate(sql) + "\" builds a value over " +
                                       std::to_string(value_cap) + " bytes, the most one query may build");
    }
    return db.StatusFor(rc, "running query \"" + Abbreviate(sql) + "\"");
  }
};

// The SQL may come from a remote user (a coordinator route): a second guard besides the
// read-only open (query_only: no write even through an ATTACHed database or a pragma),
// no other files (ATTACH), no schema tricks, no value larger than `value_cap`.
Status ConfineQueryConnection(SqliteConnection& db, const QueryLimits& limits, std::size_t value_cap) {
  BAKEOFF_RETURN_IF_ERROR(db.Exec("PRAGMA query_only = ON"));
  sqlite3_limit(db.handle(), SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(db.handle(), SQLITE_LIMIT_LENGTH, static_cast<int>(value_cap));
  sqlite3_limit(db.handle(), SQLITE_LIMIT_COLUMN, kMaxColumns);
  sqlite3_db_config(db.handle(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_busy_timeout(db.handle(), static_cast<int>(limits.timeout.count()));
  return Status::Ok();
}

using StatementPtr = std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>;

// `sql` prepared: exactly one statement, and one that reads.
Result<StatementPtr> PrepareOneReadingStatement(SqliteConnection& db, const std::string& sql,
                                                const Deadline& deadline, const Authorization& auth,
                                                const QueryFailures& fail) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), static_cast<int>(sql.size()), &raw, &tail);
  StatementPtr stmt(raw, &sqlite3_finalize);
  if (rc != SQLITE_OK) {
    if (deadline.out_of_memory) return fail.Memory();
    if (deadline.passed) return fail.Timeout();
    if (!auth.denied.empty()) return Status::InvalidArgument(auth.denied);
    return Status::InvalidArgument("query \"" + Abbreviate(sql) + "\" is not valid SQL: " +
                                   sqlite3_errmsg(db.handle()));
  }
  if (stmt == nullptr) {
    return Status::InvalidArgument("the query is empty; give one SQL statement, e.g. \"SELECT * FROM sweeps\"");
  }
  if (!OnlyWhitespaceOrSemicolons(tail)) {
    return Status::InvalidArgument("the query holds more than one statement; give one statement at a time");
  }
  // SQLite calls every PRAGMA possibly-writing; the read-only connection stops the
  // ones that do write (they fail at the first step), so reading pragmas still work.
  if (!sqlite3_stmt_readonly(stmt.get()) && !StartsWithKeyword(sql, "pragma")) {
    return Status::InvalidArgument("query \"" + Abbreviate(sql) +
                                   "\" would modify the database; bakeoff query is read-only "
                                   "(use SELECT, WITH or read-only PRAGMAs)");
  }
  return stmt;
}

// Steps `stmt` into *result until done or a bound: rows (limits.max_rows) or encoded
// bytes (limits.max_result_bytes), either of which marks it truncated.
Status ReadQueryRows(sqlite3_stmt* stmt, SqliteConnection& db, const QueryLimits& limits, const Deadline& deadline,
                     const QueryFailures& fail, QueryResult* result) {
  std::size_t result_bytes = 0;
  const int columns = sqlite3_column_count(stmt);
  for (int i = 0; i < columns; ++i) {
    const char* name = sqlite3_column_name(stmt, i);
    result->columns.push_back(name != nullptr ? name : "");
    result_bytes += 8 + EncodedStringBytes(reinterpret_cast<const unsigned char*>(result->columns.back().data()),
                                           result->columns.back().size());
  }
  while (true) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return fail.Step(rc, deadline, db);
    if (static_cast<int64_t>(result->rows.size()) >= limits.max_rows) {
      result->truncated = true;
      return Status::Ok();
    }
    // A few bytes of SQL can ask for gigabytes (zeroblob, printf padding): the row's
    // size is known from SQLite before any value is copied, and the result stops at its
    // byte bound like at its row bound.
    std::size_t row_bytes = kRowLayoutBytes;
    for (int i = 0; i < columns; ++i) row_bytes += ValueBytes(stmt, i);
    if (result_bytes + row_bytes > limits.max_result_bytes) {
      result->truncated = true;
      return Status::Ok();
    }
    std::vector<nlohmann::json> row;
    row.reserve(static_cast<size_t>(columns));
    for (int i = 0; i < columns; ++i) row.push_back(ColumnValue(stmt, i));
    result_bytes += row_bytes;
    result->rows.push_back(std::move(row));
    // Copying values runs outside SQLite's progress handler: the deadline holds here too.
    if (Clock::now() >= deadline.at) return fail.Timeout();
  }
}

}  // namespace

Result<QueryResult> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                     const QueryLimits& limits) {
  Result<std::unique_ptr<SqliteConnection>> opened =
      SqliteConnection::OpenReadOnly(db_path, "pass --db FILE with the results of a sweep");
  if (!opened.ok()) return opened.status();
  SqliteConnection& db = **opened;
  const auto value_cap = std::min<std::size_t>(kMaxValueBytes, std::max<std::size_t>(1, limits.max_result_bytes));
  BAKEOFF_RETURN_IF_ERROR(ConfineQueryConnection(db, limits, value_cap));
  Authorization auth;
  sqlite3_set_authorizer(db.handle(), &Authorize, &auth);
  Deadline deadline{Clock::now() + limits.timeout, sqlite3_memory_used() + kMaxQueryMemoryBytes};
  // Every 10 instructions: one instruction can allocate a whole value (16 MiB).
  sqlite3_progress_handler(db.handle(), 10, &CheckDeadline, &deadline);
  const QueryFailures fail{sql, db_path, limits, value_cap};
  auto stmt = PrepareOneReadingStatement(db, sql, deadline, auth, fail);
  if (!stmt.ok()) return stmt.status();
  QueryResult result;
  BAKEOFF_RETURN_IF_ERROR(ReadQueryRows(stmt->get(), db, limits, deadline, fail, &result));
  return result;
}

}  // namespace bakeoff::metrics
