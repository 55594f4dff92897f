#include "protocol/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include <nlohmann/json.hpp>

#include "protocol/env.h"
#include "protocol/own_file.h"

namespace bakeoff::logging {
namespace {

struct Sinks {
  std::mutex mu;
  FILE* file = nullptr;
  bool to_stderr = true;
  Level min_level = Level::kInfo;
  Format format = Format::kText;
};

Sinks& sinks() {
  static Sinks* s = new Sinks();  // never destroyed: threads may log during exit
  return *s;
}

const char* JsonLevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarning: return "warn";
    case Level::kError: return "error";
  }
  return "?";
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO ";
    case Level::kWarning: return "WARN ";
    case Level::kError: return "ERROR";
  }
  return "?    ";
}

// Control characters (a newline above all) become escapes: one event, one line.
void AppendEscaped(std::string& out, std::string_view text) {
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
}

void AppendValue(std::string& out, std::string_view value) {
  const bool quote = value.empty() || value.find_first_of(" \"=") != std::string_view::npos;
  if (!quote) {
    AppendEscaped(out, value);
    return;
  }
  out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    AppendEscaped(out, std::string_view(&c, 1));
  }
  out += '"';
}

// A number as its shortest text that reads back the same ("0.25", "1e+30").
std::string NumberText(double v) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return ec == std::errc() ? std::string(buffer, end) : std::string("nan");
}

void AppendTextValue(std::string& out, const Field::Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    AppendValue(out, *text);
  } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out += NumberText(*d);
  } else {
    out += std::get<bool>(value) ? "true" : "false";
  }
}

nlohmann::json JsonValue(const Field::Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value)) return std::isfinite(*d) ? nlohmann::json(*d) : nlohmann::json(nullptr);
  return std::get<bool>(value);
}

std::string Timestamp(std::chrono::system_clock::time_point at) {
  const auto since_epoch = at.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  const long millis = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[64];  // room for any int the format could print: no truncation
  snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", utc.tm_year + 1900, utc.tm_mon + 1,
           utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  return stamp;
}

// One JSON object; text from outside is escaped by JSON itself (a newline is "\n"),
// invalid UTF-8 replaced.
std::string JsonLine(const std::string& stamp, Level level, std::string_view component, std::string_view message,
                     Fields fields) {
  nlohmann::ordered_json line;
  line["time"] = stamp;
  line["level"] = JsonLevelName(level);
  line["component"] = std::string(component);
  line["msg"] = std::string(message);
  for (const Field& f : fields) {
    std::string key(f.key);
    if (key == "time" || key == "level" || key == "component" || key == "msg") key = "_" + key;
    line[key] = JsonValue(f.value);
  }
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string FormatLine(std::chrono::system_clock::time_point at, Level level, std::string_view component,
                       std::string_view message, Fields fields, Format format) {
  const std::string stamp = Timestamp(at);
  if (format == Format::kJson) return JsonLine(stamp, level, component, message, fields);
  std::string line = stamp;
  line += ' ';
  line += LevelName(level);
  line += ' ';
  AppendEscaped(line, component);
  line += ": ";
  AppendEscaped(line, message);
  for (const Field& f : fields) {
    line += ' ';
    AppendEscaped(line, f.key);
    line += '=';
    AppendTextValue(line, f.value);
  }
  return line;
}

std::optional<Format> ParseFormat(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

void WriteAt(std::chrono::system_clock::time_point at, Level level, std::string_view component,
             std::string_view message, Fields fields) {
  Sinks& s = sinks();
  Format format = Format::kText;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (level < s.min_level || (!s.to_stderr && s.file == nullptr)) return;
    format = s.format;
  }
  std::string line = FormatLine(at, level, component, message, fields, format);
  line += '\n';
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.to_stderr) {
    fwrite(line.data(), 1, line.size(), stderr);
    fflush(stderr);
  }
  if (s.file != nullptr) {
    fwrite(line.data(), 1, line.size(), s.file);
    fflush(s.file);
  }
}

const Env& Logger::env() const { return env_ != nullptr ? *env_ : Env::Default(); }

void Logger::Emit(Level level, std::string_view message, Fields fields) const {
  const Env& e = env();
  e.Log(e.clock().WallNow(), level, component_, message, fields);
}

Status OpenFile(const std::string& path) {
  Result<int> opened = protocol::OpenOwnFile(path, O_WRONLY | O_APPEND, "log file");
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  FILE* file = fdopen(fd, "a");
  if (file == nullptr) {
    close(fd);
    return Status::IoError("log file '" + path + "': " + std::strerror(errno));
  }
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file != nullptr) fclose(s.file);
  s.file = file;
  return Status::Ok();
}

void CloseFile() {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file != nullptr) fclose(s.file);
  s.file = nullptr;
}

void SetStderr(bool enabled) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  s.to_stderr = enabled;
}

void SetFormat(Format format) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  s.format = format;
}

void SetMinLevel(Level level) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  s.min_level = level;
}

}  // namespace bakeoff::logging
