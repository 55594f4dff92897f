// The command allowlist: the shipped catalog loads, bad catalogs are refused with
// file:line, argument vectors render only from the operator's templates, and sweeps are
// checked against a template's own fields.
#include "experiments/sweep/executor_catalog.h"

#include <gtest/gtest.h>

#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"

namespace bakeoff::spec {
namespace {

using nlohmann::json;

const char* kCatalog =
    "python: /usr/bin/python3\n"
    "templates:\n"
    "  demo:\n"
    "    argv: [\"{python}\", \"{dir}/demo.py\", \"--config\", \"{config}\", \"--steps={extra}\"]\n"
    "    env:\n"
    "      pass: [PATH]\n"
    "      set: {CACHE: \"{cache}/x\"}\n"
    "    trainer_fields: [model, seq_len, micro_batch, world_size]\n"
    "    fields:\n"
    "      compile_mode: {choices: [eager, default], default: eager}\n"
    "    args:\n"
    "      extra: {type: int, min: 1, max: 10, default: 3}\n";

// A sweep named s of these workload fields and axes (YAML lines under their section,
// each ending in "\n"), with `baseline` when given.
std::string Sweep(const std::string& workload, const std::string& parameters, const std::string& baseline = "") {
  return "name: s\nworkload:\n" + workload + "parameters:\n" + parameters +
         (baseline.empty() ? "" : "baseline: " + baseline + "\n");
}

ExecutorCatalog Demo() {
  auto catalog = ParseExecutorCatalog(kCatalog, "demo.yaml", "/opt/demo");
  EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
  return *catalog;
}

TEST(ExecutorCatalogTest, ShippedCatalogLoadsWithBothWorkloads) {
  auto catalog = LoadExecutorCatalog(std::string(BAKEOFF_SOURCE_DIR) + "/experiments/executors.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->Names(), (std::vector<std::string>{"hf-peft", "torch-reference"}));
  const ExecutorTemplate* ref = catalog->Find("torch-reference");
  ASSERT_NE(ref, nullptr);
  EXPECT_TRUE(ref->AcceptsField("compile_scope"));
  EXPECT_TRUE(ref->AcceptsField("zero_stage"));
  EXPECT_FALSE(ref->AcceptsField("jit_executor"));
  // Both shipped workloads report through bakeoff_report's run.step(): they take turns.
  EXPECT_TRUE(ref->turns);
  EXPECT_TRUE(catalog->Find("hf-peft")->turns);
}

TEST(ExecutorCatalogTest, ALockstepSweepNeedsATemplateThatTakesTurns) {
  ExecutorCatalog catalog = Demo();
  const std::string lockstep = Sweep("  executor: command\n  command: {template: demo}\n  model: tiny\n",
                                     "  compile_mode: {values: [eager, default]}\n", "{compile_mode: eager}") +
                               "order: lockstep\n";
  auto refused = ParseSweepText(lockstep, "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("s.yaml:9:8: order: lockstep needs every side to take turns"),
            std::string::npos)
      << refused.status().message();
  catalog.templates["demo"].turns = true;
  EXPECT_TRUE(ParseSweepText(lockstep, "s.yaml", {}, &catalog).ok());
  auto bad = ParseExecutorCatalog(std::string(kCatalog) + "    turns: sometimes\n", "demo.yaml", "/opt/demo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("turns: expected true or false"), std::string::npos) << bad.status().message();
}

TEST(ExecutorCatalogTest, RendersArgvFromTheTemplateOnly) {
  ExecutorCatalog catalog = Demo();
  ArgvContext context;
  context.python = catalog.python;
  context.dir = catalog.dir;
  context.config = "/w/t/config.json";
  auto argv = RenderArgv(*catalog.Find("demo"), context, json{{"extra", 7}});
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(*argv, (std::vector<std::string>{"/usr/bin/python3", "/opt/demo/demo.py", "--config",
                                             "/w/t/config.json", "--steps=7"}));
  auto defaulted = RenderArgv(*catalog.Find("demo"), context, json::object());
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->back(), "--steps=3");
}

TEST(ExecutorCatalogTest, RefusesArgsTheTemplateDoesNotDeclareOrMistyped) {
  ExecutorCatalog catalog = Demo();
  const ExecutorTemplate& demo = *catalog.Find("demo");
  EXPECT_FALSE(RenderArgv(demo, {}, json{{"program", "/bin/sh"}}).ok());
  EXPECT_FALSE(RenderArgv(demo, {}, json{{"extra", 11}}).ok());
  EXPECT_FALSE(RenderArgv(demo, {}, json{{"extra", "3; rm -rf /"}}).ok());
}

TEST(ExecutorCatalogTest, NameArgsAreNeverPaths) {
  ValueSpec name;
  name.type = ValueSpec::Type::kName;
  EXPECT_TRUE(name.Check("model-1.b_2").ok());
  EXPECT_FALSE(name.Check("../etc/passwd").ok());
  EXPECT_FALSE(name.Check("/etc/passwd").ok());
  EXPECT_FALSE(name.Check("a b").ok());
  // Issue 32, hole 10: a path component or an option is not a name.
  EXPECT_FALSE(name.Check("..").ok());
  EXPECT_FALSE(name.Check(".").ok());
  EXPECT_FALSE(name.Check("--config").ok());
  EXPECT_FALSE(name.Check("-x").ok());
  EXPECT_TRUE(name.Check("a..b").ok()) << "dots inside a name are fine";
  EXPECT_TRUE(name.Check("v-1").ok());
}

// Issue 32's audit: a placeholder's value with a space (a worker path, a choice) stays one
// argv entry; argv is never split on spaces.
TEST(ExecutorCatalogTest, AValueWithASpaceStaysOneArgvEntry) {
  ExecutorCatalog catalog = Demo();
  ArgvContext context;
  context.python = catalog.python;
  context.dir = "/opt/my demo";
  context.config = "/w/trial 1/config.json";
  auto argv = RenderArgv(*catalog.Find("demo"), context, json{{"extra", 7}});
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(*argv, (std::vector<std::string>{"/usr/bin/python3", "/opt/my demo/demo.py", "--config",
                                             "/w/trial 1/config.json", "--steps=7"}));
}

TEST(ExecutorCatalogTest, BadCatalogsNameFileAndLine) {
  auto unknown_placeholder = ParseExecutorCatalog(
      "templates:\n  t:\n    argv: [\"/usr/bin/python3\", \"{secret}\"]\n", "bad.yaml", "/");
  ASSERT_FALSE(unknown_placeholder.ok());
  EXPECT_NE(unknown_placeholder.status().message().find("bad.yaml:3"), std::string::npos)
      << unknown_placeholder.status().message();
  EXPECT_NE(unknown_placeholder.status().message().find("{secret}"), std::string::npos);

  auto program_from_arg = ParseExecutorCatalog(
      "templates:\n  t:\n    argv: [\"{p}\"]\n    args: {p: {type: name}}\n", "bad.yaml", "/");
  ASSERT_FALSE(program_from_arg.ok());
  EXPECT_NE(program_from_arg.status().message().find("the program must be a fixed path"), std::string::npos)
      << program_from_arg.status().message();

  auto not_trainer = ParseExecutorCatalog(
      "templates:\n  t:\n    argv: [\"/bin/true\"]\n    trainer_fields: [nonsense]\n", "bad.yaml", "/");
  ASSERT_FALSE(not_trainer.ok());
  EXPECT_NE(not_trainer.status().message().find("nonsense is not a field of the native trainer"), std::string::npos);
}

TEST(ExecutorCatalogTest, TemplateFieldsReplaceTheTrainersChoices) {
  ExecutorCatalog catalog = Demo();
  const ExecutorTemplate& demo = *catalog.Find("demo");
  EXPECT_TRUE(demo.CheckField("compile_mode", "default").ok());
  EXPECT_FALSE(demo.CheckField("compile_mode", "jit").ok());
  // Trainer fields keep the trainer's own bounds.
  EXPECT_TRUE(demo.CheckField("seq_len", 16).ok());
  EXPECT_FALSE(demo.CheckField("seq_len", 1).ok());
  auto unknown = demo.CheckField("zero_stage", 2);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("not a field of command template demo"), std::string::npos);
}

TEST(ExecutorCatalogTest, SweepParserChecksCommandSweepsAgainstTheCatalog) {
  ExecutorCatalog catalog = Demo();
  const std::string good = Sweep("  executor: command\n  command: {template: demo, args: {extra: 2}}\n  model: tiny\n",
                                 "  compile_mode: {values: [eager, default]}\n", "{compile_mode: eager}");
  auto spec = ParseSweepText(good, "s.yaml", {}, &catalog);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->workload.command_template, "demo");

