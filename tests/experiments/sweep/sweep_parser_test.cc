#include "experiments/sweep/sweep_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace bakeoff::spec {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

// A valid sweep; tests replace or append lines to break one thing at a time.
const char* const kValid = R"(name: compile-vs-eager
question: Is jit faster?
workload:
  executor: lora
  model: tiny
  seq_len: 64
  steps: 4
  lora: {alpha: 32, dropout: 0.1, targets: [q, v]}
method: grid
parameters:
  compile_mode: {values: [eager, jit]}
  micro_batch: {values: [1, 2, 4]}
  world_size: {value: 2}
baseline: {compile_mode: eager}
repeats: 3
resources: {device: cpu}
limits: {trial_timeout: 10m, max_attempts: 2}
)";

Result<SweepSpec> Parse(const std::string& text, const ParseLimits& limits = {}) {
  return ParseSweepText(text, "test.yaml", limits);
}

std::string ErrorOf(const std::string& text, const ParseLimits& limits = {}) {
  auto result = Parse(text, limits);
  EXPECT_FALSE(result.ok()) << "expected an error for:\n" << text;
  return result.ok() ? "" : result.status().message();
}

// The smallest sweep the parser takes, which the error cases below extend: as it is, and
// opening its parameters.
const std::string kMinimal = "name: s\nworkload: {}\n";
const std::string kAxes = kMinimal + "parameters:\n";

// A sweep text, and a part of the error it is refused with.
struct Refused {
  std::string text;
  std::string error;
};

void ExpectRefused(const std::vector<Refused>& cases) {
  for (const auto& [text, error] : cases) EXPECT_THAT(ErrorOf(text), HasSubstr(error)) << text;
}
// The same, each text after `base`.
void ExpectRefused(const std::string& base, const std::vector<Refused>& cases) {
  for (const auto& [text, error] : cases) EXPECT_THAT(ErrorOf(base + text), HasSubstr(error)) << base + text;
}

// The message of the kResourceExhausted error `text` is refused with ("" when it parses).
std::string ExhaustedErrorOf(const std::string& text, const ParseLimits& limits = {}) {
  auto result = Parse(text, limits);
  EXPECT_FALSE(result.ok()) << "expected an error for:\n" << text;
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), Status::Code::kResourceExhausted) << result.status().ToString();
  return result.status().message();
}

// `text` parses, with one warning, which contains `part`.
void ExpectOneWarning(const std::string& text, const std::string& part) {
  auto spec = Parse(text);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->warnings.size(), 1u);
  EXPECT_THAT(spec->warnings[0], HasSubstr(part));
}

TEST(SweepParserTest, ParsesEveryFieldOfAValidSweep) {
  auto spec = Parse(kValid);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "compile-vs-eager");
  EXPECT_EQ(spec->question, "Is jit faster?");
  EXPECT_EQ(spec->workload.executor, Executor::kLora);
  EXPECT_EQ(spec->method, Method::kGrid);
  ASSERT_EQ(spec->parameters.size(), 3u);
  EXPECT_EQ(spec->parameters[0].name, "compile_mode");
  EXPECT_EQ(spec->parameters[1].values, (std::vector<json>{1, 2, 4}));
  EXPECT_TRUE(spec->parameters[2].fixed);
  EXPECT_FALSE(spec->parameters[2].Varies());
  EXPECT_EQ(spec->parameters[1].location.line, 12);
  EXPECT_EQ(spec->parameters[1].location.column, 3);
  ASSERT_EQ(spec->baseline.size(), 1u);
  EXPECT_EQ(spec->baseline[0].second, "eager");
  EXPECT_EQ(spec->repeats, 3);
  EXPECT_EQ(spec->order, Order::kInterleaved);
  EXPECT_EQ(spec->resources.device, "cpu");
  EXPECT_EQ(spec->limits.trial_timeout.count(), 600);
  EXPECT_EQ(spec->limits.max_attempts, 2);
  EXPECT_TRUE(spec->warnings.empty());
}

