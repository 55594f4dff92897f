#include "protocol/env.h"

namespace bakeoff {

const Clock& Env::clock() const { return SystemClock::Instance(); }

void Env::Log(std::chrono::system_clock::time_point at, logging::Level level, std::string_view component,
              std::string_view message, logging::Fields fields) const {
  logging::WriteAt(at, level, component, message, fields);
}

std::string Env::StoreVfs() const { return {}; }

const Env& Env::Default() {
  static const Env* env = new Env();  // never destroyed: threads may log during exit
  return *env;
}

}  // namespace bakeoff