  std::string unknown_template = good;
  unknown_template.replace(unknown_template.find("template: demo"), 14, "template: rm");
  auto refused = ParseSweepText(unknown_template, "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("s.yaml:4"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("allowed: demo"), std::string::npos) << refused.status().message();

  std::string bad_field = good;
  bad_field.replace(bad_field.find("model: tiny"), 11, "zero_stage: 2");
  auto field = ParseSweepText(bad_field, "s.yaml", {}, &catalog);
  ASSERT_FALSE(field.ok());
  EXPECT_NE(field.status().message().find("s.yaml:5"), std::string::npos) << field.status().message();
  EXPECT_NE(field.status().message().find("not a field of command template demo"), std::string::npos);

  std::string bad_choice = good;
  bad_choice.replace(bad_choice.find("[eager, default]"), 16, "[eager, jit]");
  EXPECT_FALSE(ParseSweepText(bad_choice, "s.yaml", {}, &catalog).ok());

  std::string bad_arg = good;
  bad_arg.replace(bad_arg.find("extra: 2"), 8, "extra: 99");
  EXPECT_FALSE(ParseSweepText(bad_arg, "s.yaml", {}, &catalog).ok());
}

// UX review 2026-12-02, step 1: a template's name where the executor goes gets the form
// that works; an axis with a bad value gets its own error and no false follow-on one.
TEST(ExecutorCatalogTest, ATemplateNamedAsTheExecutorGetsTheFormThatWorks) {
  ExecutorCatalog catalog = Demo();
  auto refused = ParseSweepText(Sweep("  executor: demo\n  model: tiny\n", "  micro_batch: {values: [1, 2]}\n"),
                                "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "s.yaml:3:13: workload.executor: expected one of lora, command, got 'demo'; demo is a command "
                "template: write `executor: command` and `command: {template: demo}`"),
            std::string::npos)
      << refused.status().message();
}

TEST(ExecutorCatalogTest, AnAxisWithABadValueHasNoFollowOnBaselineError) {
  ExecutorCatalog catalog = Demo();
  auto refused = ParseSweepText(Sweep("  executor: command\n  command: {template: demo}\n  model: tiny\n",
                                      "  compile_mode: {values: [eager, jit]}\n", "{compile_mode: eager}"),
                                "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("jit"), std::string::npos) << message;
  EXPECT_EQ(message.find("not a parameter axis"), std::string::npos) << message;
}


// One sweep compares executors: an `executor` axis of lora (the native trainer) and
// template names. Every field is checked for every executor; each variant's config
// names its template (or none for lora) and never carries an "executor" field.
TEST(ExecutorCatalogTest, AnExecutorAxisComparesTheNativeTrainerAndTemplatesInOneSweep) {
  ExecutorCatalog catalog = Demo();
  const std::string sweep =
      Sweep("  model: tiny\n  seq_len: 32\n", "  executor: {values: [lora, demo]}\n  micro_batch: {values: [1, 2]}\n",
            "{executor: lora, micro_batch: 1}");
  auto spec = ParseSweepText(sweep, "s.yaml", {}, &catalog);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->ComparesExecutors());
  EXPECT_EQ(spec->workload.command_template, "");
  EXPECT_FALSE(ToJson(*spec)["workload"].contains("executor"));
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
  ASSERT_EQ(expanded->variants.size(), 4u);
  for (const Variant& v : expanded->variants) {
    EXPECT_FALSE(v.config.contains("executor")) << v.key;
    const bool native = v.key.find("executor=lora") != std::string::npos;
    EXPECT_EQ(v.config.Merged().value("command_template", std::string()), native ? "" : "demo") << v.key;
    EXPECT_EQ(v.counterpart_key, "executor=lora,micro_batch=1") << v.key;
  }
}

TEST(ExecutorCatalogTest, AnExecutorAxisChecksEveryFieldForEveryExecutorAndSaysWhich) {
  ExecutorCatalog catalog = Demo();
  // compile_mode: default is a torch.compile mode of demo, not a native trainer mode;
  // zero_stage is the native trainer's, not a field of demo.
  const std::string sweep = Sweep("  model: tiny\n  zero_stage: 2\n",
                                  "  executor: {values: [lora, demo]}\n  compile_mode: {values: [eager, default]}\n");
  auto refused = ParseSweepText(sweep, "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("s.yaml:4:3: workload.zero_stage: not a field of command template demo"), std::string::npos) << m;
  EXPECT_NE(m.find("(with executor demo)"), std::string::npos) << m;
  EXPECT_NE(m.find("s.yaml:7:"), std::string::npos) << m;
  EXPECT_NE(m.find("(with executor lora)"), std::string::npos) << m;
  EXPECT_LT(m.find("s.yaml:4:"), m.find("s.yaml:7:")) << "problems in file order: " << m;

  // Unknown executors are refused with the allowlist; "command" must name the template.
  for (const std::string bad : {"rm", "command"}) {
    std::string text = sweep;
    text.replace(text.find("[lora, demo]"), 12, "[lora, " + bad + "]");
    auto r = ParseSweepText(text, "s.yaml", {}, &catalog);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("s.yaml:6:"), std::string::npos) << r.status().message();
  }
  // The axis chooses the executor: the workload may not name one as well.
  std::string both = sweep;
  both.replace(both.find("  zero_stage: 2\n"), 15, "  executor: lora\n");
  both.replace(both.find("[eager, default]"), 16, "[eager]");
  auto conflict = ParseSweepText(both, "s.yaml", {}, &catalog);
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("parameters.executor chooses each variant's executor"),
            std::string::npos)
      << conflict.status().message();
}

}  // namespace
}  // namespace bakeoff::spec