TEST(SweepParserTest, MapsNestedLoraOntoFlatTrainerFields) {
  auto spec = Parse(kValid);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const json& d = spec->workload.defaults;
  EXPECT_EQ(d["lora_alpha"], 32.0);
  EXPECT_EQ(d["lora_dropout"], 0.1);
  EXPECT_EQ(d["lora_targets"], json::array({"q", "v"}));
  EXPECT_EQ(d["model"], "tiny");
  EXPECT_EQ(d["seq_len"], 64);
  EXPECT_FALSE(d.contains("lora"));
  EXPECT_FALSE(d.contains("executor"));
}

TEST(SweepParserTest, AcceptsACustomModelObject) {
  std::string text = kValid;
  text.replace(text.find("model: tiny"), 11,
               "model: {dim: 256, layers: 4, heads: 4, kv_heads: 2, ffn_dim: 688, vocab: 4096}");
  auto spec = Parse(text);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->workload.defaults["model"]["dim"], 256);
}

TEST(SweepParserTest, DefaultsWhenOptionalSectionsAreOmitted) {
  auto spec = Parse("name: s\nworkload: {model: tiny}\nparameters:\n  micro_batch: {values: [1, 2]}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->repeats, kDefaultRepeats);
  EXPECT_EQ(kDefaultRepeats, 5);
  EXPECT_EQ(spec->order, Order::kInterleaved);
  EXPECT_EQ(spec->resources.device, "cpu");
  EXPECT_EQ(spec->limits.trial_timeout.count(), 3600);
  EXPECT_EQ(spec->limits.max_attempts, 3);
  ASSERT_EQ(spec->warnings.size(), 1u);
  EXPECT_THAT(spec->warnings[0], HasSubstr("no baseline"));
}

TEST(SweepParserTest, QuotedNumbersStayStrings) {
  // micro_batch must be an integer; "2" in quotes is a string and is rejected.
  EXPECT_THAT(ErrorOf(kAxes + "  micro_batch: {values: [1, \"2\"]}\n"),
              HasSubstr("test.yaml:4:29: parameters.micro_batch.values[1]: expected an integer >= 1, got \"2\""));
}

TEST(SweepParserTest, ReportsSyntaxErrorsWithLineAndColumn) {
  ExpectRefused({
      {"name: s\nworkload: {model: tiny\nparameters: {}\n", "test.yaml:3:"},
      {"name: s\nworkload: {model: tiny\nparameters: {}\n", "not valid YAML"},
  });
}

TEST(SweepParserTest, RejectsControlCharactersYamlDoesNotAllowAtTheirPlace) {
  // A NUL inside a plain scalar: yaml-cpp made bytes of it that are not UTF-8, and the
  // error message's JSON then threw (the fuzzer's find, 2026-12-06; corpus
  // nul_in_plain_scalar.yaml). Refused before YAML is read, at its line and column.
  const std::string nul = std::string("name: g\nworkload: {model: ti") + '\0' + "_, steps: 2}\n";
  EXPECT_THAT(ErrorOf(nul), HasSubstr("test.yaml:2:21: control character U+0000, which YAML does not allow"));
  EXPECT_THAT(ErrorOf("name: s\nquestion: a\x07" "b\n"), HasSubstr("test.yaml:2:12: control character U+0007"));
  EXPECT_THAT(ErrorOf("name: s\nquestion: \xc2\x9b\n"), HasSubstr("control character U+009B"));
  // Tab, line feed, carriage return and everything printable stay allowed.
  EXPECT_THAT(ErrorOf("name: s\r\nquestion: \"a\tb \xc2\xa0\xe2\x82\xac\"\r\n"), Not(HasSubstr("control character")));
}

TEST(SweepParserTest, RejectsTextThatIsNotUtf8) {
  EXPECT_THAT(ErrorOf("name: s\nquestion: caf\xe9?\n"),
              HasSubstr("test.yaml:2:14: not UTF-8 text"));
  EXPECT_THAT(ErrorOf("name: s\nquestion: \xed\xa0\x80\n"), HasSubstr("not UTF-8 text"));  // surrogate
  EXPECT_TRUE(Parse("name: s\nquestion: caf\xc3\xa9 \xe2\x9c\x93\nworkload: {}\n").ok());
}

TEST(SweepParserTest, RejectsATopLevelThatIsNotAMapping) {
  ExpectRefused({
      {"- a\n- b\n", "test.yaml:1:1: expected a mapping"},
      {"", "test.yaml: expected a mapping"},
  });
}

TEST(SweepParserTest, UnknownTopLevelFieldSuggestsTheClosestName) {
  std::string text = std::string(kValid) + "repeat: 2\n";
  EXPECT_THAT(ErrorOf(text), HasSubstr("test.yaml:18:1: repeat: unknown field; did you mean repeats?"));
}

TEST(SweepParserTest, UnknownWorkloadFieldSuggestsTheTrainerField) {
  std::string text = kValid;
  text.replace(text.find("  seq_len: 64"), 13, "  micro_bach: 2");
  EXPECT_THAT(ErrorOf(text),
              HasSubstr("test.yaml:6:3: workload.micro_bach: not a field of the native trainer; "
                        "did you mean micro_batch?"));
}

TEST(SweepParserTest, UnknownParameterIsAnErrorForTheLoraExecutor) {
  std::string text = kValid;
  text.replace(text.find("  micro_batch: {values"), 14, "  batch_size: ");
  EXPECT_THAT(ErrorOf(text), HasSubstr("test.yaml:12:3: parameters.batch_size: not a field of the native trainer"));
}

TEST(SweepParserTest, UnknownLoraFieldSuggestsTheClosestName) {
  std::string text = kValid;
  text.replace(text.find("alpha: 32"), 9, "alhpa: 32");
  EXPECT_THAT(ErrorOf(text), HasSubstr("test.yaml:8:10: workload.lora.alhpa: unknown field; did you mean alpha?"));
}

TEST(SweepParserTest, LoraFieldSetTwiceIsAnError) {
  std::string text = kValid;
  text.replace(text.find("  seq_len: 64"), 13, "  lora_alpha: 8");
  EXPECT_THAT(ErrorOf(text), HasSubstr("workload.lora.alpha: also set as workload.lora_alpha"));
}

TEST(SweepParserTest, DeviceBelongsToResources) {
  EXPECT_THAT(ErrorOf("name: s\nworkload: {device: cuda}\n"),
              HasSubstr("test.yaml:2:12: workload.device: the device comes from resources.device"));
}

TEST(SweepParserTest, RankFieldsBelongToTheWorker) {
  EXPECT_THAT(ErrorOf(kAxes + "  rank: {values: [0, 1]}\n"),
              HasSubstr("test.yaml:4:3: parameters.rank: set by the worker for each rank process"));
}

TEST(SweepParserTest, ReportsMissingRequiredFields) {
  std::string message = ErrorOf("question: q\n");
  EXPECT_THAT(message, HasSubstr("test.yaml:1:1: name: missing"));
  EXPECT_THAT(message, HasSubstr("test.yaml:1:1: workload: missing"));
}

TEST(SweepParserTest, ReportsEveryProblemInOnePass) {
  std::string message = ErrorOf(
      "name: s\nworkload: {steps: 0}\nparameters:\n  precision: {values: [fp16]}\nrepeats: 0\n");
  EXPECT_THAT(message, HasSubstr("test.yaml:2:19: workload.steps: expected an integer >= 1, got 0"));
  EXPECT_THAT(message, HasSubstr("test.yaml:4:24: parameters.precision.values[0]: expected one of fp32, bf16, got \"fp16\""));
  EXPECT_THAT(message, HasSubstr("test.yaml:5:10: repeats: expected an integer from 1 to 1000, got '0'"));
  // Listed in file order, whatever order the sections are checked in.
  EXPECT_LT(message.find("test.yaml:2:"), message.find("test.yaml:4:"));
  EXPECT_LT(message.find("test.yaml:4:"), message.find("test.yaml:5:"));
}

TEST(SweepParserTest, StopsListingAfterMaxErrors) {
  std::string text = kAxes;
  for (int i = 0; i < 30; ++i) text += "  bogus_" + std::to_string(i) + ": {value: 1}\n";
  ParseLimits limits;
  limits.max_errors = 5;
  std::string message = ErrorOf(text, limits);
  EXPECT_THAT(message, HasSubstr("stopped after 5 problems"));
  EXPECT_THAT(message, Not(HasSubstr("bogus_5")));
}

TEST(SweepParserTest, RejectsBadValuesWithTheirPath) {
  ExpectRefused({
      {kAxes + "  micro_batch: {values: [1, 2, 0]}\n",
       "test.yaml:4:32: parameters.micro_batch.values[2]: expected an integer >= 1, got 0"},
      {kAxes + "  lora_dropout: {value: 1.0}\n",
       "parameters.lora_dropout.value: expected a number >= 0 and < 1, got 1.0"},
      {"name: s\nworkload: {lora: {targets: [q, q]}}\n",
       "workload.lora.targets: expected a non-empty list of distinct modules"},
      {"name: s\nworkload: {model: huge}\n",
       "test.yaml:2:19: workload.model: expected a preset (tiny, small, llama-7b, llama-13b)"},
      {"name: s\nworkload: {model: {dim: 256, layers: 2, heads: 3, kv_heads: 1, ffn_dim: 8, vocab: 8}}\n",
       "model.heads: dim (256) must be divisible by heads (3)"},
      {"name: s\nworkload: {model: {dim: 256}}\n", "model: missing 'layers'"},
      {"name: s\nworkload: {grad_checkpointing: yes}\n",
       "workload.grad_checkpointing: expected true or false, got \"yes\""},
  });
}

TEST(SweepParserTest, RejectsRepeatedAxisValues) {
  EXPECT_THAT(ErrorOf(kAxes + "  micro_batch: {values: [1, 2, 1]}\n"),
              HasSubstr("parameters.micro_batch.values[2]: 1 repeats values[0]"));
}

TEST(SweepParserTest, RejectsEmptyOrMalformedAxes) {
  ExpectRefused({
      {kAxes + "  micro_batch: {values: []}\n",
       "test.yaml:4:25: parameters.micro_batch.values: expected a non-empty list"},
      {kAxes + "  micro_batch: [1, 2]\n",
       "test.yaml:4:16: parameters.micro_batch: expected a mapping {values: [...]}, {value: x}"},
      {kAxes + "  micro_batch: {values: [1], value: 2}\n", "give only one of values, value and distribution"},
      {kAxes + "  micro_batch: {valeus: [1]}\n", "parameters.micro_batch.valeus: unknown field; did you mean values?"},
  });
}

TEST(SweepParserTest, RejectsDuplicateKeys) {
  EXPECT_THAT(ErrorOf(kMinimal + "name: t\n"),
              HasSubstr("test.yaml:3:1: name: written twice"));
}

TEST(SweepParserTest, ValidatesTheName) {
  ExpectRefused({
      {"name: has space\nworkload: {}\n", "test.yaml:1:7: name: expected letters, digits"},
      {"name: 42\nworkload: {}\n",
       "test.yaml:1:7: name: expected letters, digits, '.', '_' and '-', starting with a letter"},
  });
}

TEST(SweepParserTest, BaselineMustNameAnAxisAndOneOfItsValues) {
  std::string text = kValid;
  text.replace(text.find("baseline: {compile_mode: eager}"), 31, "baseline: {compile_mod: eager}");
  EXPECT_THAT(ErrorOf(text), HasSubstr("test.yaml:14:12: baseline.compile_mod: not a parameter axis; "
                                       "did you mean compile_mode?"));
  text = kValid;
  text.replace(text.find("baseline: {compile_mode: eager}"), 31, "baseline: {compile_mode: cudagraph}");
  EXPECT_THAT(ErrorOf(text), HasSubstr("test.yaml:14:26: baseline.compile_mode: cudagraph is not one of "
                                       "the axis values [eager, jit]"));
}

TEST(SweepParserTest, ExcludeRulesAreValidated) {
  ExpectRefused(kAxes + "  zero_stage: {values: [0, 2]}\n",
                {
                    {"exclude:\n  - {zero_stage: 0, ofload: optimizer}\n",
                     "test.yaml:6:21: exclude[0].ofload: not a parameter axis, workload field or "
                     "trainer field; did you mean offload?"},
                    {"exclude:\n  - {}\n", "test.yaml:6:5: exclude[0]: an empty rule would exclude every variant"},
                    {"exclude: {zero_stage: 0}\n", "test.yaml:5:10: exclude: expected a list of rules"},
                    {"exclude:\n  - {zero_stage: 5}\n",
                     "exclude[0].zero_stage: expected an integer from 0 to 3, got 5"},
                });
}

TEST(SweepParserTest, WarnsAboutAnExcludeRuleThatNeverMatches) {
  ExpectOneWarning(kAxes + "  zero_stage: {values: [0, 2]}\n"
                   "exclude:\n  - {zero_stage: 0, offload: optimizer}\nbaseline: {zero_stage: 0}\n",
                   "test.yaml:6:5: exclude[0] never matches: offload is none");
}

TEST(SweepParserTest, WarnsAboutCudaOnlySettingsOnACpu) {
  ExpectOneWarning(kAxes + "  compile_mode: {values: [eager, cudagraph]}\nbaseline: {compile_mode: eager}\n",
                   "cudagraph is CUDA only");
}

TEST(SweepParserTest, RandomMethodNeedsCountAndAcceptsDistributions) {
  EXPECT_THAT(ErrorOf(kMinimal + "method: random\nparameters:\n  lora_rank: {values: [8, 16]}\n"),
              HasSubstr("test.yaml:3:9: count: missing; method: random needs count"));
  auto spec = Parse(
      kMinimal + "method: random\ncount: 5\nseed: 7\nparameters:\n"
      "  lora_rank: {distribution: log_uniform, min: 4, max: 256}\n"
      "  lr: {distribution: uniform, min: 0.0001, max: 0.01}\n"
      "  micro_batch: {distribution: int_uniform, min: 1, max: 8}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->count, 5);
  EXPECT_EQ(spec->seed, 7u);
  ASSERT_TRUE(spec->parameters[0].distribution.has_value());
  EXPECT_EQ(spec->parameters[0].distribution->kind, Distribution::Kind::kLogUniform);
  EXPECT_TRUE(spec->parameters[0].Varies());
}

TEST(SweepParserTest, DistributionErrors) {
  std::string random = kMinimal + "method: random\ncount: 2\nparameters:\n";
  ExpectRefused({
      {kAxes + "  lr: {distribution: uniform, min: 0.1, max: 1}\n",
       "test.yaml:4:8: parameters.lr.distribution: needs method: random"},
      {random + "  lr: {distribution: uniform, min: 0.1}\n", "a distribution needs both min and max"},
      {random + "  lr: {distribution: uniform, min: 1, max: 0.5}\n", "parameters.lr.max: must be greater than min"},
      {random + "  micro_batch: {distribution: uniform, min: 1, max: 4}\n",
       "micro_batch is an integer field; use int_uniform or log_uniform"},
      {random + "  precision: {distribution: uniform, min: 1, max: 4}\n", "precision is not numeric"},
      {random + "  lr: {distribution: normal, min: 1, max: 4}\n",
       "expected one of int_uniform, uniform, log_uniform, got 'normal'"},
      {random + "  micro_batch: {distribution: int_uniform, min: 0, max: 4}\n",
       "parameters.micro_batch.min: expected an integer >= 1, got 0"},
      {kMinimal + "count: 3\n", "test.yaml:3:1: count: applies to method: random only"},
  });
}

TEST(SweepParserTest, OrderResourcesAndLimitsErrors) {
  ExpectRefused({
      {kMinimal + "order: interleave\n",
       "test.yaml:3:8: order: expected one of interleaved, sequential, random, lockstep, got "
       "'interleave'; did you mean interleaved?"},
      {kMinimal + "resources: {device: tpu}\n", "test.yaml:3:21: resources.device: expected one of cpu, cuda"},
      {kMinimal + "resources: {device: cpu, gpu_type: A100}\n", "resources.gpu_type: needs device: cuda"},
      {kMinimal + "resources: {gpus: 8}\n", "test.yaml:3:13: resources.gpus: unknown field"},
      {kMinimal + "limits: {trial_timeout: 10 minutes}\n",
       "test.yaml:3:25: limits.trial_timeout: '10 minutes' is not a duration"},
      {kMinimal + "limits: {max_attempts: 0}\n", "limits.max_attempts: expected an integer from 1 to 100, got '0'"},
  });
  auto spec = Parse(kMinimal + "resources: {device: cuda, gpu_type: A100}\nlimits: {trial_timeout: 1h30m}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->resources.gpu_type, "A100");
  EXPECT_EQ(spec->limits.trial_timeout.count(), 5400);
}

TEST(SweepParserTest, CommandExecutorNeedsATemplateAndAcceptsItsOwnFields) {
  ExpectRefused({
      {"name: s\nworkload: {executor: command}\n",
       "workload.command: missing; executor: command needs command: {template"},
      {"name: s\nworkload: {command: {template: x}}\n", "workload.command: applies to executor: command only"},
  });
  auto spec = Parse(
      "name: s\nworkload:\n  executor: command\n  command: {template: torch-compile, args: {script: train.py}}\n"
      "  compile: default\n  micro_batch: 2\nparameters:\n  compile: {values: [none, default, max-autotune]}\n"
      "baseline: {compile: none}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->workload.executor, Executor::kCommand);
  EXPECT_EQ(spec->workload.command_template, "torch-compile");
  EXPECT_EQ(spec->workload.command_args["script"], "train.py");
  EXPECT_EQ(spec->workload.defaults["compile"], "default");
  // Without the allowlist a command template's fields are its own: a trainer field's
  // name may carry other values (compile_mode: default), so nothing is checked here.
  // With it, the template's fields are (executor_catalog_test.cc).
  auto free_form = Parse("name: s\nworkload:\n  executor: command\n  command: {template: t}\n"
                         "  compile_mode: default\n");
  ASSERT_TRUE(free_form.ok()) << free_form.status().ToString();
  EXPECT_EQ(free_form->workload.defaults["compile_mode"], "default");
}

TEST(SweepParserLimitsTest, RejectsTextOverTheSizeLimit) {
  ParseLimits limits;
  limits.max_yaml_bytes = 64;
  const std::string message = ExhaustedErrorOf(kValid, limits);
  EXPECT_THAT(message, HasSubstr("test.yaml: "));
  EXPECT_THAT(message, HasSubstr("over the limit of 64 bytes"));
}

TEST(SweepParserLimitsTest, RejectsDeepFlowNesting) {
  EXPECT_THAT(ExhaustedErrorOf(kMinimal + "question: " + std::string(40, '[') + std::string(40, ']') + "\n"),
              HasSubstr("test.yaml:3:43: nesting deeper than 32 levels"));
}

TEST(SweepParserLimitsTest, RejectsDeepBlockNesting) {
  std::string text = kMinimal + "question:\n";
  for (int depth = 1; depth <= 10; ++depth) text += std::string(depth * 2, ' ') + "k:\n";
  ParseLimits limits;
  limits.max_depth = 5;
  EXPECT_THAT(ExhaustedErrorOf(text, limits), HasSubstr("nesting deeper than 5 levels"));
}

TEST(SweepParserLimitsTest, SurvivesHugeFlowNestingWithoutRecursingIntoIt) {
  ExhaustedErrorOf("x: " + std::string(200000, '['));
}

TEST(SweepParserLimitsTest, CountsAliasExpansionAgainstTheNodeLimit) {
  // Each level refers to the previous one ten times: 10^6 nodes from a few lines.
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'g'; ++c) {
    text += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", *" : "*") + prev;
    text += "]\n";
    prev = std::string(1, c);
  }
  EXPECT_THAT(ExhaustedErrorOf(text), HasSubstr("YAML nodes"));
}

// Writes `content` to the test's temporary file `name`; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << content;
  return path;
}

TEST(SweepParserFileTest, ReadsAFileAndNamesItInErrors) {
  const std::string path = WriteTempFile("sweep_parser_test.yaml", "name: s\nworkload: {steps: -1}\n");
  auto result = ParseSweepFile(path);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(path + ":2:19: workload.steps"));
  std::remove(path.c_str());
}

