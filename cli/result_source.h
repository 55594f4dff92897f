// Where `status`, `report` and `query` read results: one rule for the three (docs/cli.md,
// "Which results a reading command reads"), said on stderr so that nobody mistakes an
// old ./results.db for the cluster's coordinator.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "cli/coordinator_client.h"

namespace bakeoff::cli {

struct ResultSource {
  std::string coordinator;  // non-empty: ask this coordinator's API
  std::string db;           // else: read this results database
  std::string why;          // which flag, variable or default chose it
  // "coordinator URL (why)" or "results database FILE (why)".
  std::string Describe() const {
    return (coordinator.empty() ? "results database " + db : "coordinator " + coordinator) + " (" + why + ")";
  }
};

// --coordinator URL wins; then --db FILE; then $BAKEOFF_COORDINATOR; then ./results.db
// when it exists; else the default coordinator, http://127.0.0.1:8080.
inline ResultSource PickResultSource(const std::string& coordinator_flag, const std::string& db_flag) {
  if (!coordinator_flag.empty()) return {coordinator_flag, "", "--coordinator"};
  if (!db_flag.empty()) return {"", db_flag, "--db"};
  if (const char* env = std::getenv("BAKEOFF_COORDINATOR"); env && *env) return {env, "", "$BAKEOFF_COORDINATOR"};
  struct stat st;
  if (::stat("results.db", &st) == 0) {
    return {"", "results.db", "found in this directory; --coordinator or $BAKEOFF_COORDINATOR asks a coordinator"};
  }
  return {DefaultCoordinatorUrl(), "", "the default: no --coordinator, --db, $BAKEOFF_COORDINATOR or ./results.db"};
}

}  // namespace bakeoff::cli