namespace bakeoff::spec {
namespace {

// Issue 47: how a trial's values reach a command.
const char* kFlaggedCatalog =
    "python: /usr/bin/python3\n"
    "templates:\n"
    "  flagged:\n"
    "    argv: [\"{python}\", \"{dir}/train.py\", \"--mode\", \"{compile_mode}\"]\n"
    "    flags: true\n"
    "    env:\n"
    "      set: {TORCH_COMPILE: \"{compile}\", DEPTH: \"{depth}\"}\n"
    "    trainer_fields: [steps, warmup_steps, micro_batch, lr]\n"
    "    fields:\n"
    "      compile_mode: {choices: [eager, default], default: eager}\n"
    "      compile: {type: bool, default: false}\n"
    "      depth: {type: int, min: 1, max: 8}\n"
    "    args:\n"
    "      tag: {type: name, default: plain}\n";

ExecutorCatalog Flagged() {
  auto catalog = ParseExecutorCatalog(kFlaggedCatalog, "flagged.yaml", "/opt/f");
  EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
  return catalog.ok() ? *catalog : ExecutorCatalog{};
}

TEST(ExecutorCatalogTest, AFieldPlaceholderTakesTheTrialsValueOrTheFieldsDefault) {
  ExecutorCatalog catalog = Flagged();
  const ExecutorTemplate& t = *catalog.Find("flagged");
  EXPECT_TRUE(t.flags);
  ArgvContext context;
  context.python = catalog.python;
  context.dir = catalog.dir;
  context.fields = json{{"compile_mode", "default"}, {"compile", true}, {"depth", 2}};
  auto argv = RenderArgv(t, context, json::object());
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(*argv, (std::vector<std::string>{"/usr/bin/python3", "/opt/f/train.py", "--mode", "default"}));
  auto env = RenderTemplateString(t.env_set.at("TORCH_COMPILE"), t, context, json::object());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*env, "true");
  context.fields = json::object();
  auto defaulted = RenderArgv(t, context, json::object());
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->back(), "eager");
  // A field with no value and no default cannot be rendered: the error names it.
  auto missing = RenderTemplateString(t.env_set.at("DEPTH"), t, context, json::object());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("depth"), std::string::npos) << missing.status().message();
  // A value the template's spec refuses never reaches the process.
  context.fields = json{{"compile_mode", "--evil"}};
  EXPECT_FALSE(RenderArgv(t, context, json::object()).ok());
}

