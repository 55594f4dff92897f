#include "coordinator/worker_registry.h"

#include <gtest/gtest.h>

#include "protocol/token.h"
#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

protocol::RegisterMessage Reg(const std::string& name, int slots = 2) { return testing::Registration(name, slots); }

// A worker's identity is its whole secret (and a held name's, the whole SHA-256 of it):
// a secret or a hash that differs from the issued one only past its first characters is
// refused. A comparison of the first 8 hex characters once passed every other test.
TEST(WorkerRegistryTest, AnIdentityIsComparedOnEveryCharacter) {
  FakeClock clock;
  const std::string issued = "0123456789abcdef0123456789abcdef";
  WorkerRegistry registry(clock, 1000ms, [&] { return issued; });
  registry.Register(Reg("a"));
  ASSERT_EQ(registry.Find("a")->secret, issued);
  auto impostor = Reg("a");
  for (const std::string& secret : {issued.substr(0, 8) + std::string(24, '0'), issued.substr(0, 31) + "0",
                                    issued.substr(0, 31), issued + "0"}) {
    impostor.worker_secret = secret;
    EXPECT_FALSE(registry.CheckIdentity(impostor).ok()) << "secret " << secret;
  }
  impostor.worker_secret = issued;
  EXPECT_TRUE(registry.CheckIdentity(impostor).ok());

  // A held name: the stored hash against the registration's, whole.
  const std::string real_hash = protocol::Sha256Hex(issued);
  std::string near_hash = real_hash;
  near_hash.back() = near_hash.back() == '0' ? '1' : '0';
  registry.HoldName("b", near_hash, clock.Now() + 60s);
  auto held = Reg("b");
  held.worker_secret = issued;
  EXPECT_FALSE(registry.CheckIdentity(held).ok()) << "the hash differs in its last character only";
  registry.HoldName("c", real_hash, clock.Now() + 60s);
  held.worker_name = "c";
  EXPECT_TRUE(registry.CheckIdentity(held).ok());
}

TEST(WorkerRegistryTest, WorkerExpiresOnlyAfterTheTtlWithoutHeartbeat) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a"));
  clock.Advance(900ms);
  EXPECT_TRUE(registry.Expire().empty());
  registry.Heartbeat("a");
  clock.Advance(900ms);
  EXPECT_TRUE(registry.Expire().empty());
  clock.Advance(200ms);
  EXPECT_EQ(registry.Expire(), std::vector<std::string>{"a"});
  EXPECT_EQ(registry.Find("a")->liveness, WorkerLiveness::kLost);
  EXPECT_TRUE(registry.Expire().empty()) << "a lost worker is reported once";
}

TEST(WorkerRegistryTest, ReRegistrationRevivesAndKeepsReservations) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a"));
  registry.Reserve("a", {1, 1}, 1, {});
  clock.Advance(2000ms);
  registry.Expire();
  registry.Register(Reg("a"));
  EXPECT_EQ(registry.Find("a")->liveness, WorkerLiveness::kAlive);
  EXPECT_EQ(registry.Find("a")->free_cpu_slots(), 1);
}

TEST(WorkerRegistryTest, ReserveAndReleaseTrackFreeCapacity) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  auto reg = Reg("g", 0);
  reg.resources.cuda_devices = {0, 1};
  registry.Register(reg);
  registry.Reserve("g", {1, 1}, 0, {1});
  EXPECT_EQ(registry.Find("g")->free_cuda_devices(), std::vector<int>{0});
  registry.Release("g", {1, 1}, 0, {1});
  EXPECT_EQ(registry.Find("g")->free_cuda_devices().size(), 2u);
  registry.Release("g", {1, 1}, 0, {1});  // twice: no effect
  EXPECT_EQ(registry.Find("g")->free_cuda_devices().size(), 2u);
}

TEST(WorkerRegistryTest, ReleasingOneAttemptsCpuSlotsFreesThemAndOnlyThem) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("c", 3));
  registry.Reserve("c", {1, 1}, 2, {});
  registry.Reserve("c", {2, 1}, 1, {});
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 0);
  registry.Release("c", {1, 1}, 2, {});
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 2);
  registry.Release("c", {1, 1}, 2, {});  // twice: no effect
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 2);
  registry.Release("c", {2, 1}, 1, {});
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 3);
}

TEST(WorkerRegistryTest, ALockstepGroupsUnitsAreHeldOnceUntilItsLastSideIsReleased) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("c", 4));
  registry.Reserve("c", {1, 1}, 2, {}, "g1");
  registry.Reserve("c", {2, 1}, 2, {}, "g1");  // the second side shares the first's slots
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 2);
  EXPECT_EQ(registry.Find("c")->attempts.size(), 2u);
  // The first side ends early: the survivor still runs on the slots.
  registry.Release("c", {1, 1}, 2, {});
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 2);
  registry.Release("c", {1, 1}, 2, {});  // twice: no effect
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 2);
  registry.Release("c", {2, 1}, 2, {});
  EXPECT_EQ(registry.Find("c")->free_cpu_slots(), 4);
  EXPECT_TRUE(registry.Find("c")->shared.empty());
}

TEST(WorkerRegistryTest, StorePortsRotateWithinTheAdvertisedRange) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms);
  registry.Register(Reg("a"));
  EXPECT_EQ(registry.NextStorePort("a"), 30000);
  EXPECT_EQ(registry.NextStorePort("a"), 30001);
  EXPECT_EQ(registry.NextStorePort("a"), 30002);
  EXPECT_EQ(registry.NextStorePort("a"), 30000);
}

// Slurm names a worker per job (NODE-JOBID): departed workers must not pile up.
TEST(WorkerRegistryTest, DepartedWorkersHoldingNothingAreForgottenAfterTheRetention) {
  FakeClock clock;
  WorkerRegistry registry(clock, 1000ms, {}, 10000ms);
  registry.Register(Reg("lost"));
  registry.Register(Reg("gone"));
  registry.Register(Reg("lost-holding"));
  registry.Reserve("lost-holding", {1, 1}, 1, {});
  registry.Register(Reg("alive"));
  registry.SetGone("gone");
  clock.Advance(2000ms);
  registry.Heartbeat("alive");
  EXPECT_EQ(registry.Expire(), (std::vector<std::string>{"lost", "lost-holding"}));
  clock.Advance(9000ms);
  registry.Heartbeat("alive");
  registry.Expire();
  EXPECT_EQ(registry.Find("gone"), nullptr) << "gone 11 s ago, retention 10 s";
  EXPECT_EQ(registry.TakeForgotten(), std::vector<std::string>{"gone"});
  EXPECT_TRUE(registry.TakeForgotten().empty()) << "each forgotten worker is named once";
  ASSERT_NE(registry.Find("lost"), nullptr) << "lost 9 s ago";
  clock.Advance(2000ms);
  registry.Heartbeat("alive");
  registry.Expire();
  EXPECT_EQ(registry.Find("lost"), nullptr);
  ASSERT_NE(registry.Find("lost-holding"), nullptr) << "it still holds an attempt";
  ASSERT_NE(registry.Find("alive"), nullptr);
  registry.Release("lost-holding", {1, 1}, 1, {});
  registry.Expire();
  EXPECT_EQ(registry.Find("lost-holding"), nullptr);
  EXPECT_EQ(registry.workers().size(), 1u);
}

}  // namespace
}  // namespace bakeoff::coordinator
