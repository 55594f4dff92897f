// A stand-in for bakeoff-trainer in worker tests: same flags, same event stream
// (docs/trainer.md), with the behaviour picked by the config field "fake_behavior":
//   succeed (default) | error_oom | error_failed | error_html (a reason holding markup) | error_backtrace (a LibTorch-style
//   message: cause, then "Exception raised from" and frames; also on stderr) |
//   sigkill_self | exit_code (uses "fake_exit_code") | hang | hang_with_child | garbage |
//   slow_steps | rank1_fails | flood_stderr (prints "fake_stderr_bytes" of numbered lines to
//   stderr between a first and a last line, then fails) | child_keeps_stderr (succeeds,
//   leaving a silent child that closed its stdout and holds its stderr open) |
//   child_keeps_events (succeeds, leaving a child in a session of its own that holds
//   its stdout, the events pipe, open)
//   no_turns (ignores its lockstep turn channel) | hang_in_turn (hangs holding its second
//   measured turn) | fail_midway (fails after half its measured steps) | big_events
//   (first writes "fake_event_count" events of "fake_event_bytes" each, then succeeds)
// "warmup_steps", "steps" and "fake_step_ms" shape the run. It never reads the network.
// It takes lockstep turns as the native trainer does (experiments/trainer/turn_client.h);
// with FAKE_TRAINER_INTERVALS=FILE each rank appends "trial rank phase start_ns end_ns"
// of every step it computed (steady clock, comparable across processes on one host).
// With FAKE_TRAINER_PROBE_DIRS=1 it lists the bakeoff-probe-* files it sees in /dev/shm
// and /tmp (summary "probes_seen"), then leaves one of its own in each.
// Through a sweep (whose fields must be trainer fields) the behaviour comes from the
// environment instead: FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH="1=hang,2=error_oom" picks
// it by the config's micro_batch (the worker passes its environment to its ranks).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include <fcntl.h>

#include <filesystem>

#include "experiments/trainer/turn_client.h"
#include "worker/core_partition.h"

// The CPUs this process may run on (its affinity, as the worker reads its own), as a
// JSON array.
nlohmann::json Affinity() { return nlohmann::json(bakeoff::worker::AllowedCpus()); }

