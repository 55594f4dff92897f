// RunReadOnlyQuery: runs one user-supplied SQL statement against a results database
// opened read-only (SQLITE_OPEN_READONLY and PRAGMA query_only), with a bound on the
// rows returned and on the time spent. This is what `bakeoff query` and any SQL route
// of the coordinator use, so a user's SQL can never modify or hang the store.
// Thread-safety: each call opens its own connection; safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::metrics {

struct QueryLimits {
  // Rows beyond this are not read; QueryResult::truncated says so.
  int64_t max_rows = 10000;
  // Wall-clock bound on preparing and stepping the statement; past it the query is
  // interrupted and fails with kTimeout.
  std::chrono::milliseconds timeout{10000};
  // Bytes of the answer as JSON encodes it (docs/security.md, "Limits"): a string as
  // escaped (a control character 6 bytes, a byte outside ASCII 3), a blob by its hex
  // form, a number 24, each value and row with its layout; the rows that would pass it
  // are not returned and QueryResult::truncated says so.
  std::size_t max_result_bytes = 16u << 20;
};

struct QueryResult {
  std::vector<std::string> columns;
  // Each value is null, an integer, a floating-point number or a string; a BLOB becomes
  // the string "x'<hex>'".
  std::vector<std::vector<nlohmann::json>> rows;
  bool truncated = false;  // more rows existed than max_rows or max_result_bytes allowed
};

// Errors: kNotFound when db_path does not exist; kInvalidArgument for a syntax error,
// more than one statement, a statement that would write (the message says the query is
// read-only), a pragma other than those describing the schema, or a function reaching
// outside the database (fts3_tokenizer, load_extension) or more than 100 result columns;
// kResourceExhausted for a value larger than limits.max_result_bytes (4 MiB at most) or
// a statement for which SQLite allocates over 256 MiB (checked where its program loops);
// kTimeout past limits.timeout (checked while values are copied too); kIoError when the
// file cannot be read.
Result<QueryResult> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                     const QueryLimits& limits = {});

}  // namespace bakeoff::metrics
