#include "worker/worker_metrics.h"

#include <gtest/gtest.h>

#include <limits>

#include "protocol/version.h"
#include "tests/coordinator/exposition_value.h"
#include "tests/metrics/prometheus/promtool_check.h"

namespace bakeoff::worker {
namespace {
using testing::ExpositionValue;
using nlohmann::json;

protocol::AssignMessage Assign(std::int64_t trial, std::vector<protocol::RankSlot> ranks, int world_size) {
  protocol::AssignMessage a;
  a.attempt = {trial, 1};
  a.sweep_id = "7";
  a.variant_key = "compile_mode=jit,micro_batch=4";
  a.ranks = std::move(ranks);
  a.world_size = world_size;
  return a;
}

json StepJson(int step, double step_s, const char* phase = "measure") {
  return {{"event", "step"}, {"step", step}, {"phase", phase}, {"step_s", step_s}, {"tokens", 512},
          {"loss", 4.5}, {"peak_mem_bytes", 3000}, {"rss_bytes", 2000}, {"device_allocated_bytes", 1500},
          {"device_reserved_peak_bytes", 4096}, {"comm_s", 0.25}, {"comm_bytes", 1024}};
}

// An event as the trial runner hands it over: read into its type.
protocol::TrainerEvent Typed(json body) {
  auto event = protocol::TrainerEventFromJson(std::move(body));
  EXPECT_TRUE(event.ok()) << event.status().ToString();
  return event.ok() ? std::move(event).value() : protocol::TrainerEvent{};
}

protocol::TrainerEvent Step(int step, double step_s, const char* phase = "measure") {
  return Typed(StepJson(step, step_s, phase));
}

const std::string kRank0 =
    R"({rank="0",sweep="7",trial="12",variant="compile_mode=jit,micro_batch=4"})";
const std::string kRank1 =
    R"({rank="1",sweep="7",trial="12",variant="compile_mode=jit,micro_batch=4"})";

TEST(WorkerMetricsTest, StepEventsBecomePerRankSeries) {
  WorkerMetrics metrics;
  metrics.StartTrial(Assign(12, {{0, 0, {}}, {1, 1, {}}}, 2));
  metrics.ObserveEvent({12, 1}, 0, Step(0, 2.0, "warmup"));
  metrics.ObserveEvent({12, 1}, 0, Step(1, 0.5));
  metrics.ObserveEvent({12, 1}, 1, Step(0, 0.25));
  const std::string text = metrics.Render();
  // Each rank counts its share (512 global tokens / 2 ranks) of every step.
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_tokens_total" + kRank0), 512.0);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_tokens_per_second" + kRank0), 256 / 0.5);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_tokens_per_second" + kRank1), 256 / 0.25);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_loss" + kRank0), 4.5);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_peak_memory_bytes" + kRank0), 3000);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_rss_bytes" + kRank0), 2000);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_collective_seconds_total" + kRank0), 0.5);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_collective_bytes_total" + kRank0), 2048);
  // The histogram holds measured steps only: the 2 s warm-up step is not in it.
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_step_seconds_count" + kRank0), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_step_seconds_sum" + kRank0), 0.5);
  EXPECT_EQ(ExpositionValue(text, R"(bakeoff_trial_steps_total{phase="warmup",rank="0",sweep="7",trial="12",variant="compile_mode=jit,micro_batch=4"})"), 1);
  EXPECT_EQ(ExpositionValue(text, R"(bakeoff_trial_steps_total{phase="measure",rank="0",sweep="7",trial="12",variant="compile_mode=jit,micro_batch=4"})"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_worker_running_trials"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_worker_running_ranks"), 2);
}

TEST(WorkerMetricsTest, OnlyCudaRanksGetDeviceMemorySeries) {
  WorkerMetrics metrics;
  metrics.StartTrial(Assign(12, {{0, 0, {3}}, {1, 1, {}}}, 2));
  metrics.ObserveEvent({12, 1}, 0, Step(0, 0.5));
  metrics.ObserveEvent({12, 1}, 1, Step(0, 0.5));
  const std::string text = metrics.Render();
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_device_allocated_bytes" + kRank0), 1500);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_device_reserved_peak_bytes" + kRank0), 4096);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_device_allocated_bytes" + kRank1), -1) << "rank 1 runs on CPU";
}