int main(int argc, char** argv) {
  std::string config_path;
  int rank = 0;
  int world_size = 1;
  std::string store;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--config") config_path = argv[i + 1];
    else if (flag == "--rank") rank = std::stoi(argv[i + 1]);
    else if (flag == "--world-size") world_size = std::stoi(argv[i + 1]);
    else if (flag == "--store") store = argv[i + 1];
  }
  std::ifstream in(config_path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded()) {
    std::cout << R"({"event":"error","kind":"failed","message":"bad config"})" << std::endl;
    return 2;
  }
  std::string behavior = config.value("fake_behavior", std::string("succeed"));
  if (const char* by_batch = getenv("FAKE_TRAINER_BEHAVIOR_BY_MICRO_BATCH")) {
    std::stringstream entries(by_batch);
    const std::string key = std::to_string(config.value("micro_batch", 0)) + "=";
    for (std::string entry; std::getline(entries, entry, ',');) {
      if (entry.rfind(key, 0) == 0) behavior = entry.substr(key.size());
    }
  }
  const int steps = config.value("steps", 3);
  const int step_ms = config.value("fake_step_ms", 5);
  auto emit = [](const nlohmann::json& j) { std::cout << j.dump() << std::endl; };

  const char* env_rank = getenv("RANK");
  const char* cuda_visible = getenv("CUDA_VISIBLE_DEVICES");
  const bool on_cuda = cuda_visible && *cuda_visible;
  auto env_or_empty = [](const char* name) { return std::string(getenv(name) ? getenv(name) : ""); };
  emit({{"event", "ready"}, {"rank", rank}, {"world_size", world_size}, {"store", store},
        {"env_rank", env_rank ? env_rank : ""}, {"pid", getpid()}, {"pgid", getpgid(0)},
        {"env_master_addr", env_or_empty("MASTER_ADDR")}, {"env_rank_addr", env_or_empty("BAKEOFF_RANK_ADDR")},
        {"env_rank_iface", env_or_empty("BAKEOFF_RANK_IFACE")},
        {"env_token_present", getenv("BAKEOFF_TOKEN") != nullptr},
        {"env_nccl_socket_ifname", env_or_empty("NCCL_SOCKET_IFNAME")},
        {"env_rank_cpus", env_or_empty("BAKEOFF_RANK_CPUS")}, {"affinity", Affinity()}, {"config", config}});
  if (behavior == "garbage") {
    std::cout << "this is not json\n{\"no_event_field\":1}\n[1,2]\n" << std::flush;
  }
  if (behavior == "big_events") {  // "fake_event_count" lines of about "fake_event_bytes" each
    const long long count = config.value("fake_event_count", 6LL);
    const std::size_t bytes = config.value("fake_event_bytes", std::size_t{900'000});
    for (long long i = 0; i < count; ++i) emit({{"event", "note"}, {"i", i}, {"pad", std::string(bytes, 'x')}});
  }
  if (behavior == "hang_with_child") {
    pid_t child = fork();
    if (child == 0) {
      execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
      _exit(1);
    }
    emit({{"event", "child"}, {"pid", child}});
  }
  // A child that outlives the trainer holding stderr only, or stdout (the events) in a
  // session of its own.
  if (behavior == "child_keeps_stderr" || behavior == "child_keeps_events") {
    std::cout << std::flush;
    pid_t child = fork();
    if (child == 0) {
      if (behavior == "child_keeps_stderr") {
        close(STDOUT_FILENO);
        fprintf(stderr, "the child holds stderr\n");
      } else {
        setsid();
      }
      std::this_thread::sleep_for(std::chrono::seconds(300));  // silent, unless killed
      _exit(0);
    }
    emit({{"event", "child"}, {"pid", child}});
  }
  if (behavior == "hang" || behavior == "hang_with_child") {
    std::this_thread::sleep_for(std::chrono::seconds(300));
    return 0;
  }
  if (behavior == "rank1_fails" && rank == 1) {
    emit({{"event", "error"}, {"kind", "failed"}, {"message", "rank 1 broke"}});
    return 1;
  }
  if (behavior == "rank1_fails" && rank != 1) {
    std::this_thread::sleep_for(std::chrono::seconds(300));  // blocked "in a collective"
    return 0;
  }
  nlohmann::json probes_seen = nlohmann::json::array();
  if (getenv("FAKE_TRAINER_PROBE_DIRS") != nullptr) {
    const std::string mine = "bakeoff-probe-" + std::string(getenv("BAKEOFF_TRIAL_ID") ? getenv("BAKEOFF_TRIAL_ID") : "?") +
                             "-" + std::to_string(rank);
    for (const char* dir : {"/dev/shm", "/tmp"}) {
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("bakeoff-probe-", 0) == 0) probes_seen.push_back(std::string(dir) + "/" + name);
      }
      std::ofstream(std::string(dir) + "/" + mine) << "left by a rank\n";
    }
  }
  const int warmup_steps = config.value("warmup_steps", 0);
  bakeoff::trainer::TurnClient turns = behavior == "no_turns" ? bakeoff::trainer::TurnClient(-1)
                                                              : bakeoff::trainer::TurnClient::FromEnvironment();
  const char* intervals_path = getenv("FAKE_TRAINER_INTERVALS");
  const std::string trial = getenv("BAKEOFF_TRIAL_ID") ? getenv("BAKEOFF_TRIAL_ID") : "?";
  auto compute = [&](const char* phase) {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    const auto end = std::chrono::steady_clock::now();
    if (intervals_path != nullptr) {
      const std::string line = trial + " " + std::to_string(rank) + " " + phase + " " +
                               std::to_string(start.time_since_epoch().count()) + " " +
                               std::to_string(end.time_since_epoch().count()) + "\n";
      const int fd = open(intervals_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) {
        (void)!write(fd, line.data(), line.size());
        close(fd);
      }
    }
  };
  if (warmup_steps > 0) turns.Acquire(/*warmup=*/true);
  for (int s = 0; s < warmup_steps; ++s) {
    compute("warmup");
    emit({{"event", "step"}, {"step", s}, {"phase", "warmup"}, {"step_s", step_ms / 1000.0},
          {"tokens", 128 * world_size}, {"loss", 6.0}});
  }
  for (int s = 0; s < steps; ++s) {
    const auto turn = turns.Acquire(/*warmup=*/false);
    if (behavior == "hang_in_turn" && s == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(300));
      return 0;
    }
    if (behavior == "fail_midway" && s == steps / 2) {
      emit({{"event", "error"}, {"kind", "failed"}, {"message", "failed midway (fake)"}});
      return 1;
    }
    compute("measure");
    turns.Release();
    nlohmann::json step = {{"event", "step"}, {"step", s}, {"phase", "measure"}, {"step_s", step_ms / 1000.0},
                           {"tokens", 128 * world_size}, {"loss", 5.0 - 0.1 * s},
                           {"peak_mem_bytes", 1000 + rank}, {"rss_bytes", 900 + rank}};
    if (turn) step["turn"] = *turn;
    // Figures a CUDA rank and a distributed step report (docs/trainer.md), so that
    // metrics tests see every per-rank series without a GPU.
    if (on_cuda) {
      step["device_allocated_bytes"] = 800 + rank;
      step["device_reserved_peak_bytes"] = 1200 + rank;
    }
    if (world_size > 1) {
      step["comm_s"] = step_ms / 4000.0;
      step["comm_bytes"] = 4096;
    }
    emit(step);
  }
  if (behavior == "error_oom") {
    emit({{"event", "error"}, {"kind", "oom"}, {"message", "CUDA out of memory (fake)"}});
    return 3;
  }
  if (behavior == "error_html") {  // the web page's tests: a reason that is markup and script
    emit({{"event", "error"}, {"kind", "failed"},
          {"message", "<img src=x onerror=\"window.__xss=3\"><script>window.__xss=4</script> <b>reason-bold</b> broke (fake)"}});
    return 1;
  }
  if (behavior == "error_failed") {
    emit({{"event", "error"}, {"kind", "failed"}, {"message", "workload broke (fake)"}});
    return 1;
  }
  if (behavior == "error_backtrace") {
    const std::string message =
        "unavailable: rank " + std::to_string(rank) + " cannot bind: Cannot resolve 10.0.0.9 to a (local) address\n"
        "Exception raised from createDeviceForHostname at ProcessGroupGloo.cpp:667 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9e\n"
        "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int) + 0xfc\n";
    std::cerr << message << std::flush;
    emit({{"event", "error"}, {"kind", "failed"}, {"message", message}});
    return 1;
  }
  if (behavior == "flood_stderr") {
    std::cerr << "FIRST LINE: the rank's configuration\n";
    const long long total = config.value("fake_stderr_bytes", 1LL << 20);
    char line[64];
    for (long long written = 0, i = 0; written < total; ++i) {
      const int n = snprintf(line, sizeof(line), "line %012lld of a rank that prints too much\n", i);
      std::cerr.write(line, n);
      written += n;
    }
    std::cerr << "LAST LINE: the error a user needs\n" << std::flush;
    emit({{"event", "error"}, {"kind", "failed"}, {"message", "printed too much (fake)"}});
    return 1;
  }
  if (behavior == "sigkill_self") {
    kill(getpid(), SIGKILL);
  }
  turns.End();
  if (behavior == "exit_code") return config.value("fake_exit_code", 1);
  emit({{"event", "summary"}, {"startup_s", 0.01}, {"first_step_s", step_ms / 1000.0},
        {"warmup_s", 0.0}, {"step_s_median", step_ms / 1000.0}, {"step_s_p10", step_ms / 1000.0},
        {"step_s_p90", step_ms / 1000.0}, {"tokens_per_s", 128.0 * world_size / (step_ms / 1000.0)},
        {"peak_mem_bytes", 1000 + rank}, {"fake", true}, {"probes_seen", probes_seen}});
  return 0;
}
