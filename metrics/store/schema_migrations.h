// The results database's schema as an ordered list of migrations. Migration N takes a
// database at version N-1 to version N; each runs in its own transaction together
// with `PRAGMA user_version = N` and a row in the schema_migrations table, so a crash
// leaves the database at a whole version. Shipped migrations are never edited: a
// change is a new migration (docs/schema.md, "Migration policy").
// Thread-safety: none; call with exclusive use of the connection.
#pragma once

#include <string>
#include <vector>

#include "metrics/store/sqlite_connection.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// The version this build creates and understands.
inline constexpr int kLatestSchemaVersion = 8;

struct Migration {
  int version;              // the version the database has after it
  const char* description;  // one line, stored in schema_migrations
  const char* sql;          // one or more statements
};

// Every migration, in order (version 1, 2, ...).
const std::vector<Migration>& SchemaMigrations();

// PRAGMA user_version of the database (0 for an empty file).
Result<int> ReadSchemaVersion(SqliteConnection& db);

// Applies the migrations from the database's version up to target_version, each in
// one transaction, stamping applied_at_s. A database newer than target_version is left
// untouched and refused with kInvalidArgument (a newer Bakeoff wrote it).
// REQUIRES: 0 <= target_version <= kLatestSchemaVersion.
Status MigrateSchema(SqliteConnection& db, double applied_at_s,
                     int target_version = kLatestSchemaVersion);

}  // namespace bakeoff::metrics
