// bakeoff-trainer as a process: the event stream's fields, each bad configuration's
// named error and exit code, unsupported settings, and out of memory under a host cap.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct ProcessResult {
  int exit_code = -1;
  std::vector<nlohmann::json> events;
  std::vector<std::string> unparsed;
};

// Runs the trainer with `args` (under a 300 s timeout), stdout captured, stderr to
// `stderr_path` (dropped by default).
ProcessResult RunTrainer(const std::string& args, const std::string& stderr_path = "/dev/null") {
  const std::string command = std::string("timeout 300 ") + BAKEOFF_BINARY_DIR + "/bakeoff-trainer " +
                              args + " 2>" + stderr_path;
  ProcessResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::string line;
  std::array<char, 65536> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    line += buffer.data();
    if (!line.empty() && line.back() == '\n') {
      auto json = nlohmann::json::parse(line, nullptr, false);
      if (json.is_discarded()) {
        result.unparsed.push_back(line);
      } else {
        result.events.push_back(json);
      }
      line.clear();
    }
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

const char* kFast = "--seq-len 16 --micro-batch 2 --steps 3 --warmup-steps 1 --threads 1";

TEST(TrainerProcessTest, EveryEventLineParsesAndCarriesTheDocumentedFields) {
  auto r = RunTrainer(kFast);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.unparsed.empty());
  ASSERT_EQ(r.events.size(), 1u + 4u + 1u);
  const auto& ready = r.events.front();
  EXPECT_EQ(ready["event"], "ready");
  for (const char* f : {"config", "model", "threads", "blas", "torch_version", "rank", "world_size"}) {
    EXPECT_TRUE(ready.contains(f)) << f;
  }
  EXPECT_EQ(ready["config"]["dims"]["dim"], 64);
  // The venv's LibTorch (PyTorch 2.7.1 from PyPI) carries MKL inside libtorch_cpu; a
  // reference BLAS here would make every fp32 step ~30x slower.
  EXPECT_NE(ready["blas"].get<std::string>().find("mkl"), std::string::npos)
      << "the wheel's LibTorch links MKL: " << ready["blas"];
  EXPECT_EQ(ready["torch_version"].get<std::string>().rfind("2.", 0), 0u)
      << "the project's PyTorch 2.x (scripts/setup): " << ready["torch_version"];
  for (size_t i = 1; i <= 4; ++i) {
    const auto& step = r.events[i];
    EXPECT_EQ(step["event"], "step");
    EXPECT_EQ(step["step"], i - 1);
    EXPECT_EQ(step["phase"], i == 1 ? "warmup" : "measure");
    EXPECT_EQ(step["tokens"], 32);
    for (const char* f : {"step_s", "loss", "peak_mem_bytes", "rss_bytes", "comm_s", "comm_bytes"}) {
      EXPECT_TRUE(step.contains(f)) << f;
    }
    EXPECT_GT(step["step_s"].get<double>(), 0);
  }
  const auto& summary = r.events.back();
  EXPECT_EQ(summary["event"], "summary");
  for (const char* f : {"startup_s", "first_step_s", "warmup_s", "step_s_median", "step_s_p10",
                        "step_s_p90", "tokens_per_s", "flops_per_s", "peak_mem_bytes", "frozen_bytes",
                        "trainable_bytes", "grad_bytes", "optimizer_bytes", "applied"}) {
    EXPECT_TRUE(summary.contains(f)) << f;
  }
  EXPECT_GT(summary["tokens_per_s"].get<double>(), 0);
  EXPECT_LE(summary["step_s_p10"].get<double>(), summary["step_s_median"].get<double>());
  EXPECT_LE(summary["step_s_median"].get<double>(), summary["step_s_p90"].get<double>());
  EXPECT_EQ(summary["applied"]["compile_mode"], "eager");
  EXPECT_EQ(summary["applied"]["graphs"], 0);
  // AdamW keeps two fp32 moments per trainable parameter.
  EXPECT_EQ(summary["optimizer_bytes"], 2 * summary["trainable_bytes"].get<int64_t>());
}

TEST(TrainerProcessTest, EachBadConfigurationGetsItsNamedErrorAndExitCode2) {
  struct Case {
    std::string args;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"--micro-bach 2", "micro_bach: unknown field (did you mean micro_batch?)"},
      {"--precision fp8", "precision: expected one of fp32, bf16"},
      {"--host-allocator tcmalloc", "host_allocator: expected one of retain, system"},
      {"--model huge", "model: expected a preset (tiny, small, llama-7b, llama-13b) or {dim, layers, heads, kv_heads, ffn_dim, vocab}, got \"huge\""},
      {"--world-size 2", "store: world_size > 1 needs the rendezvous address"},
      {"--config /nonexistent.json", "--config: cannot open \"/nonexistent.json\""},
      {"--steps", "--steps: missing value"},
  };
  for (const auto& c : cases) {
    auto r = RunTrainer(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    ASSERT_EQ(r.events.size(), 1u) << c.args;
    EXPECT_EQ(r.events[0]["event"], "error");
    EXPECT_EQ(r.events[0]["kind"], "failed");
    EXPECT_NE(r.events[0]["message"].get<std::string>().find(c.expected), std::string::npos)
        << r.events[0]["message"];
  }
}

