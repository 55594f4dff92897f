#include "experiments/trainer/trainer_config.h"

#include <gtest/gtest.h>

namespace bakeoff::trainer {
namespace {

TEST(TrainerConfigTest, DefaultsFinalizeToTinyModel) {
  TrainerConfig c;
  ASSERT_TRUE(FinalizeConfig(&c).ok());
  EXPECT_EQ(c.dims.preset, "tiny");
  EXPECT_EQ(c.dims.head_dim(), 16);
  EXPECT_EQ(c.tokens_per_step(), 128);
}

TEST(TrainerConfigTest, UnknownFieldNamesItAndSuggestsTheClosest) {
  TrainerConfig c;
  Status s = ApplyConfigJson({{"micro_bach", 4}}, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("micro_bach: unknown field"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean micro_batch?"), std::string::npos) << s.message();
}

TEST(TrainerConfigTest, InvalidValuesNameTheFieldAndWhatIsAllowed) {
  struct Case {
    nlohmann::json json;
    std::string expected;
  };
  std::vector<Case> cases = {
      {{{"precision", "fp8"}}, "precision: expected one of fp32, bf16"},
      {{{"micro_batch", 0}}, "micro_batch: expected an integer >= 1, got 0"},
      {{{"lora_dropout", 1.0}}, "lora_dropout: expected a number >= 0 and < 1"},
      {{{"lora_targets", {"q", "x"}}}, "lora_targets: expected a non-empty list of distinct modules from q, k, v, o"},
      {{{"zero_stage", 4}}, "zero_stage: expected an integer from 0 to 3, got 4"},
      {{{"compile_mode", "inductor"}}, "compile_mode: expected one of eager, jit, cudagraph"},
      {{{"model", "gpt-5"}}, "model: expected a preset (tiny, small, llama-7b, llama-13b)"},
      {{{"model", {{"dim", 60}, {"layers", 1}, {"heads", 7}, {"ffn_dim", 8}, {"vocab", 9}}}},
       "model.heads: dim (60) must be divisible by heads (7)"},
      {{{"grad_checkpointing", "yes"}}, "grad_checkpointing: expected true or false"},
  };
  for (const auto& c : cases) {
    TrainerConfig config;
    Status s = ApplyConfigJson(c.json, &config);
    ASSERT_FALSE(s.ok()) << c.json.dump();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
  }
}

TEST(TrainerConfigTest, FlagValuesParseAsJsonOrString) {
  TrainerConfig c;
  ASSERT_TRUE(ApplyConfigFlag("micro_batch", "4", &c).ok());
  ASSERT_TRUE(ApplyConfigFlag("lora_targets", "[\"q\",\"v\"]", &c).ok());
  ASSERT_TRUE(ApplyConfigFlag("precision", "bf16", &c).ok());
  ASSERT_TRUE(ApplyConfigFlag("grad_checkpointing", "true", &c).ok());
  EXPECT_EQ(c.micro_batch, 4);
  EXPECT_EQ(c.lora_targets, (std::vector<std::string>{"q", "v"}));
  EXPECT_EQ(c.precision, "bf16");
  EXPECT_TRUE(c.grad_checkpointing);
}

TEST(TrainerConfigTest, DistributedRunNeedsAStoreAndARankBelowWorldSize) {
  TrainerConfig c;
  c.world_size = 2;
  EXPECT_NE(FinalizeConfig(&c).message().find("store:"), std::string::npos);
  c.store = "127.0.0.1:1234";
  c.rank = 2;
  EXPECT_NE(FinalizeConfig(&c).message().find("rank: 2 must be below world_size 2"), std::string::npos);
}

TEST(ModelDimsTest, PresetsHaveThePublishedShapesAndSmallIsAbout100M) {
  auto llama = ResolveModel("llama-7b");
  ASSERT_TRUE(llama.ok());
  auto counts = CountParameters(*llama, 16, {"q", "v"});
  // Llama-2 7B: 6.74e9 parameters.
  EXPECT_NEAR(static_cast<double>(counts.frozen), 6.74e9, 0.01e9);
  // LoRA r=16 on q, v: 32 layers x 2 x 16 x (4096 + 4096).
  EXPECT_EQ(counts.trainable, 32LL * 2 * 16 * 8192);
  auto small = ResolveModel("small");
  ASSERT_TRUE(small.ok());
  EXPECT_NEAR(static_cast<double>(CountParameters(*small, 8, {"q"}).frozen), 100e6, 5e6);
}

TEST(ModelDimsTest, LoraTrainingFlopsAreNotSixN) {
  auto dims = *ResolveModel("tiny");
  auto counts = CountParameters(dims, 8, {"q", "k", "v", "o"});
  const double flops = TrainingFlopsPerToken(dims, counts, 128);
  const double expected = 4.0 * counts.matmul + 6.0 * counts.trainable + 12.0 * 2 * 128 * 64;
  EXPECT_DOUBLE_EQ(flops, expected);
  EXPECT_LT(flops, 6.0 * counts.matmul + 12.0 * 2 * 128 * 64);
}

}  // namespace
}  // namespace bakeoff::trainer
