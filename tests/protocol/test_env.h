// TestEnv: the Env a test gives a component (protocol/env.h). Its clock is the one the
// test holds (a FakeClock it advances); the log lines written through it are kept, in
// their text form, for the test to read (and forwarded to the wrapped Env, so that a
// failing test's output still shows them); its StoreVfs() is what the test sets (a VFS
// that fails writes).
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/env.h"
#include "protocol/log.h"

namespace bakeoff {

class TestEnv : public EnvWrapper {
 public:
  explicit TestEnv(const Clock& clock, const Env& target = Env::Default()) : EnvWrapper(target), clock_(clock) {}

  const Clock& clock() const override { return clock_; }
  void Log(std::chrono::system_clock::time_point at, logging::Level level, std::string_view component,
           std::string_view message, logging::Fields fields) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(logging::FormatLine(at, level, component, message, fields));
    }
    EnvWrapper::Log(at, level, component, message, fields);
  }
  std::string StoreVfs() const override { return store_vfs_; }
  void set_store_vfs(std::string name) { store_vfs_ = std::move(name); }

  // Every line written through this Env so far, oldest first.
  std::vector<std::string> Lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  // The lines that contain `text`.
  std::vector<std::string> LinesWith(std::string_view text) const {
    std::vector<std::string> found;
    for (std::string& line : Lines()) {
      if (line.find(text) != std::string::npos) found.push_back(std::move(line));
    }
    return found;
  }

 private:
  const Clock& clock_;
  std::string store_vfs_;
  mutable std::mutex mu_;
  mutable std::vector<std::string> lines_;
};

}  // namespace bakeoff