TEST(WorkerMetricsTest, SeriesOfAnEndedTrialAreRemovedAndItsOutcomeCounted) {
  WorkerMetrics metrics;
  metrics.StartTrial(Assign(12, {{0, 0, {3}}}, 1));
  metrics.StartTrial(Assign(13, {{1, 0, {}}}, 1));
  metrics.ObserveEvent({12, 1}, 0, Step(0, 0.5));
  metrics.ObserveEvent({13, 1}, 1, Step(0, 0.5));
  ASSERT_NE(metrics.Render().find(R"(trial="12")"), std::string::npos);
  metrics.EndTrial({12, 1}, "succeeded");
  const std::string text = metrics.Render();
  EXPECT_EQ(text.find(R"(trial="12")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(trial="13")"), std::string::npos) << "the other trial keeps its series";
  EXPECT_EQ(ExpositionValue(text, R"(bakeoff_worker_trials_finished_total{outcome="succeeded"})"), 1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_worker_running_trials"), 1);
  // A line that arrives after the end creates nothing.
  metrics.ObserveEvent({12, 1}, 0, Step(1, 0.5));
  EXPECT_EQ(metrics.Render().find(R"(trial="12")"), std::string::npos);
}

TEST(WorkerMetricsTest, NonStepEventsAndNonFiniteValuesLeaveSeriesAlone) {
  WorkerMetrics metrics;
  metrics.StartTrial(Assign(12, {{0, 0, {}}}, 1));
  metrics.ObserveEvent({12, 1}, 0, Typed({{"event", "ready"}}));
  EXPECT_EQ(metrics.Render().find(R"(trial="12")"), std::string::npos) << "no step yet, no series";
  metrics.ObserveEvent({12, 1}, 0, Step(0, 0.5));
  // A mistyped field never gets here (the parser refuses the line: trainer_event_test);
  // a null loss (what a trainer writes for NaN) and a NaN built in process read as absent.
  json bad = StepJson(1, 0.5, "warmup");
  bad["loss"] = nullptr;
  bad.erase("tokens");
  metrics.ObserveEvent({12, 1}, 0, Typed(bad));
  bad["loss"] = std::numeric_limits<double>::quiet_NaN();
  metrics.ObserveEvent({12, 1}, 0, Typed(bad));
  const std::string text = metrics.Render();
  const std::string rank0 = R"({rank="0",sweep="7",trial="12",variant="compile_mode=jit,micro_batch=4"})";
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_loss" + rank0), 4.5);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_tokens_total" + rank0), 512);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_trial_step_seconds_count" + rank0), 1);
}

TEST(WorkerMetricsTest, ExpositionPassesPromtool) {
  WorkerMetrics metrics(std::make_shared<NodeCollector>());
  metrics.SetCapacity(2, 1);
  metrics.SetAgentState(true, 17);
  metrics.StartTrial(Assign(12, {{0, 0, {0}}, {1, 1, {}}}, 2));
  metrics.ObserveEvent({12, 1}, 0, Step(0, 0.5));
  metrics.ObserveEvent({12, 1}, 1, Step(0, 0.5));
  metrics.StartTrial(Assign(14, {{0, 0, {}}}, 1));
  metrics.EndTrial({14, 1}, "oom");
  const std::string text = metrics.Render();
  EXPECT_EQ(ExpositionValue(text, std::string("bakeoff_build_info{commit=\"") + kBakeoffGitCommit +
                            "\",component=\"worker\",version=\"" + kBakeoffVersion + "\"}"),
            1);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_worker_buffered_events"), 17);
  EXPECT_EQ(ExpositionValue(text, "bakeoff_worker_connected"), 1);
  EXPECT_GT(ExpositionValue(text, "bakeoff_node_cpus"), 0);
  auto lint = testing::PromtoolCheckMetrics(text);
  EXPECT_EQ(lint.exit_code, 0) << lint.output << "\n" << text;
}

}  // namespace
}  // namespace bakeoff::worker