TEST(ExecutorCatalogTest, WithFlagsEachParameterNoPlaceholderTakesIsAppendedAsNameEqualsValue) {
  ExecutorCatalog catalog = Flagged();
  ExecutorTemplate t = *catalog.Find("flagged");
  ArgvContext context;
  context.python = catalog.python;
  context.dir = catalog.dir;
  context.fields = json{{"compile_mode", "default"}, {"lr", 0.001}, {"micro_batch", 4}, {"compile", false}};
  context.flag_fields = {"compile_mode", "lr", "micro_batch", "compile"};
  auto argv = RenderArgv(t, context, json::object());
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  // compile_mode (argv) and compile (env) are taken by placeholders: no flag for them.
  EXPECT_EQ(*argv, (std::vector<std::string>{"/usr/bin/python3", "/opt/f/train.py", "--mode", "default",
                                             "--lr=0.001", "--micro_batch=4"}));
  // Without flags: true the parameters reach the script through its config only.
  t.flags = false;
  auto plain = RenderArgv(t, context, json::object());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size(), 4u);
  // A parameter the template does not take is refused rather than passed on.
  t.flags = true;
  context.fields["sneaky"] = "x";
  context.flag_fields.push_back("sneaky");
  EXPECT_FALSE(RenderArgv(t, context, json::object()).ok());
}

