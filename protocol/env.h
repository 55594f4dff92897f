// Env: what a component gets from the process around it, in one object, in the spirit of
// LevelDB's Env and EnvWrapper: time (the Clock), log lines, and the SQLite VFS the
// results database is opened through. A component takes a `const Env&` (default
// Env::Default(): the system clock, the process's log sinks, SQLite's own VFS) and never
// reads a raw clock, a global sink or a file hook of its own; a test passes an
// EnvWrapper that overrides what it needs (a FakeClock, a log it reads back, a VFS that
// fails writes) and forwards the rest.
//
// Logging through an Env: `logging::Logger log_{env, "worker"}` (protocol/log.h) stamps
// each line with the Env's clock and hands it to Env::Log.
//
// Thread-safety: Env::Default() is safe from any thread. A wrapper is as thread-safe as
// its overrides (tests/protocol/test_env.h's TestEnv locks its log).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "protocol/clock.h"
#include "protocol/log.h"

namespace bakeoff {

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // The one source of time (protocol/clock.h): steady Now() for deadlines, WallNow() for
  // timestamps that are stored or shown.
  virtual const Clock& clock() const;
  // Writes one log line, stamped `at` (the Env's wall clock when it came through a
  // Logger). Default: the process's sinks (logging::WriteAt), which drop lines below
  // the configured level.
  virtual void Log(std::chrono::system_clock::time_point at, logging::Level level, std::string_view component,
                   std::string_view message, logging::Fields fields) const;
  // The name of a registered SQLite VFS that the results database opens its files
  // through (metrics/store); empty: SQLite's default, the real files.
  virtual std::string StoreVfs() const;

  // The process's environment: the system clock, the log sinks, SQLite's default VFS.
  static const Env& Default();
};

// Forwards every call to `target`; a subclass overrides only what it changes.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(const Env& target) : target_(target) {}
  const Env& target() const { return target_; }

  const Clock& clock() const override { return target_.clock(); }
  void Log(std::chrono::system_clock::time_point at, logging::Level level, std::string_view component,
           std::string_view message, logging::Fields fields) const override {
    target_.Log(at, level, component, message, fields);
  }
  std::string StoreVfs() const override { return target_.StoreVfs(); }

 private:
  const Env& target_;
};

}  // namespace bakeoff