TEST(SweepParserFileTest, MissingFileIsNotFound) {
  auto result = ParseSweepFile("/nonexistent/sweep.yaml");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("/nonexistent/sweep.yaml: cannot open"));
}

TEST(SweepParserFileTest, FileOverTheSizeLimitIsRejectedBeforeParsing) {
  const std::string path =
      WriteTempFile("sweep_parser_big.yaml", "name: s\nquestion: " + std::string(2000, 'x') + "\n");
  ParseLimits limits;
  limits.max_yaml_bytes = 1000;
  auto result = ParseSweepFile(path, limits);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kResourceExhausted);
  std::remove(path.c_str());
}

TEST(SweepSpecJsonTest, ToJsonCarriesTheNormalisedSpec) {
  auto spec = Parse(kValid);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  json j = ToJson(*spec);
  EXPECT_EQ(j["name"], "compile-vs-eager");
  EXPECT_EQ(j["method"], "grid");
  EXPECT_EQ(j["order"], "interleaved");
  EXPECT_EQ(j["limits"]["trial_timeout_s"], 600);
  EXPECT_EQ(j["parameters"][0]["values"], json::array({"eager", "jit"}));
  EXPECT_EQ(j["parameters"][2]["value"], 2);
  EXPECT_EQ(j["baseline"]["compile_mode"], "eager");
  EXPECT_EQ(j["workload"]["defaults"]["lora_alpha"], 32.0);
}

