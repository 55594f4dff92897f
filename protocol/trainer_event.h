// The trainer's event stream (docs/trainer.md) as types: one line of a trainer's stdout,
// or one event of an events frame, is parsed here once, and the worker's metrics, the
// coordinator and the results store read the typed fields instead of the JSON.
//
// A line is an event when it is a JSON object whose "event" is a string. The fields of
// the documented kinds are checked for type, so a malformed or hostile trainer cannot
// put a string where the store and the report expect a number:
//   step:    "step" an integer >= 0; "step_s" a finite number >= 0; "tokens",
//            "peak_mem_bytes", "rss_bytes", "comm_bytes" integers >= 0 (at most
//            INT64_MAX) when present; "turn" (a lockstep trial's turn number,
//            docs/lockstep.md) an integer >= 0 when present; "loss", "lr", "grad_norm", "comm_s",
//            "device_allocated_bytes", "device_reserved_peak_bytes" numbers when present;
//            "phase" "warmup" or "measure" when present (a step of another phase
//            could not be stored: step_metrics.phase);
//   summary: every documented figure a number (or null) when present; "applied" an object;
//   error:   "kind" a string, "message" a string when present;
//   started: (the worker's own) "pid" an integer, "host" and "address" strings when present.
// Other kinds ("ready", and those of other executors) pass with their body only. A field
// that is absent or null reads as nullopt; so does a non-finite number (an in-process
// NaN; JSON text cannot hold one). Anything else is kInvalidArgument naming the kind and
// the field; the worker counts and drops such lines (a trainer may also print logs to
// stdout). Lines over `max_line_bytes` are refused unparsed.
//
// Every event keeps its whole object in `body`, the fields no type names included: that
// is what the store keeps (events.data_json, trial_summaries.summary_json) and what the
// worker forwards, byte for byte as before.
// Thread-safety: pure functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::protocol {

inline constexpr std::size_t kMaxTrainerLineBytes = 1u << 20;

// The stored figures of one step (step_metrics, docs/schema.md): what a step block of an
// events frame carries per step (docs/protocol.md, "Step blocks").
struct StepRow {
  std::int64_t step = 0;
  double step_s = 0;
  std::optional<std::int64_t> tokens;
  std::optional<double> loss;
  std::optional<double> lr;
  std::optional<std::int64_t> peak_mem_bytes;
  std::optional<std::int64_t> rss_bytes;
  std::optional<double> comm_s;
  std::optional<std::int64_t> comm_bytes;
  // The lockstep group's turn number of a measured step (docs/lockstep.md, "The turn
  // channel"): every rank of a side shares it; absent outside lockstep, and on a side
  // that did not take turns.
  std::optional<std::int64_t> turn;
};
// The columns in their stored order (step_blocks.rows_json). A column is only ever
// appended: a stored row is written without its trailing nulls, so a row stored before
// a column existed reads that column as absent.
inline constexpr const char* kStepRowColumns[] = {"step",   "step_s",         "tokens",    "loss",
                                                  "lr",     "peak_mem_bytes", "rss_bytes", "comm_s",
                                                  "comm_bytes", "turn"};
inline constexpr std::size_t kStepRowColumnCount = std::size(kStepRowColumns);

// `step`: one optimizer step of one rank.
struct StepEvent {
  // What is stored (finite step_s >= 0; tokens: global tokens of the optimizer step;
  // loss: the global mean loss).
  StepRow row;
  std::string phase = "measure";  // "warmup" or "measure"; "measure" when absent
  std::optional<double> grad_norm;
  // CUDA ranks only (live gauges on the worker; not stored).
  std::optional<double> device_allocated_bytes;
  std::optional<double> device_reserved_peak_bytes;
};

// The rows as columns (the wire form): an object with one array per column named as in
// kStepRowColumns, "step" and "step_s" always, another only when a row has a value
// (null where a row has none).
nlohmann::json StepRowsToColumns(const std::vector<StepRow>& rows);

// Reads the columns of `block` (as StepRowsToColumns writes them) into `rows`, with the
// checks of a step event's fields: "step" an array of integers >= 0 and "step_s" one of
// finite numbers >= 0, both of the same length; any other column absent (all null) or an
// array of that length of integers >= 0 (the counts) or numbers (a non-finite one reads
// as null), null allowed. InvalidArgument naming the column otherwise.
Status ReadStepColumns(const nlohmann::json& block, std::vector<StepRow>& rows);

