#include "experiments/trainer/event_writer.h"

#include <string>

#include "protocol/error_cause.h"

namespace bakeoff::trainer {

void EventWriter::Write(const std::string& name, nlohmann::json fields) {
  nlohmann::json line = {{"event", name}};
  line.update(fields);
  // Non-finite doubles become null in JSON; replace() keeps invalid UTF-8 from throwing.
  // One write() a line: ranks under torchrun share one stdout pipe, and a line that
  // reaches the pipe in two writes (libstdc++ writes a long string straight through,
  // then the newline at the flush) interleaves with another rank's line. A pipe keeps
  // writes of up to PIPE_BUF (4096 bytes) whole; a summary is about 2 KB.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  out_.flush();
}

int EventWriter::Error(const std::string& kind, const std::string& message) {
  if (log_ != nullptr) {
    *log_ << "bakeoff-trainer: error (" << kind << "): " << message << std::endl;
  }
  const std::string cause = protocol::ErrorCause(message);
  Write("error", {{"kind", kind}, {"message", cause.empty() ? message : cause}});
  return protocol::TrainerExitForErrorKind(kind);
}

}  // namespace bakeoff::trainer
