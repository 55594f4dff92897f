// `bakeoff query SQL [--db FILE | --coordinator URL] [--format table|json|csv]
// [--output FILE] [--max-rows N] [--timeout SECONDS]`: runs one read-only SQL statement
// against a results database (docs/schema.md lists the tables) and prints the rows.
// With --db the file is opened here; with --coordinator the coordinator runs it
// (POST /api/v1/query) on its own database. Either way the database is opened
// read-only and the query is bounded in rows and time (RunReadOnlyQuery), so it is safe
// against a database a coordinator is writing. A statement that would write is refused
// with exit code 2.
#include <chrono>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/coordinator_client.h"
#include "cli/result_source.h"
#include "metrics/report/report_renderer.h"
#include "metrics/store/read_only_query.h"

namespace bakeoff::cli {
namespace {

struct QueryOptions {
  std::string sql;
  std::string db;           // PickResultSource: --coordinator, --db, $BAKEOFF_COORDINATOR,
  std::string coordinator;  // ./results.db, the default coordinator
  std::string token_file;
  std::string tls_ca;
  std::string format = "table";
  std::string output;
  int64_t max_rows = 10000;
  double timeout_s = 30;
};

// Longest cell shown in a table before it is cut (JSON and CSV are never cut).
constexpr size_t kMaxTableCell = 60;

std::string CellText(const nlohmann::json& value) {
  if (value.is_null()) return "NULL";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::string TableCell(const nlohmann::json& value) {
  std::string text = CellText(value);
  std::string flat;
  for (char c : text) {
    if (c == '\n') {
      flat += "\\n";
    } else if (c == '\t' || c == '\r') {
      flat += ' ';
    } else {
      flat += c;
    }
  }
  if (flat.size() > kMaxTableCell) flat = flat.substr(0, kMaxTableCell - 3) + "...";
  return flat;
}

std::string Table(const metrics::QueryResult& result) {
  std::vector<size_t> widths;
  for (const std::string& column : result.columns) widths.push_back(column.size());
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : result.rows) {
    std::vector<std::string> line;
    for (size_t i = 0; i < row.size(); ++i) {
      line.push_back(TableCell(row[i]));
      widths[i] = std::max(widths[i], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  auto numeric = [&](size_t column) {
    for (const auto& row : result.rows) {
      if (!row[column].is_number() && !row[column].is_null()) return false;
    }
    return true;
  };
  std::ostringstream out;
  auto emit = [&](const std::vector<std::string>& line, bool header) {
    for (size_t i = 0; i < line.size(); ++i) {
      std::string pad(widths[i] - line[i].size(), ' ');
      bool right = !header && numeric(i);
      out << (i == 0 ? "" : "  ") << (right ? pad + line[i] : line[i] + (i + 1 < line.size() ? pad : ""));
    }
    out << "\n";
  };
  emit(result.columns, true);
  std::vector<std::string> rule;
  for (size_t width : widths) rule.push_back(std::string(width, '-'));
  emit(rule, true);
  for (const auto& line : cells) emit(line, false);
  out << "(" << result.rows.size() << (result.rows.size() == 1 ? " row" : " rows")
      << (result.truncated ? ", more not shown" : "") << ")\n";
  return out.str();
}

std::string Csv(const metrics::QueryResult& result) {
  std::ostringstream out;
  for (size_t i = 0; i < result.columns.size(); ++i) {
    out << (i == 0 ? "" : ",") << metrics::CsvField(result.columns[i]);
  }
  out << "\r\n";
  for (const auto& row : result.rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out << (i == 0 ? "" : ",") << (row[i].is_null() ? "" : metrics::CsvField(CellText(row[i])));
    }
    out << "\r\n";
  }
  return out.str();
}

// {"columns": [...], "rows": [[...], ...], "truncated": false}, one row a line.
std::string Json(const metrics::QueryResult& result) {
  auto dump = [](const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::ostringstream out;
  out << "{\"columns\": " << dump(result.columns) << ",\n \"rows\": [";
  for (size_t i = 0; i < result.rows.size(); ++i) {
    out << (i == 0 ? "\n  " : ",\n  ") << dump(result.rows[i]);
  }
  out << (result.rows.empty() ? "" : "\n ") << "],\n \"truncated\": "
      << (result.truncated ? "true" : "false") << "}\n";
  return out.str();
}

// The coordinator's answer {"columns", "rows", "truncated"} as a QueryResult.
Result<metrics::QueryResult> QueryCoordinator(const QueryOptions& options) {
  // The HTTP wait covers the server's own bound plus the transfer.
  auto client = ConnectCoordinator(options.coordinator, options.token_file, options.tls_ca,
                                   std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000) + 30000));
  if (!client.ok()) return client.status();
  nlohmann::json request = {{"sql", options.sql}, {"max_rows", options.max_rows}, {"timeout_s", options.timeout_s}};
  auto answer = client->PostJson("/api/v1/query", request.dump());
  if (!answer.ok()) return answer.status();
  metrics::QueryResult result;
  try {
    result.columns = answer->at("columns").get<std::vector<std::string>>();
    for (const auto& row : answer->at("rows")) result.rows.push_back(row.get<std::vector<nlohmann::json>>());
    result.truncated = answer->value("truncated", false);
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal("the coordinator's query answer has an unexpected shape: " + std::string(e.what()));
  }
  return result;
}

int RunQuery(QueryOptions options) {
  Result<metrics::QueryResult> result = Status::Internal("unreachable");
  const ResultSource source = PickResultSource(options.coordinator, options.db);
  if (source.why != "--coordinator" && source.why != "--db") {
    std::cerr << "bakeoff query: reading " << source.Describe() << "\n";
  }
  options.coordinator = source.coordinator;
  options.db = source.db;
  if (!options.coordinator.empty()) {
    result = QueryCoordinator(options);
  } else {
    metrics::QueryLimits limits;
    limits.max_rows = options.max_rows;
    limits.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
    result = metrics::RunReadOnlyQuery(options.db, options.sql, limits);
  }
  if (!result.ok()) {
    PrintFailure("query", result.status().message());
    // NotFound: the results database does not exist (unavailable); Timeout: the query ran
    // past its own time limit (it ran and failed), not an unreachable coordinator.
    switch (result.status().code()) {
      case Status::Code::kNotFound: return kExitUnavailable;
      case Status::Code::kTimeout: return kExitFailure;
      default: return ExitCodeFor(result.status());
    }
  }
  std::string text;
  if (options.format == "json") {
    text = Json(*result);
  } else if (options.format == "csv") {
    text = Csv(*result);
  } else {
    text = Table(*result);
  }
  if (result->truncated) {
    std::cerr << "bakeoff query: showing the first " << result->rows.size()
              << " rows; raise --max-rows or add LIMIT/WHERE to see the rest\n";
  }
  return WriteCommandOutput("query", options.output, text);
}

void SetupQuery(CLI::App& root, int* exit_code) {
  auto options = std::make_shared<QueryOptions>();
  CLI::App* cmd = root.add_subcommand(
      "query", "Run one read-only SQL statement against a results database (docs/schema.md)");
  cmd->add_option("sql", options->sql, "The SQL statement, e.g. \"SELECT * FROM sweeps\"")
      ->required();
  cmd->add_option("--db", options->db, "Results database file (without it or --coordinator: $BAKEOFF_COORDINATOR, else ./results.db, else the default coordinator)");
  cmd->add_option("--coordinator", options->coordinator,
                  "Ask this running coordinator (http://HOST:PORT) to run the query on its database");
  cmd->add_option("--token-file", options->token_file, "File holding the API token (else $BAKEOFF_TOKEN)");
  cmd->add_option("--tls-ca", options->tls_ca, kTlsCaHelp);
  cmd->add_option("--format", options->format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  cmd->add_option("--output", options->output, "Write to this file instead of stdout");
  cmd->add_option("--max-rows", options->max_rows, "Most rows returned (default 10000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", options->timeout_s, "Seconds before the query is stopped (default 30)")
      ->check(CLI::PositiveNumber);
  cmd->callback([options, exit_code] { *exit_code = RunQuery(*options); });
}

}  // namespace

BAKEOFF_REGISTER_COMMAND("query", SetupQuery);

}  // namespace bakeoff::cli