// Minor page faults of the trainer runs waited for since `before` (children's usage).
int64_t MinorFaultsSince(const rusage& before) {
  rusage now{};
  getrusage(RUSAGE_CHILDREN, &now);
  return now.ru_minflt - before.ru_minflt;
}

// Page faults a measured step costs: the difference between a 12-step and a 2-step run.
int64_t FaultsPerStep(const std::string& host_allocator, std::string* applied) {
  const std::string args = "--seq-len 128 --micro-batch 4 --warmup-steps 1 --threads 1 --host-allocator " +
                           host_allocator + " --steps ";
  rusage start{};
  getrusage(RUSAGE_CHILDREN, &start);
  auto short_run = RunTrainer(args + "2");
  const int64_t short_faults = MinorFaultsSince(start);
  getrusage(RUSAGE_CHILDREN, &start);
  auto long_run = RunTrainer(args + "12");
  const int64_t long_faults = MinorFaultsSince(start);
  EXPECT_EQ(short_run.exit_code, 0);
  EXPECT_EQ(long_run.exit_code, 0);
  if (!long_run.events.empty()) *applied = long_run.events.back()["applied"]["host_allocator"];
  return (long_faults - short_faults) / 10;
}

TEST(TrainerProcessTest, RetainingHostAllocatorStopsPageFaultingEveryStep) {
  std::string retain_applied, system_applied;
  const int64_t retain = FaultsPerStep("retain", &retain_applied);
  const int64_t system = FaultsPerStep("system", &system_applied);
  EXPECT_EQ(retain_applied.rfind("retain", 0), 0u) << retain_applied;
  EXPECT_EQ(system_applied.rfind("system", 0), 0u) << system_applied;
  // glibc's defaults give every step's large activations back to the kernel.
  EXPECT_GT(system, 100) << "faults a step with the C library's defaults";
  EXPECT_LT(retain * 4, system) << "retain: " << retain << " a step, system: " << system;
}

TEST(TrainerProcessTest, ConfigFileThenFlagsOverride) {
  const std::string path = ::testing::TempDir() + "/trainer_config.json";
  std::ofstream(path) << R"({"seq_len": 16, "micro_batch": 3, "steps": 2, "warmup_steps": 0, "threads": 1})";
  auto r = RunTrainer("--config " + path + " --micro-batch 1");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.events.front()["config"]["micro_batch"], 1);
  EXPECT_EQ(r.events.front()["config"]["seq_len"], 16);
}

TEST(TrainerProcessTest, DynamicShapesVaryTheLengthPerStepAndJitTracesEachShape) {
  // seq 16, 8 steps of 2 micro-steps: lengths drawn from [8, 16].
  auto fixed = RunTrainer("--seq-len 16 --micro-batch 2 --grad-accum 2 --steps 6 --warmup-steps 2 --threads 1 "
                          "--compile-mode jit");
  auto dynamic = RunTrainer("--seq-len 16 --micro-batch 2 --grad-accum 2 --steps 6 --warmup-steps 2 --threads 1 "
                            "--compile-mode jit --dynamic-shapes true");
  ASSERT_EQ(fixed.exit_code, 0);
  ASSERT_EQ(dynamic.exit_code, 0);
  std::set<int64_t> step_tokens;
  int64_t measured_tokens = 0, measured_steps = 0;
  for (const auto& e : dynamic.events) {
    if (e["event"] != "step") continue;
    const int64_t tokens = e["tokens"].get<int64_t>();
    EXPECT_GE(tokens, 2 * 2 * 8);
    EXPECT_LE(tokens, 2 * 2 * 16);
    step_tokens.insert(tokens);
    if (e["phase"] == "measure") {
      measured_tokens += tokens;
      ++measured_steps;
    }
  }
  EXPECT_GT(step_tokens.size(), 2u);
  const auto& fixed_summary = fixed.events.back();
  const auto& summary = dynamic.events.back();
  ASSERT_EQ(summary["event"], "summary");
  EXPECT_EQ(summary["applied"]["dynamic_shapes"], true);
  EXPECT_EQ(fixed_summary["applied"]["seq_lengths"], 1);
  EXPECT_GT(summary["applied"]["seq_lengths"].get<int64_t>(), 2);
  // A traced graph is specialised to its input shapes: one set per distinct length.
  EXPECT_GT(summary["applied"]["graphs"].get<int64_t>(), fixed_summary["applied"]["graphs"].get<int64_t>());
  EXPECT_NEAR(summary["tokens_per_step"].get<double>(),
              static_cast<double>(measured_tokens) / static_cast<double>(measured_steps), 1e-9);
  EXPECT_NEAR(summary["tokens_per_s"].get<double>(),
              summary["tokens_per_step"].get<double>() / summary["step_s_median"].get<double>(), 1e-6);
}

