#include "protocol/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "protocol/own_file.h"

namespace bakeoff::logging {
namespace {

struct Sinks {
  std::mutex mu;
  FILE* file = nullptr;
  bool to_stderr = true;
  Level min_level = Level::kInfo;
};

Sinks& sinks() {
  static Sinks* s = new Sinks();  // never destroyed: threads may log during exit
  return *s;
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

}  // namespace

std::string FormatLine(std::chrono::system_clock::time_point at, Level level, std::string_view component,
                       std::string_view message, Fields fields) {
  const auto since_epoch = at.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  const long millis = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[64];  // room for any int the format could print: no truncation
  snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", utc.tm_year + 1900, utc.tm_mon + 1,
           utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
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
    AppendValue(line, f.value);
  }
  return line;
}

void Write(Level level, std::string_view component, std::string_view message, Fields fields) {
  Sinks& s = sinks();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (level < s.min_level || (!s.to_stderr && s.file == nullptr)) return;
  }
  std::string line = FormatLine(std::chrono::system_clock::now(), level, component, message, fields);
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

void SetMinLevel(Level level) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  s.min_level = level;
}

}  // namespace bakeoff::logging
