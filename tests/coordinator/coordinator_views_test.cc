// The coordinator's read-only views of its trial table and worker registry: why queued
// trials wait, the capacity a provider sizes by, the /metrics snapshot, the workers' JSON.
#include "coordinator/coordinator_views.h"

#include <gtest/gtest.h>

#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::coordinator {
namespace {
using namespace std::chrono_literals;

protocol::RegisterMessage Reg(const std::string& name, int slots, std::vector<std::string> executors = {}) {
  return testing::Registration(name, slots, "127.0.0.1", std::move(executors));
}

class CoordinatorViewsTest : public ::testing::Test {
 protected:
  // A sweep of one variant `v` (world size `world_size`, optionally a command template)
  // with `trials` queued trials, ids 1.., held in table_.
  void AddSweep(int world_size, int trials, const std::string& command_template = "") {
    SweepEntry sweep;
    sweep.id = 1;
    sweep.name = "s";
    VariantInfo variant;
    variant.world_size = world_size;
    nlohmann::json config = nlohmann::json::object();
    if (!command_template.empty()) config["command_template"] = command_template;
    variant.config = spec::VariantConfig(config);
    sweep.variants["v"] = variant;
    std::vector<metrics::NewTrial> news;
    std::vector<std::int64_t> ids;
    for (int i = 0; i < trials; ++i) {
      news.push_back({"v", i, i, 1});
      ids.push_back(i + 1);
    }
    table_.AddSubmitted(sweep, ids, news, 1, clock_.Now());
  }
  std::string Waiting() {
    return WaitingReason(State(), 1);
  }

  CoordinatorState State(std::string capacity_note = "") {
    return CoordinatorState{table_, registry_, connected_, clock_.Now(), /*slurm_on=*/false, std::move(capacity_note)};
  }

  FakeClock clock_;
  WorkerRegistry registry_{clock_, 1000ms};
  TrialTable table_;
  Connected connected_ = [](const std::string&) { return true; };
};

TEST_F(CoordinatorViewsTest, AWaitingSweepSaysWhenNoLiveWorkerCanEverHoldItsNextTrial) {
  AddSweep(/*world_size=*/4, /*trials=*/2);
  registry_.Register(Reg("a", 2));
  registry_.Register(Reg("b", 1));
  EXPECT_EQ(Waiting(),
            "its next trial needs 4 CPU slots and the 2 live workers offer 3 in all; start workers with more "
            "--slots or lower the sweep's world_size");
  registry_.Register(Reg("c", 1));
  EXPECT_EQ(Waiting(), "") << "4 slots in all: the trial can be placed";
  // A worker without a connection offers nothing.
  connected_ = [](const std::string& id) { return id != "c"; };
  EXPECT_NE(Waiting().find("offer 3 in all"), std::string::npos) << Waiting();
  // While a provider obtains capacity, only its note is said.
  EXPECT_EQ(WaitingReason(State("waiting for Slurm: job 7"), 1),
            "waiting for Slurm: job 7");
}

TEST_F(CoordinatorViewsTest, AWaitingSweepNamesTheCommandTemplateNoLiveWorkerOffers) {
  AddSweep(1, 1, "torch-reference");
  registry_.Register(Reg("a", 2, {"hf-peft"}));
  EXPECT_EQ(Waiting(),
            "no live worker offers command template torch-reference (live workers offer: hf-peft); start a worker "
            "whose --executors file has it");
  registry_.Register(Reg("b", 1, {"torch-reference"}));
  EXPECT_EQ(Waiting(), "");
}

TEST_F(CoordinatorViewsTest, CapacityListsQueuedTrialsUpToTheLookaheadAndLiveWorkers) {
  AddSweep(2, 3);
  registry_.Register(Reg("a", 2));
  connected_ = [](const std::string&) { return false; };
  CapacityView view = Capacity(State(), /*max_queued=*/2);
  ASSERT_EQ(view.queued.size(), 2u);
  EXPECT_EQ(view.queued[0].world_size, 2);
  ASSERT_EQ(view.workers.size(), 1u);
  EXPECT_FALSE(view.workers[0].schedulable) << "not connected";
  EXPECT_EQ(view.workers[0].free_cpu_slots, 2);
}

TEST_F(CoordinatorViewsTest, TheMetricsSnapshotCountsTrialsAndSlotsAndNamesSweepsOnlyWhenAsked) {
  AddSweep(1, 3);
  table_.FindTrial(2)->machine.Cancel();
  registry_.Register(Reg("a", 2));
  CoordinatorSnapshot named = MetricsSnapshot({}, table_, registry_, 1, /*name_sweeps=*/true);
  ASSERT_EQ(named.sweeps.size(), 1u);
  EXPECT_EQ(named.sweeps[0].name, "s");
  EXPECT_EQ(named.sweeps[0].trials_by_state["queued"], 2);
  EXPECT_EQ(named.sweeps[0].trials_by_state["finished"], 1);
  EXPECT_EQ(named.sweeps[0].outcomes["cancelled"], 1);
  EXPECT_EQ(named.queue_depth, 2);
  EXPECT_EQ(named.cpu_slots_total, 2);
  EXPECT_EQ(named.workers_connected, 1);
  EXPECT_EQ(MetricsSnapshot({}, table_, registry_, 1, false).sweeps[0].name, "");
  EXPECT_EQ(table_.LiveCounts(1)->queued, 2);
  EXPECT_EQ(table_.LiveCounts(1)->cancelled, 1);
}

}  // namespace
}  // namespace bakeoff::coordinator
