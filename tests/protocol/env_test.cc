// Env (protocol/env.h): the default is the process's clock, sinks and SQLite VFS; a
// wrapper changes only what it overrides; a Logger built on an Env writes through it on
// its clock, and the rate-limited form reads that clock too.
#include "protocol/env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/log_limiter.h"
#include "tests/protocol/test_env.h"

namespace bakeoff {
namespace {

using namespace std::chrono_literals;

TEST(EnvTest, TheDefaultIsTheSystemClockAndSqlitesOwnFiles) {
  const Env& env = Env::Default();
  EXPECT_EQ(&env, &Env::Default()) << "one per process";
  EXPECT_EQ(&env.clock(), &SystemClock::Instance());
  EXPECT_EQ(env.StoreVfs(), "");
  EXPECT_EQ(&logging::Logger("x").env(), &env) << "a Logger without an Env logs through the default";
}

TEST(EnvTest, ALoggerOnAnEnvWritesThroughItStampedWithItsClock) {
  FakeClock clock;
  TestEnv env(clock);
  const logging::Logger log(env, "worker");
  log.Info("registered", {{"worker", "w1"}, {"slots", 2}});
  clock.Advance(1500ms);
  log.Warning("cannot reach the coordinator; retrying", {{"error", "refused"}});
  EXPECT_EQ(env.Lines(), (std::vector<std::string>{
                             "2026-01-01T00:00:00.000Z INFO  worker: registered worker=w1 slots=2",
                             "2026-01-01T00:00:01.500Z WARN  worker: cannot reach the coordinator; retrying "
                             "error=refused",
                         }));
}

TEST(EnvTest, AWrapperForwardsWhatItDoesNotOverride) {
  FakeClock inner_clock;
  TestEnv inner(inner_clock);
  inner.set_store_vfs("faulty");
  // Overrides the clock only: lines and the VFS are still the inner Env's.
  struct LaterClock : EnvWrapper {
    explicit LaterClock(const Env& target) : EnvWrapper(target) { clock_.Advance(3600s); }
    const Clock& clock() const override { return clock_; }
    FakeClock clock_;
  } outer(inner);
  EXPECT_EQ(outer.StoreVfs(), "faulty");
  EXPECT_EQ(&outer.target(), &inner);
  logging::Logger(outer, "coordinator").Info("sweep ended", {{"sweep", 3}});
  ASSERT_EQ(inner.Lines().size(), 1u);
  EXPECT_EQ(inner.Lines()[0], "2026-01-01T01:00:00.000Z INFO  coordinator: sweep ended sweep=3")
      << "the outer clock stamps the line; the inner Env writes it";
}

// The rate-limited form (LogLimiter::Warning) times its interval on the Logger's Env:
// stepping a FakeClock steps the limiter, with no sleep.
TEST(EnvTest, TheRateLimitedFormReadsTheLoggersClock) {
  FakeClock clock;
  TestEnv env(clock);
  const logging::Logger log(env, "coordinator");
  logging::LogLimiter limiter(10s);
  for (int i = 0; i < 5; ++i) limiter.Warning(log, "HTTPS connection: TLS handshake failed", "10.0.0.9", "eof");
  clock.Advance(9999ms);
  limiter.Warning(log, "HTTPS connection: TLS handshake failed", "10.0.0.9", "eof");
  EXPECT_EQ(env.Lines().size(), 1u) << "one line per 10 s";
  clock.Advance(1ms);
  limiter.Warning(log, "HTTPS connection: TLS handshake failed", "10.0.0.9", "eof");
  ASSERT_EQ(env.Lines().size(), 2u);
  EXPECT_EQ(env.Lines()[1],
            "2026-01-01T00:00:10.000Z WARN  coordinator: HTTPS connection: TLS handshake failed peer=10.0.0.9 "
            "error=eof left_out=5");
}

}  // namespace
}  // namespace bakeoff
