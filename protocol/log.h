// The one logging facility of Bakeoff's processes (coordinator, worker, CLI): a line per
// event, `2026-12-04T18:10:01.123Z INFO  coordinator: assigned trial=3 worker=w1`, with
// a UTC timestamp, a level, the component and key=value fields, written to stderr, to a
// file, or both (docs/cli.md, "Logs"). Text that came from outside (names, reasons,
// messages of peers) is escaped, so that no value can forge a second line or a
// terminal control sequence.
//
// Thread-safety: every function may be called from any thread; a line is written
// whole, under one mutex, and flushed. Configure the sinks once, at start, in main (or
// `bakeoff local`), before other threads log.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "protocol/status.h"

namespace bakeoff {
class Env;  // protocol/env.h
}

namespace bakeoff::logging {

enum class Level { kDebug = 0, kInfo, kWarning, kError };

// One key=value field, typed: text, an integer, a real or a boolean. In the text form a
// value is quoted when it holds a space, a quote or '='; in the JSON form a number stays
// a number. `{"trial", 3}`, `{"worker", name}`, `{"step_s", 0.25}`.
struct Field {
  using Value = std::variant<std::string, std::int64_t, double, bool>;
  Field(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  Field(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  Field(std::string_view k, const char* v) : key(k), value(std::string(v)) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Field(std::string_view k, T v) : key(k), value(static_cast<std::int64_t>(v)) {}
  Field(std::string_view k, double v) : key(k), value(v) {}
  Field(std::string_view k, bool v) : key(k), value(v) {}

  std::string_view key;
  Value value;
};
using Fields = std::initializer_list<Field>;

// How a line is written: kText `2026-12-04T18:10:01.123Z INFO  coordinator: assigned
// trial=3`; kJson one object per line, `{"time":"2026-12-04T18:10:01.123Z","level":
// "info","component":"coordinator","msg":"assigned","trial":3}` (a field named like one
// of the first four keys is written with a leading '_'). `--log-format json`.
enum class Format { kText, kJson };

// The whole line, without its newline: pure, for tests and for the writer.
std::string FormatLine(std::chrono::system_clock::time_point at, Level level, std::string_view component,
                       std::string_view message, Fields fields = {}, Format format = Format::kText);

// "text" or "json"; nullopt for anything else.
std::optional<Format> ParseFormat(std::string_view name);

// Writes one line, stamped `at`, to the configured sinks when `level` is at or above the
// minimum. Env::Default()'s Log; a component logs through a Logger instead.
void WriteAt(std::chrono::system_clock::time_point at, Level level, std::string_view component,
             std::string_view message, Fields fields = {});

// A component's logger. A component that takes an Env (protocol/env.h) holds
// `logging::Logger log_{env, "coordinator"}`: its lines carry the Env's time and go to
// Env::Log, so that a test reads them from its Env. A file of free functions without an
// Env uses `constexpr logging::Logger kLog("http")`, which logs through Env::Default().
// Then `log_.Info("assigned", {{"trial", 3}})`.
class Logger {
 public:
  explicit constexpr Logger(std::string_view component) : component_(component) {}
  constexpr Logger(const Env& env, std::string_view component) : env_(&env), component_(component) {}
  void Debug(std::string_view message, Fields fields = {}) const { Emit(Level::kDebug, message, fields); }
  void Info(std::string_view message, Fields fields = {}) const { Emit(Level::kInfo, message, fields); }
  void Warning(std::string_view message, Fields fields = {}) const { Emit(Level::kWarning, message, fields); }
  void Error(std::string_view message, Fields fields = {}) const { Emit(Level::kError, message, fields); }
  // The Env the lines go through: the one given, else Env::Default().
  const Env& env() const;

 private:
  void Emit(Level level, std::string_view message, Fields fields) const;

  const Env* env_ = nullptr;
  std::string_view component_;
};

// Sinks. By default every line at kInfo and above goes to stderr and nowhere else.
// OpenFile appends to `path` (created 0600: logs name workers and trials) and keeps it
// open until CloseFile or the next OpenFile. It refuses a symbolic link and a file that
// another user owns (protocol/own_file.h), with kInvalidArgument naming the path.
Status OpenFile(const std::string& path);
void CloseFile();
void SetStderr(bool enabled);
void SetMinLevel(Level level);
void SetFormat(Format format);

}  // namespace bakeoff::logging
