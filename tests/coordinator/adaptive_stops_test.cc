// ApplyAdaptiveStops: the stored outcomes of an adaptive sweep walked, and the queued
// trials of a variant whose comparisons stopped cancelled in the store and the table,
// with the walk's reason; an A/A variant runs on.
#include "coordinator/adaptive_stops.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <variant>

#include "coordinator/sweep_intake.h"
#include "metrics/report/adaptive_repeats.h"
#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::coordinator {
namespace {

// micro_batch=2 is twice the baseline's tokens/s (it stops at min pairs); micro_batch=4
// is the baseline again, with noise (an A/A comparison: it runs on).
const std::string kSweep = std::string(R"(name: adaptive
question: does a far variant stop at min pairs?
)") + testing::kTinyWorkload + R"(parameters:
  micro_batch: {values: [1, 2, 4]}
baseline: {micro_batch: 1}
repeats: {min: 3, max: 6, until: {ci_half_width: 0.001}}
)";

double Tokens(const std::string& variant, int repeat) {
  static const double kBaseline[] = {100, 101, 99};
  static const double kAA[] = {103, 97, 102};
  if (variant == "micro_batch=1") return kBaseline[repeat];
  if (variant == "micro_batch=2") return 2 * kBaseline[repeat] + repeat;
  return kAA[repeat];
}

class AdaptiveStopsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-adaptive-stops");
    ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_));
    auto prepared = PrepareSubmittedSweep(MakeSubmission(CoordinatorConfig{}, {}), kSweep);
    ASSERT_TRUE(std::holds_alternative<PreparedSweep>(prepared)) << std::get<ApiError>(prepared).message;
    PreparedSweep& p = std::get<PreparedSweep>(prepared);
    auto created = store_->CreateSweep(p.record, p.variants, p.trials);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    sweep_id_ = created->sweep_id;
    table_.AddSubmitted(SweepFromSpec(sweep_id_, p.spec, p.expanded), created->trial_ids, p.trials, 2,
                        Clock::TimePoint{});
  }
  void TearDown() override {
    store_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // Every trial of the first three repeats succeeds with Tokens' figure, in the store and
  // in the table.
  void SucceedFirstPairs() {
    for (const auto& t : store_->Reader()->ListTrials(sweep_id_).value()) {
      if (t.repeat >= 3) continue;
      metrics::AttemptRecord placement;
      placement.trial_id = t.id;
      placement.worker_id = "w";
      ASSERT_TRUE(store_->AssignTrial(t.id, 0, placement).ok());
      ASSERT_TRUE(store_->MarkRunning(t.id, 1).ok());
      metrics::TrialSummary summary{t.id, 1, 0, {{"tokens_per_s", Tokens(t.variant_key, static_cast<int>(t.repeat))}}};
      ASSERT_TRUE(store_->RecordSummary(summary).ok());
      ASSERT_TRUE(store_->FinishTrial(t.id, 1, metrics::Outcome::kSucceeded, "").ok());
      TrialStateMachine& machine = table_.FindTrial(t.id)->machine;
      ASSERT_TRUE(machine.Assign().ok());
      machine.MarkRunning(1);
      machine.Report(1, protocol::Outcome::kSucceeded);
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<metrics::ResultsStore> store_;
  FakeClock clock_;
  TestEnv env_{clock_};
  logging::Logger log_{env_, "coordinator"};
  CoordinatorMetrics metrics_{clock_};
  TrialTable table_;
  std::int64_t sweep_id_ = 0;
};

TEST_F(AdaptiveStopsTest, AVariantWhoseComparisonStoppedHasItsQueuedTrialsCancelledInStoreAndTable) {
  EXPECT_EQ(ApplyAdaptiveStops(sweep_id_, table_, *store_, metrics_, log_), 0) << "no pair has finished yet";
  SucceedFirstPairs();
  EXPECT_EQ(ApplyAdaptiveStops(sweep_id_, table_, *store_, metrics_, log_), 3) << "micro_batch=2's repeats 3 to 5";
  EXPECT_EQ(table_.FindSweep(sweep_id_)->comparisons_answered, 1);
  // The decision is logged through the coordinator's Env, with the sweep as a field.
  const auto stopped = env_.LinesWith("adaptive stop: queued trials cancelled");
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_NE(stopped[0].find("sweep=" + std::to_string(sweep_id_)), std::string::npos) << stopped[0];
  std::map<std::string, int> cancelled;
  for (const auto& t : store_->Reader()->ListTrials(sweep_id_).value()) {
    if (t.outcome != metrics::Outcome::kCancelled) continue;
    ++cancelled[t.variant_key];
    EXPECT_EQ(t.reason.rfind(metrics::kAdaptiveRepeatsReason, 0), 0u) << t.reason;
    EXPECT_EQ(table_.FindTrial(t.id)->machine.phase(), TrialState::kFinished);
  }
  EXPECT_EQ(cancelled, (std::map<std::string, int>{{"micro_batch=2", 3}}))
      << "the A/A variant and the baseline it is compared with run on";
  EXPECT_EQ(ApplyAdaptiveStops(sweep_id_, table_, *store_, metrics_, log_), 0) << "nothing is cancelled twice";
}

TEST_F(AdaptiveStopsTest, ACancelledOrUnknownSweepIsLeftAlone) {
  SucceedFirstPairs();
  EXPECT_EQ(ApplyAdaptiveStops(sweep_id_ + 1, table_, *store_, metrics_, log_), 0);
  table_.FindSweep(sweep_id_)->cancelled = true;
  EXPECT_EQ(ApplyAdaptiveStops(sweep_id_, table_, *store_, metrics_, log_), 0);
}

}  // namespace
}  // namespace bakeoff::coordinator
