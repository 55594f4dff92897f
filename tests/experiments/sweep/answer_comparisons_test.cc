// AnswerComparisons: the comparisons a sweep's answer reports, the one rule the report and
// the coordinator's adaptive repeats share.
#include "experiments/sweep/answer_comparisons.h"

#include <gtest/gtest.h>

namespace bakeoff::spec {
namespace {

std::vector<ComparedVariant> TwoByTwo() {
  const std::string base = "compile_mode=eager,zero_stage=0";
  return {
      {base, {{"compile_mode", "eager"}, {"zero_stage", "0"}}, base},
      {"compile_mode=eager,zero_stage=2", {{"compile_mode", "eager"}, {"zero_stage", "2"}}, base},
      {"compile_mode=default,zero_stage=0", {{"compile_mode", "default"}, {"zero_stage", "0"}}, base},
      {"compile_mode=default,zero_stage=2", {{"compile_mode", "default"}, {"zero_stage", "2"}}, base},
  };
}

std::vector<std::string> Pairs(const std::vector<AnswerComparison>& comparisons) {
  std::vector<std::string> out;
  for (const AnswerComparison& c : comparisons) {
    out.push_back(c.axis + ": " + c.variant_key + " vs " + c.counterpart_key + " [" + c.held + "]");
  }
  return out;
}

TEST(AnswerComparisonsTest, TwoAxesCompareEachAxisWithinEverySettingOfTheOtherNeverTheDiagonal) {
  auto got = AnswerComparisons({"compile_mode", "zero_stage"}, {{"compile_mode", "eager"}, {"zero_stage", "0"}},
                               TwoByTwo());
  EXPECT_EQ(Pairs(got), (std::vector<std::string>{
                            "compile_mode: compile_mode=default,zero_stage=0 vs compile_mode=eager,zero_stage=0 "
                            "[zero_stage=0]",
                            "compile_mode: compile_mode=default,zero_stage=2 vs compile_mode=eager,zero_stage=2 "
                            "[zero_stage=2]",
                            "zero_stage: compile_mode=eager,zero_stage=2 vs compile_mode=eager,zero_stage=0 "
                            "[compile_mode=eager]",
                            "zero_stage: compile_mode=default,zero_stage=2 vs compile_mode=default,zero_stage=0 "
                            "[compile_mode=default]",
                        }));
  EXPECT_EQ(got[0].value, "default");
  EXPECT_EQ(got[0].reference, "eager");
}

TEST(AnswerComparisonsTest, OneVaryingAxisComparesEachVariantWithItsCounterpart) {
  std::vector<ComparedVariant> variants = {
      {"micro_batch=1", {{"micro_batch", "1"}}, "micro_batch=1"},
      {"micro_batch=2", {{"micro_batch", "2"}}, "micro_batch=1"},
      {"micro_batch=4", {{"micro_batch", "4"}}, ""},  // counterpart excluded
  };
  auto got = AnswerComparisons({"micro_batch"}, {{"micro_batch", "1"}}, variants);
  EXPECT_EQ(Pairs(got), (std::vector<std::string>{": micro_batch=2 vs micro_batch=1 []"}));
}

TEST(AnswerComparisonsTest, AnAxisOutsideTheBaselineOrWithOneValueIsNotCompared) {
  // zero_stage takes one value among the variants (the others were excluded): only
  // compile_mode is compared, so each variant goes against its counterpart.
  auto variants = TwoByTwo();
  variants.erase(variants.begin() + 3);
  variants.erase(variants.begin() + 1);
  auto got = AnswerComparisons({"compile_mode", "zero_stage"}, {{"compile_mode", "eager"}, {"zero_stage", "0"}},
                               variants);
  EXPECT_EQ(Pairs(got), (std::vector<std::string>{
                            ": compile_mode=default,zero_stage=0 vs compile_mode=eager,zero_stage=0 []"}));
  // An axis the baseline does not name is not one of the compared axes.
  got = AnswerComparisons({"compile_mode", "zero_stage"}, {{"compile_mode", "eager"}}, TwoByTwo());
  for (const AnswerComparison& c : got) EXPECT_EQ(c.axis, "") << c.variant_key;
}

TEST(AnswerComparisonsTest, AMissingCounterpartSettingLeavesThatComparisonOut) {
  auto variants = TwoByTwo();
  variants.erase(variants.begin() + 1);  // no eager ZeRO-2
  auto got = AnswerComparisons({"compile_mode", "zero_stage"}, {{"compile_mode", "eager"}, {"zero_stage", "0"}},
                               variants);
  EXPECT_EQ(Pairs(got), (std::vector<std::string>{
                            "compile_mode: compile_mode=default,zero_stage=0 vs compile_mode=eager,zero_stage=0 "
                            "[zero_stage=0]",
                            "zero_stage: compile_mode=default,zero_stage=2 vs compile_mode=default,zero_stage=0 "
                            "[compile_mode=default]",
                        }));
}

TEST(AnswerComparisonsTest, SettingKeyFollowsTheAxisOrderThenNames) {
  EXPECT_EQ(SettingKey({"b", "a"}, {{"a", "1"}, {"b", "2"}, {"c", "3"}}), "b=2,a=1,c=3");
  EXPECT_EQ(SettingKey({"b", "a"}, {{"a", "1"}, {"b", "2"}}, "b"), "a=1");
}

}  // namespace
}  // namespace bakeoff::spec