TEST(ExecutorCatalogTest, AnAxisOverATemplateArgFillsItsPlaceholder) {
  ExecutorCatalog catalog = Demo();
  auto spec = ParseSweepText(Sweep("  executor: command\n  command: {template: demo}\n  model: tiny\n",
                                   "  extra: {values: [2, 5]}\n", "{extra: 2}"),
                             "s.yaml", {}, &catalog);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok());
  ArgvContext context;
  context.fields = expanded->variants[1].config.Merged();
  auto argv = RenderArgv(*catalog.Find("demo"), context, spec->workload.command_args);
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(argv->back(), "--steps=5");
}

TEST(ExecutorCatalogTest, ACommandSweepsConfigurationHoldsTheTemplatesDefaults) {
  ExecutorCatalog catalog = Demo();
  auto spec = ParseSweepText(Sweep("  executor: command\n  command: {template: demo}\n",
                                   "  micro_batch: {values: [1, 2]}\n", "{micro_batch: 1}"),
                             "s.yaml", {}, &catalog);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const json& defaults = spec->workload.defaults;
  EXPECT_EQ(defaults.value("compile_mode", ""), "eager");  // the template's own default
  EXPECT_EQ(defaults.value("model", ""), "tiny");          // a trainer field's default
  EXPECT_FALSE(defaults.contains("micro_batch")) << "an axis is the variant's, not a default";
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok());
  const json config = expanded->variants[0].config.Merged();
  EXPECT_EQ(config["command_parameters"], json::array({"micro_batch"}));
  // command.flags: false: no parameter is passed as a flag.
  auto quiet = ParseSweepText(Sweep("  executor: command\n  command: {template: demo, flags: false}\n",
                                    "  micro_batch: {values: [1, 2]}\n", "{micro_batch: 1}"),
                              "s.yaml", {}, &catalog);
  ASSERT_TRUE(quiet.ok()) << quiet.status().ToString();
  EXPECT_EQ(Expand(*quiet)->variants[0].config["command_parameters"], json::array());
}

TEST(ExecutorCatalogTest, NoCatalogFileMayDefineTheSweepCommandName) {
  auto bad = ParseExecutorCatalog(
      "templates:\n  sweep-command:\n    argv: [/bin/true]\n", "x.yaml", "/x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reserved"), std::string::npos) << bad.status().message();
  ExecutorCatalog catalog = Demo();
  EXPECT_FALSE(ParseSweepText(Sweep("  executor: command\n  command: {template: sweep-command}\n", ""), "s.yaml", {},
                              &catalog)
                   .ok());
}

const char* kOwnCommandSweep =
    "name: mine\n"
    "workload:\n"
    "  executor: command\n"
    "  command:\n"
    "    argv: [python3, train.py, \"--seed={seed}\"]\n"
    "    env: {TORCH_COMPILE: \"{compile}\", CACHE: \"{cache}/x\"}\n"
    "  seed: 7\n"
    "parameters:\n"
    "  compile: {values: [0, 1]}\n"
    "  lr: {values: [0.1]}\n"
    "baseline: {compile: 0}\n";