TEST(TrainerProcessTest, CudaGraphsAndOffloadOnCpuAreUnsupported) {
  for (const std::string args : {"--compile-mode cudagraph", "--compile-mode jit+cudagraph",
                                 "--offload optimizer"}) {
    auto r = RunTrainer(std::string(kFast) + " " + args);
    EXPECT_EQ(r.exit_code, 4) << args;
    ASSERT_FALSE(r.events.empty());
    EXPECT_EQ(r.events.back()["kind"], "unsupported") << args;
  }
}

TEST(TrainerProcessTest, RankThatCannotBindFailsAtOnceWithTheCauseNotABacktrace) {
  // 192.0.2.1 (TEST-NET-1) is no address of this host: Gloo cannot bind there. The error
  // comes before the rendezvous (no rank 0 runs), with the cause only; the backtrace
  // goes to stderr.
  const std::string log = ::testing::TempDir() + "/cannot-bind.log";
  auto r = RunTrainer(std::string(kFast) + " --world-size 2 --rank 1 --store 127.0.0.1:1" +
                      " --rendezvous-timeout-s 300 --rank-address 192.0.2.1", log);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_FALSE(r.events.empty());
  const auto& error = r.events.back();
  EXPECT_EQ(error["event"], "error");
  const std::string message = error["message"];
  EXPECT_NE(message.find("cannot bind its Gloo collectives to address 192.0.2.1"), std::string::npos) << message;
  EXPECT_NE(message.find("Cannot resolve 192.0.2.1 to a (local) address"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << message;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Exception raised from createDeviceForHostname"), std::string::npos) << text;
}

// The trainer as the worker runs it (--data-root, --output-dir): a name that leaves its
// root is refused before anything is read or written, and no message carries a file's
// bytes (a token file check once leaked "AWS_" from a credentials file).
TEST(TrainerProcessTest, SweepNamedFilesStayInsideTheLaunchersRoots) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("bakeoff-roots-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "out");
  fs::create_directories(dir / "outside");
  std::ofstream(dir / "outside" / "credentials") << "AWS_SECRET_ACCESS_KEY=abcdefgh";
  fs::create_symlink(dir / "outside" / "credentials", dir / "data" / "tokens.bin");
  fs::create_symlink(dir / "outside" / "credentials", dir / "out" / "adapters.bin");
  const std::string roots = " --data-root " + (dir / "data").string() + " --output-dir " + (dir / "out").string();
  const std::string tiny = " --steps 1 --warmup-steps 0 --seq-len 8";

  // Refused by the field table itself (exit 2), as `bakeoff validate` refuses them.
  for (const std::string bad : {"--dataset /etc/passwd", "--dataset ../outside/credentials",
                                "--adapters-out /tmp/bakeoff-roots-probe.bin", "--adapters-out ../outside/x"}) {
    auto r = RunTrainer(bad + roots + tiny);
    EXPECT_EQ(r.exit_code, 2) << bad;
    ASSERT_FALSE(r.events.empty()) << bad;
    EXPECT_NE(r.events[0]["message"].get<std::string>().find("(relative, no '..')"), std::string::npos)
        << r.events[0]["message"];
  }
  // A link inside the data root that leads out of it: refused, and the bytes stay unread.
  auto leak = RunTrainer("--dataset tokens.bin --model '{\"dim\":16,\"layers\":1,\"heads\":2,\"ffn_dim\":8,\"vocab\":1}'" +
                         roots + tiny);
  EXPECT_EQ(leak.exit_code, 1);
  ASSERT_FALSE(leak.events.empty());
  const std::string message = leak.events.back()["message"];
  EXPECT_NE(message.find("leads out of the data root"), std::string::npos) << message;
  EXPECT_EQ(message.find("AWS"), std::string::npos) << message;
  EXPECT_EQ(message.find("1599297345"), std::string::npos) << message;
  // An output through a link is refused; the link's target is untouched.
  auto write = RunTrainer("--adapters-out adapters.bin" + roots + tiny);
  EXPECT_EQ(write.exit_code, 1);
  std::ifstream in(dir / "outside" / "credentials");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "AWS_SECRET_ACCESS_KEY=abcdefgh");
  EXPECT_FALSE(fs::exists("/tmp/bakeoff-roots-probe.bin"));
  // Inside the root, both work.
  fs::remove(dir / "out" / "adapters.bin");
  auto good = RunTrainer("--adapters-out run/adapters.bin" + roots + tiny);
  EXPECT_EQ(good.exit_code, 0);
  EXPECT_GT(fs::file_size(dir / "out" / "run" / "adapters.bin"), 0u);
  fs::remove_all(dir);
}

TEST(TrainerProcessTest, AllocationBeyondTheHostMemoryCapEndsAsOom) {
  // 6 GiB of fp32 embedding and head cannot fit a 3 GiB address-space cap.
  auto r = RunTrainer(std::string(kFast) +
                      " --model '{\"dim\":2048,\"layers\":1,\"heads\":16,\"ffn_dim\":64,\"vocab\":400000}'"
                      " --max-host-memory 3221225472");
  EXPECT_EQ(r.exit_code, 3);
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["event"], "error");
  EXPECT_EQ(r.events.back()["kind"], "oom") << r.events.back()["message"];
}

}  // namespace