// Appends `row` as JSON array text to `out`, without its trailing nulls: numbers in their
// shortest round-trip form, a double always with a '.' or an exponent (SQLite's JSON
// functions then read it as REAL).
void AppendStepRowJson(const StepRow& row, std::string& out);

// `summary`: a rank's figures for the attempt. The byte counts are read as integers: a
// fractional one is rounded to the nearest (as the store always did).
struct SummaryEvent {
  std::optional<double> startup_s;
  std::optional<double> first_step_s;
  std::optional<double> warmup_s;
  std::optional<double> step_s_median;
  std::optional<double> step_s_p10;
  std::optional<double> step_s_p90;
  std::optional<double> tokens_per_s;
  std::optional<double> flops_per_s;
  std::optional<double> mfu;
  std::optional<std::int64_t> peak_mem_bytes;
  std::optional<std::int64_t> peak_reserved_bytes;
  std::optional<std::int64_t> peak_rss_bytes;
  std::optional<std::int64_t> frozen_bytes;
  std::optional<std::int64_t> trainable_bytes;
  std::optional<std::int64_t> grad_bytes;
  std::optional<std::int64_t> optimizer_bytes;
  std::optional<double> comm_s_per_step;
  std::optional<std::int64_t> comm_bytes_per_step;
  std::optional<double> tokens_per_step;
  std::optional<nlohmann::json> applied;  // an object: what took effect (docs/trainer.md)
  // Where the rank ran (docs/trainer.md): set when an object; anything else is ignored,
  // never refused (it only describes).
  std::optional<nlohmann::json> environment;
};

// The summary's figures, written down once: the event's field (and SQL column) name, the
// SummaryEvent member, its unit, and whether trial_summaries has a column of it (the
// others are kept in summary_json). The event parser, the store's insert and the report
// read this table; a new figure is one row plus its use (and, when stored in a column,
// the migration that adds it: a test compares the table with the schema).
struct SummaryFigure {
  using Member = std::variant<std::optional<double> SummaryEvent::*, std::optional<std::int64_t> SummaryEvent::*>;
  const char* name;
  Member member;
  const char* unit;  // "s", "bytes", "tokens/s", "1" (a ratio), ...
  bool column;       // a column of trial_summaries
};
const std::vector<SummaryFigure>& SummaryFigures();

// `error`: why the rank is ending.
struct ErrorEvent {
  std::string kind;     // oom | unsupported | diverged | failed (as written)
  std::string message;  // empty when absent
};

// `started`: written by the worker, not a trainer, when a rank process starts.
struct StartedEvent {
  std::optional<std::int64_t> pid;
  std::string host;     // the worker's --host; empty when absent
  std::string address;  // where the rank binds its collectives; empty when absent
};

// `ready`, and kinds no type here names: the body is all there is.
struct UntypedEvent {};

struct TrainerEvent {
  std::string kind;     // the "event" field
  nlohmann::json body;  // the whole object, "event" and every unknown field included
  // When the event happened, in Unix seconds, if its "at" is a finite number (the
  // worker's started events carry it). Not checked: another type leaves it nullopt.
  std::optional<double> at;
  std::variant<UntypedEvent, StepEvent, SummaryEvent, ErrorEvent, StartedEvent> fields;

  // The typed fields when `kind` is that kind, else nullptr.
  const StepEvent* step() const { return std::get_if<StepEvent>(&fields); }
  const SummaryEvent* summary() const { return std::get_if<SummaryEvent>(&fields); }
  const ErrorEvent* error() const { return std::get_if<ErrorEvent>(&fields); }
  const StartedEvent* started() const { return std::get_if<StartedEvent>(&fields); }
};

// One line of a trainer's stdout.
Result<TrainerEvent> ParseTrainerEvent(std::string_view line, std::size_t max_line_bytes = kMaxTrainerLineBytes);

// An event already parsed as JSON: one of an events frame (the coordinator's side), or
// one the worker builds itself. Same checks as ParseTrainerEvent, less the text limits
// (the frame decoder applied its own).
Result<TrainerEvent> TrainerEventFromJson(nlohmann::json object);

// The figures of a summary object, with the checks above; its "event" field is not
// needed. For a summary handed over as JSON outside an event stream (the store's
// RecordSummary, tests, tools).
Result<SummaryEvent> ReadSummaryEvent(const nlohmann::json& object);

}  // namespace bakeoff::protocol