TEST(ExecutorCatalogTest, ASweepsOwnCommandParsesIntoATemplateOfItsOwn) {
  ExecutorCatalog catalog = Demo();  // kCheck, as bakeoff validate
  auto spec = ParseSweepText(kOwnCommandSweep, "s.yaml", {}, &catalog);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->workload.own_command.has_value());
  const ExecutorTemplate& own = *spec->workload.own_command;
  EXPECT_EQ(own.name, kSweepCommandName);
  EXPECT_TRUE(own.from_sweep);
  EXPECT_TRUE(own.flags);
  EXPECT_FALSE(own.turns);
  EXPECT_EQ(spec->workload.command_template, kSweepCommandName);
  // bakeoff validate says where it runs.
  ASSERT_FALSE(spec->warnings.empty());
  EXPECT_NE(spec->warnings.back().find("`bakeoff local` runs it"), std::string::npos) << spec->warnings.back();
  // steps and warmup_steps are in the configuration even though the sweep omits them.
  EXPECT_TRUE(spec->workload.defaults.contains("warmup_steps"));
  EXPECT_TRUE(spec->workload.defaults.contains("steps"));
  auto expanded = Expand(*spec);
  ASSERT_TRUE(expanded.ok());
  const Variant& v = expanded->variants[1];
  EXPECT_EQ(v.config["command_template"], kSweepCommandName);
  ArgvContext context;
  context.cache = "/c";
  context.fields = v.config.Merged();
  context.flag_fields = {"compile", "lr"};
  auto argv = RenderArgv(own, context, json::object());
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(*argv, (std::vector<std::string>{"python3", "train.py", "--seed=7", "--lr=0.1"}));
  auto env = RenderTemplateString(own.env_set.at("TORCH_COMPILE"), own, context, json::object());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*env, "1");
  // Stored and read back with the spec.
  auto stored = SweepSpecFromJson(ToJson(*spec));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_TRUE(stored->workload.own_command.has_value());
  EXPECT_EQ(stored->workload.own_command->argv, own.argv);
  EXPECT_EQ(stored->workload.own_command->env_set, own.env_set);
}

TEST(ExecutorCatalogTest, ACoordinatorRefusesASweepsOwnCommandWithWhatToDo) {
  ExecutorCatalog catalog = Demo();
  catalog.own_commands = ExecutorCatalog::OwnCommands::kRefuse;
  auto refused = ParseSweepText(kOwnCommandSweep, "s.yaml", {}, &catalog);
  ASSERT_FALSE(refused.ok());
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("s.yaml:5:"), std::string::npos) << m;
  EXPECT_NE(m.find("never a command written in a sweep"), std::string::npos) << m;
  EXPECT_NE(m.find("bakeoff local"), std::string::npos) << m;
  EXPECT_NE(m.find("demo"), std::string::npos) << m;  // the templates it does run
}

TEST(ExecutorCatalogTest, AnOwnCommandsPlaceholderMustNameAFieldAndLockstepNeedsTurns) {
  std::string typo = kOwnCommandSweep;
  typo.replace(typo.find("{compile}"), 9, "{compil}");
  auto refused = ParseSweepText(typo, "s.yaml", {}, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("did you mean compile?"), std::string::npos) << refused.status().message();
  auto lockstep = ParseSweepText(std::string(kOwnCommandSweep) + "order: lockstep\n", "s.yaml", {}, nullptr);
  ASSERT_FALSE(lockstep.ok());
  EXPECT_NE(lockstep.status().message().find("turns: true"), std::string::npos) << lockstep.status().message();
  std::string turns = std::string(kOwnCommandSweep) + "order: lockstep\n";
  turns.replace(turns.find("    env:"), 0, "    turns: true\n");
  EXPECT_TRUE(ParseSweepText(turns, "s.yaml", {}, nullptr).ok());
  // env and turns belong to one's own command; a template's are its operator's.
  ExecutorCatalog catalog = Demo();
  auto env = ParseSweepText(Sweep("  executor: command\n  command: {template: demo, env: {X: \"1\"}}\n", ""),
                            "s.yaml", {}, &catalog);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("executors file"), std::string::npos) << env.status().message();
}

}  // namespace
}  // namespace bakeoff::spec