std::string WithRepeats(const std::string& repeats_line) {
  std::string text = kValid;
  size_t at = text.find("repeats: 3\n");
  return text.replace(at, std::string("repeats: 3\n").size(), repeats_line);
}

TEST(SweepParserTest, AdaptiveRepeatsAreReadAndRunMaxTrials) {
  auto spec = Parse(WithRepeats("repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->adaptive.has_value());
  EXPECT_EQ(spec->adaptive->min, 3);
  EXPECT_EQ(spec->adaptive->max, 20);
  EXPECT_DOUBLE_EQ(spec->adaptive->ci_half_width, 0.02);
  EXPECT_EQ(spec->repeats, 20) << "the expansion pre-expands max";
  EXPECT_EQ(spec->adaptive->location.line, 15);
  json j = ToJson(*spec);
  EXPECT_EQ(j["repeats"], 20);
  EXPECT_EQ(j["adaptive_repeats"]["min"], 3);
  EXPECT_EQ(j["adaptive_repeats"]["max"], 20);
  EXPECT_DOUBLE_EQ(j["adaptive_repeats"]["ci_half_width"].get<double>(), 0.02);
  // A block mapping reads the same.
  auto block = Parse(WithRepeats("repeats:\n  min: 4\n  max: 8\n  until:\n    ci_half_width: 0.05\n"));
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  EXPECT_EQ(block->adaptive->min, 4);
  EXPECT_EQ(block->repeats, 8);
}

TEST(SweepParserTest, PlainRepeatsAreNotAdaptive) {
  auto spec = Parse(kValid);
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->adaptive.has_value());
  EXPECT_TRUE(ToJson(*spec)["adaptive_repeats"].is_null());
}

TEST(SweepParserTest, AdaptiveRepeatsOutOfRangeAreErrorsAtTheirLine) {
  ExpectRefused({
      {WithRepeats("repeats: {min: 1, max: 20, until: {ci_half_width: 0.02}}\n"),
       "test.yaml:15:16: repeats.min: expected an integer from 2 to 1000, got '1'"},
      {WithRepeats("repeats: {min: 5, max: 4, until: {ci_half_width: 0.02}}\n"),
       "test.yaml:15:16: repeats.min: must not exceed max (4), got 5"},
      {WithRepeats("repeats: {min: 3, max: 1001, until: {ci_half_width: 0.02}}\n"),
       "test.yaml:15:24: repeats.max: expected an integer from 2 to 1000, got '1001'"},
  });
  for (const char* width : {"0", "1", "1.5", "-0.1", "wide", "'0.02'"}) {
    EXPECT_THAT(ErrorOf(WithRepeats(std::string("repeats: {min: 3, max: 20, until: {ci_half_width: ") +
                                    width + "}}\n")),
                HasSubstr("test.yaml:15:51: repeats.until.ci_half_width: expected a number between 0 and 1"))
        << width;
  }
  ExpectRefused({
      {WithRepeats("repeats: {min: 3, max: 20}\n"), "test.yaml:15:10: repeats.until: missing"},
      {WithRepeats("repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}, mx: 4}\n"),
       "repeats.mx: unknown field; did you mean max?"},
  });
}

TEST(SweepParserTest, LockstepOrderAndItsTurnTimeoutAreReadAndStored) {
  auto spec = Parse(kMinimal + "order: lockstep\nlimits: {turn_timeout: 90s}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->order, Order::kLockstep);
  EXPECT_EQ(spec->limits.turn_timeout, std::chrono::seconds(90));
  auto stored = SweepSpecFromJson(ToJson(*spec));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->order, Order::kLockstep);
  EXPECT_EQ(stored->limits.turn_timeout, std::chrono::seconds(90));
  EXPECT_EQ(Parse(kMinimal)->limits.turn_timeout, std::chrono::minutes(5)) << "the documented default";
  // Adaptive repeats work on lockstep pairs as on interleaved ones.
  EXPECT_TRUE(Parse(WithRepeats("repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}}\norder: lockstep\n")).ok());
  ExpectRefused(kMinimal, {{"limits: {turn_timeout: 0s}\n", "limits.turn_timeout: duration '0s' must be positive"},
                           {"limits: {turn_timeout: [1]}\n", "limits.turn_timeout: expected a duration"},
                           {"order: lockstop\n", "order"}});
}

TEST(SweepParserTest, AdaptiveRepeatsNeedInterleavedOrderAndABaseline) {
  EXPECT_THAT(ErrorOf(WithRepeats("repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}}\norder: random\n")),
              HasSubstr("test.yaml:16:8: order: adaptive repeats need order: interleaved or lockstep"));
  std::string no_baseline = WithRepeats("repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}}\n");
  no_baseline.replace(no_baseline.find("baseline: {compile_mode: eager}\n"),
                      std::string("baseline: {compile_mode: eager}\n").size(), "");
  EXPECT_THAT(ErrorOf(no_baseline), HasSubstr("repeats: adaptive repeats need a baseline"));
}

}  // namespace
}  // namespace bakeoff::spec
