#include "worker/trial_runner.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/frame_connection.h"
#include "protocol/token.h"
#include "protocol/trainer_event.h"
#include "worker/rank_process.h"

namespace bakeoff::worker {
namespace asio = boost::asio;
using boost::system::error_code;
using protocol::Outcome;

namespace {

// Calls `take(data, size)` with what `pipe` holds now, at most 1 MiB, without waiting for
// a writer: after a rank ended, a descendant that inherited the pipe may go on writing.
template <typename Take>
void TakeWhatThePipeHolds(asio::posix::stream_descriptor& pipe, std::vector<char>& chunk, Take take) {
  error_code ec;
  pipe.non_blocking(true, ec);  // else read_some would wait for a writer
  for (std::size_t taken = 0; !ec && taken < (1u << 20);) {
    const std::size_t m = pipe.read_some(asio::buffer(chunk), ec);
    if (m > 0) take(chunk.data(), m);
    taken += m;
    if (m == 0) break;
  }
}

// Whether a TCP listener could bind `port` on every IPv4 address now, as rank 0's store
// does (SO_REUSEADDR, so a port in TIME_WAIT counts as free); "" when free, else why not.
std::string StorePortBusy(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";  // cannot tell: let the store try
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string busy;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) busy = std::strerror(errno);
  close(fd);
  return busy;
}

// An event the worker writes itself (started, the simulated workload's), read into its
// type as a trainer's line is. It always reads: anything else is a bug in this file.
protocol::TrainerEvent OwnEvent(nlohmann::json body, const logging::Logger& log) {
  auto event = protocol::TrainerEventFromJson(std::move(body));
  if (!event.ok()) {
    log.Error("BUG: an event of its own does not read", {{"error", event.status().ToString()}});
    std::abort();
  }
  return std::move(event).value();
}

// The last kStderrTailLines non-empty lines of a rank's (closed) log, printable
// characters only, joined by " | " and cut to kStderrTailBytes: "" without a log.
std::string StderrTailOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      if (!line.empty()) lines.push_back(std::move(line));
      line.clear();
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      line += c;
    }
  }
  if (!line.empty()) lines.push_back(std::move(line));
  std::string tail;
  const std::size_t first = lines.size() > static_cast<std::size_t>(kStderrTailLines)
                                ? lines.size() - static_cast<std::size_t>(kStderrTailLines)
                                : 0;
  for (std::size_t i = first; i < lines.size(); ++i) tail += (tail.empty() ? "" : " | ") + lines[i];
  if (tail.size() > kStderrTailBytes) tail = "..." + tail.substr(tail.size() - kStderrTailBytes);
  return tail;
}

// The wall time of a `started` event's "at": seconds since the Unix epoch.
double WallSeconds(const Clock& clock) {
  return std::chrono::duration<double>(clock.WallNow().time_since_epoch()).count();
}

}  // namespace

TrialRunner::TrialRunner(asio::any_io_executor executor, const WorkerConfig& config,
                         protocol::AssignMessage assign, Callbacks callbacks, const Env& env)
    : executor_(std::move(executor)),
      config_(config),
      clock_(env.clock()),
      log_(env, "worker"),
      assign_(std::move(assign)),
      callbacks_(std::move(callbacks)),
      timeout_timer_(executor_) {}

TrialRunner::~TrialRunner() {
  // Never leave rank processes behind, whatever path destroyed the runner.
  if (!finished_) KillAll();
}

void TrialRunner::Start() {
  if (!WriteTrialFiles()) return;
  for (const auto& slot : assign_.ranks) {
    Rank rank;
    rank.rank = slot.rank;
    rank.local_rank = slot.local_rank;
    rank.end.rank = slot.rank;
    rank.end.log_path = trial_dir_ + "/rank-" + std::to_string(slot.rank) + ".log";
    ranks_.push_back(std::move(rank));
  }
  ArmTimeout();
  if (config_.simulate) {
    // `started` now, as a real rank's is once its process is spawned; the steps on timers.
    EmitSimulated({{"event", "started"}, {"pid", 0}, {"at", WallSeconds(clock_)}});
    auto self = shared_from_this();
    asio::co_spawn(executor_, [self]() { return self->Simulate(); }, asio::detached);
    return;
  }
  const spec::ExecutorTemplate* command = nullptr;
  if (!ResolveCommand(&command) || !StorePortIsFree()) return;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (!SpawnRank(i, command)) break;
  }
  JoinLockstepGroup();
  auto self = shared_from_this();
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].pid <= 0) continue;
    asio::co_spawn(executor_, [self, i]() { return self->SuperviseRank(i); }, asio::detached);
    asio::co_spawn(executor_, [self, i]() { return self->DrainLog(i); }, asio::detached);
    if (ranks_[i].turn) asio::co_spawn(executor_, [self, i]() { return self->ReadTurns(i); }, asio::detached);
  }
  MaybeFinish();  // when no rank could start at all
}

bool TrialRunner::WriteTrialFiles() {
  const auto& a = assign_.attempt;
  trial_dir_ = (std::filesystem::path(config_.work_dir) /
                ("trial-" + std::to_string(a.trial_id) + "-attempt-" + std::to_string(a.attempt)))
                   .string();
  std::error_code fs_error;
  config_path_ = trial_dir_ + "/config.json";
  output_dir_ = trial_dir_ + "/outputs";
  // A simulated attempt runs nothing that reads files: it writes none (scale benchmarks
  // run thousands of them a second).
  if (!config_.simulate) {
    std::filesystem::create_directories(trial_dir_, fs_error);
    std::ofstream out(config_path_);
    out << assign_.config.dump(2) << "\n";
    if (fs_error || !out) {
      Finish(Outcome::kFailed, "worker could not write the trial config to " + config_path_);
      return false;
    }
  }
  // Sweep-named files stay inside the worker's roots (the trainer checks every name again).
  const std::string dataset = assign_.config.value("dataset", std::string("synthetic"));
  if (dataset != "synthetic" && dataset != "repeat" && config_.data_root.empty()) {
    Finish(Outcome::kFailed, "dataset \"" + dataset + "\" names a token file, but this worker has no "
                             "--data-root to read it from");
    return false;
  }
  if (!config_.simulate) std::filesystem::create_directories(output_dir_, fs_error);
  cache_dir_ = config_.cache_dir;
  if (!config_.simulate && PrivateMountsAvailable()) {
    // The attempt's own /dev/shm, and /tmp unless a path the rank needs is under /tmp
    // (binding over it would hide that path), in its directory (SpawnRank binds them),
    // removed with it: nothing in them outlives the attempt.
    private_shm_ = true;
    private_tmp_ = !NeedsHostTmp();
    for (const char* sub : {"/shm", "/tmp"}) {
      const std::string dir = trial_dir_ + sub;
      std::filesystem::create_directories(dir, fs_error);
      if (!fs_error && chmod(dir.c_str(), 01777) == 0) continue;
      Finish(Outcome::kLost, "infrastructure: cannot create " + dir + "; nothing ran, the attempt is requeued",
             /*infrastructure=*/true);
      return false;
    }
  }
  if (run_as_ && !config_.simulate) {
    if (Status s = GiveDirectoriesToRankUid(); !s.ok()) {
      Finish(Outcome::kLost, "infrastructure: " + s.message() + "; nothing ran, the attempt is requeued",
             /*infrastructure=*/true);
      return false;
    }
  }
  return true;
}

bool TrialRunner::NeedsHostTmp() const {
  auto under_tmp = [](const std::string& path) {
    if (path.empty()) return false;
    std::error_code ec;
    const std::string real = std::filesystem::weakly_canonical(path, ec).string();
    return (ec ? path : real).rfind("/tmp/", 0) == 0;
  };
  for (const std::string& path : {trial_dir_, cache_dir_, config_.data_root, config_.trainer_path,
                                  config_.executors.dir, config_.executors.python}) {
    if (under_tmp(path)) return true;
  }
  return false;
}

void TrialRunner::ArmTimeout() {
  if (assign_.timeout_ms <= 0) return;
  timeout_timer_.expires_after(std::chrono::milliseconds(assign_.timeout_ms));
  std::weak_ptr<TrialRunner> weak = shared_from_this();
  timeout_timer_.async_wait([weak](const error_code& ec) {
    auto runner = weak.lock();
    if (ec || !runner || runner->finished_) return;
    runner->timed_out_ = true;
    runner->KillAll();
  });
}

bool TrialRunner::ResolveCommand(const spec::ExecutorTemplate** command) {
  // An `executor: command` trial runs an allowlisted template of this worker's own
  // catalog, or nothing: the sweep names a template, never a program.
  const std::string template_name = assign_.config.value("command_template", std::string());
  if (!template_name.empty()) {
    *command = config_.executors.Find(template_name);
    if (*command == nullptr) {
      Finish(Outcome::kFailed, "command template \"" + template_name + "\" is not in this worker's allowlist (" +
                                   (config_.executors.source.empty() ? "no --executors file"
                                                                     : config_.executors.source) +
                                   ": " + config_.executors.NameList() + "); nothing ran");
      return false;
    }
  }
  if (*command == nullptr && !config_.has_trainer) {
    Finish(Outcome::kFailed, "this worker has no trainer ('" + config_.trainer_path +
                                 "' is not an executable file): it runs command templates only; nothing ran");
    return false;
  }
  return true;
}

bool TrialRunner::StorePortIsFree() {
  // Rank 0 hosts the store on this host: a port another program holds (another sweep's
  // trial, anything) is this machinery's failure, not the variant's. The attempt ends
  // `lost` before anything runs, and the coordinator requeues it on its next port.
  auto store = protocol::SplitHostPort(assign_.store_address, "store address");
  const bool hosts_store =
      std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.rank == 0; });
  if (!hosts_store || !store.ok()) return true;
  if (std::string busy = StorePortBusy(store->second); !busy.empty()) {
    Finish(Outcome::kLost, "infrastructure: the rank store's port " + std::to_string(store->second) +
                               " on this host is in use (" + busy + "); nothing ran, the attempt is requeued",
           /*infrastructure=*/true);
    return false;
  }
  return true;
}

std::vector<std::string> TrialRunner::RankEnvironment(std::size_t index) const {
  const Rank& rank = ranks_[index];
  const auto& slot = assign_.ranks[index];
  const auto& a = assign_.attempt;
  auto store = protocol::SplitHostPort(assign_.store_address, "store address");
  std::vector<std::string> env = {
      "RANK=" + std::to_string(rank.rank),
      "WORLD_SIZE=" + std::to_string(assign_.world_size),
      "LOCAL_RANK=" + std::to_string(rank.local_rank),
      "LOCAL_WORLD_SIZE=" + std::to_string(ranks_.size()),
      "MASTER_ADDR=" + (store.ok() ? store->first : std::string("127.0.0.1")),
      "MASTER_PORT=" + (store.ok() ? std::to_string(store->second) : std::string("0")),
      "BAKEOFF_TRIAL_ID=" + std::to_string(a.trial_id),
      "BAKEOFF_ATTEMPT=" + std::to_string(a.attempt),
  };
  if (index < rank_cpus_.size() && !rank_cpus_[index].empty()) {
    // The trainers size their thread pools to these CPUs alone (no division by ranks).
    env.push_back("BAKEOFF_RANK_CPUS=" + FormatCpuList(rank_cpus_[index]));
  } else if (config_.share_cores) {
    env.push_back("BAKEOFF_CORES_SHARED=1");  // recorded in the trial's threads decision
  }
  // Where this rank binds its own collectives: this host, not rank 0's (the store's).
  env.push_back("BAKEOFF_RANK_ADDR=" + config_.rank_address);
  if (run_as_) {
    // The worker's home and /tmp are not this uid's: its own, inside the trial directory.
    env.push_back("HOME=" + trial_dir_ + "/home");
    env.push_back("TMPDIR=" + trial_dir_ + "/tmp");
  }
  if (!config_.rank_interface.empty()) {
    env.push_back("BAKEOFF_RANK_IFACE=" + config_.rank_interface);
    for (const char* name : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
      if (std::getenv(name) == nullptr) env.push_back(std::string(name) + "=" + config_.rank_interface);
    }
  }
  if (!slot.cuda_devices.empty()) {
    std::string devices;
    for (int d : slot.cuda_devices) devices += (devices.empty() ? "" : ",") + std::to_string(d);
    env.push_back("CUDA_VISIBLE_DEVICES=" + devices);
  }
  if (lockstep_) env.push_back("BAKEOFF_TURN_FD=" + std::to_string(kTurnFd));
  return env;
}

bool TrialRunner::SpawnRank(std::size_t index, const spec::ExecutorTemplate* command) {
  Rank& rank = ranks_[index];
  const std::vector<std::string> env = RankEnvironment(index);
  SpawnRequest request;
  if (command == nullptr) {
    request.executable = config_.trainer_path;
    request.args = {"--config", config_path_,
                    "--rank", std::to_string(rank.rank),
                    "--world-size", std::to_string(assign_.world_size),
                    "--local-rank", std::to_string(rank.local_rank),
                    "--store", assign_.store_address,
                    "--output-dir", output_dir_};
    if (!config_.data_root.empty()) request.args.insert(request.args.end(), {"--data-root", config_.data_root});
    request.args.insert(request.args.end(), config_.trainer_extra_args.begin(), config_.trainer_extra_args.end());
    request.environment = EnvironmentWith(env);
  } else if (Status prepared = PrepareCommand(*command, config_path_, output_dir_, env, &request); !prepared.ok()) {
    return GiveUpStarting(index, "cannot start rank " + std::to_string(rank.rank) + ": " + prepared.message());
  }
  if (index < rank_cpus_.size()) request.cpus = rank_cpus_[index];
  request.working_dir = trial_dir_;
  request.run_as = run_as_;
  request.capture_stderr = true;
  request.turn_channel = lockstep_ != nullptr;
  if (private_shm_) request.private_shm_dir = trial_dir_ + "/shm";
  if (private_tmp_) request.private_tmp_dir = trial_dir_ + "/tmp";
  request.process_group = process_group_ > 0 ? process_group_ : 0;
  auto log = RankLog::Create(rank.end.log_path, config_.max_rank_log_bytes);
  auto spawned = log.ok() ? SpawnRankProcess(request) : Result<SpawnedProcess>(log.status());
  if (!spawned.ok()) {
    return GiveUpStarting(index, "cannot start rank " + std::to_string(rank.rank) + ": " + spawned.status().message());
  }
  rank.pid = spawned->pid;
  if (process_group_ <= 0) process_group_ = spawned->process_group;
  rank.out = std::make_unique<asio::posix::stream_descriptor>(executor_, spawned->stdout_fd);
  rank.err = std::make_unique<asio::posix::stream_descriptor>(executor_, spawned->stderr_fd);
  if (spawned->turn_fd >= 0) {
    rank.turn = std::make_unique<asio::posix::stream_descriptor>(executor_, spawned->turn_fd);
  }
  rank.log = std::move(log).value();
  rank.log_closed = false;
  // The worker's own event: lets the coordinator mark the trial running and measure
  // dispatch latency (submission to first rank process started).
  if (callbacks_.on_event) {
    nlohmann::json started = {{"event", "started"}, {"pid", rank.pid}, {"at", WallSeconds(clock_)},
                               {"host", config_.advertise_host}, {"address", config_.rank_address}};
    if (run_as_) started["uid"] = *run_as_;  // the rank's own uid (--rank-uids)
    callbacks_.on_event(rank.rank, OwnEvent(std::move(started), log_));
  }
  return true;
}

bool TrialRunner::GiveUpStarting(std::size_t index, const std::string& reason) {
  start_error_ = reason;
  for (std::size_t j = index; j < ranks_.size(); ++j) {
    ranks_[j].ended = true;
    ranks_[j].end.killed_by_supervisor = true;
  }
  KillAll();  // the ranks already started; their supervisors reap them
  return false;
}

void TrialRunner::JoinLockstepGroup() {
  if (!lockstep_) return;
  std::weak_ptr<TrialRunner> weak = shared_from_this();
  LockstepGroup::SideHooks hooks;
  hooks.go = [weak](int index, std::int64_t turn) {
    if (auto runner = weak.lock()) runner->SendTurn(static_cast<std::size_t>(index), turn);
  };
  hooks.time_out = [weak](const std::string& reason) {
    auto runner = weak.lock();
    if (!runner || runner->finished_) return;
    runner->turn_timeout_reason_ = reason;
    runner->timed_out_ = true;
    runner->KillAll();
  };
  hooks.left_rotation = [weak](const std::string& reason) {
    if (auto runner = weak.lock(); runner && runner->ranks_.size() > 0 && !runner->ranks_[0].log_closed) {
      const std::string note = "[bakeoff worker] lockstep: " + reason + "\n";
      runner->ranks_[0].log->Append(note.data(), note.size());
    }
  };
  lockstep_->Join(lockstep_side_, static_cast<int>(ranks_.size()), std::move(hooks));
  // Ranks that never started take no turns.
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].pid <= 0) lockstep_->OnRankClosed(lockstep_side_, static_cast<int>(i));
  }
}

void TrialRunner::SendTurn(std::size_t index, std::int64_t turn) {
  if (index >= ranks_.size() || !ranks_[index].turn) return;
  // A few bytes on a socket the rank reads when it waits: never blocks in practice; a
  // rank that is gone or not reading loses its turn message, as it would its turn.
  const std::string line = "go " + std::to_string(turn) + "\n";
  error_code ec;
  ranks_[index].turn->non_blocking(true, ec);
  asio::write(*ranks_[index].turn, asio::buffer(line), ec);
}

asio::awaitable<void> TrialRunner::ReadTurns(std::size_t index) {
  auto self = shared_from_this();
  Rank& rank = ranks_[index];
  std::string buffer;
  while (true) {
    error_code ec;
    const std::size_t n = co_await asio::async_read_until(*rank.turn, asio::dynamic_buffer(buffer, kMaxTurnLineBytes),
                                                          '\n', asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // closed, over-long, or cancelled: the rank takes no more turns
    const std::string line = buffer.substr(0, n - 1);
    buffer.erase(0, n);
    if (lockstep_) lockstep_->OnLine(lockstep_side_, static_cast<int>(index), line);
  }
  if (lockstep_) lockstep_->OnRankClosed(lockstep_side_, static_cast<int>(index));
}

Status TrialRunner::PrepareCommand(const spec::ExecutorTemplate& command, const std::string& config_path,
                                   const std::string& output_dir, const std::vector<std::string>& rank_env,
                                   SpawnRequest* request) const {
  spec::ArgvContext context;
  context.python = config_.executors.python;
  context.dir = config_.executors.dir;
  context.config = config_path;
  context.trial_dir = trial_dir_;
  context.output_dir = output_dir;
  context.data_root = config_.data_root;
  context.cache = cache_dir_;
  // The trial's values reach the command through {field} placeholders and, where the
  // template passes flags, as --name=value per parameter (docs/sweep.md).
  context.fields = assign_.config;
  const nlohmann::json& parameters = assign_.config.contains("command_parameters")
                                         ? assign_.config["command_parameters"]
                                         : nlohmann::json::array();
  if (parameters.is_array()) {
    for (const auto& name : parameters) {
      if (name.is_string()) context.flag_fields.push_back(name.get<std::string>());
    }
  }
  const nlohmann::json args = assign_.config.value("command_args", nlohmann::json::object());
  auto argv = spec::RenderArgv(command, context, args);
  if (!argv.ok()) return argv.status();
  request->executable = argv->front();
  request->args.assign(argv->begin() + 1, argv->end());
  // The command's environment is built, not inherited: the template's pass list (when
  // set here), its own variables, then the worker's per-rank ones, which win.
  std::vector<std::string> env;
  for (const auto& name : command.env_pass) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr && name != protocol::kTokenEnvVar) {
      env.push_back(name + "=" + value);
    }
  }
  for (const auto& [name, value] : command.env_set) {
    auto rendered = spec::RenderTemplateString(value, command, context, args);
    if (!rendered.ok()) return rendered.status();
    env.push_back(name + "=" + *rendered);
  }
  auto set = [&env](const std::string& kv) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(key, 0) == 0; }),
              env.end());
    env.push_back(kv);
  };
  for (const auto& kv : rank_env) set(kv);
  set("BAKEOFF_EVENTS_FD=" + std::to_string(kEventsFd));
  set("BAKEOFF_CONFIG=" + config_path);
  set("BAKEOFF_OUTPUT_DIR=" + output_dir);
  if (!config_.data_root.empty()) set("BAKEOFF_DATA_ROOT=" + config_.data_root);
  request->environment = std::move(env);
  request->events_on_separate_fd = true;
  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) return Status::IoError("cannot create the cache directory " + cache_dir_ + ": " + ec.message());
  return Status::Ok();
}

Status TrialRunner::GiveDirectoriesToRankUid() {
  const uid_t uid = *run_as_;
  std::error_code ec;
  for (const char* sub : {"/home", "/tmp"}) std::filesystem::create_directories(trial_dir_ + sub, ec);
  if (ec) return Status::IoError("cannot create the trial's home and tmp: " + ec.message());
  if (Status s = ChownTree(trial_dir_, uid, uid); !s.ok()) return s;
  if (chmod(trial_dir_.c_str(), 0700) != 0) return Status::IoError("cannot chmod " + trial_dir_);
  // One cache per sweep and uid: compiled code one sweep's script wrote never runs in
  // another sweep's trial. The sweep's directory is the worker's (others pass through).
  std::string sweep = assign_.sweep_id;
  for (char& c : sweep) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  const std::string sweep_dir = config_.cache_dir + "/sweep-" + sweep;
  std::filesystem::create_directories(sweep_dir, ec);
  if (ec || chmod(sweep_dir.c_str(), 0711) != 0) return Status::IoError("cannot create the cache directory " + sweep_dir);
  cache_dir_ = sweep_dir + "/uid-" + std::to_string(uid);
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) return Status::IoError("cannot create the cache directory " + cache_dir_ + ": " + ec.message());
  if (Status s = ChownTree(cache_dir_, uid, uid); !s.ok()) return s;
  if (chmod(cache_dir_.c_str(), 0700) != 0) return Status::IoError("cannot chmod " + cache_dir_);
  return Status::Ok();
}

asio::awaitable<void> TrialRunner::SuperviseRank(std::size_t index) {
  auto self = shared_from_this();
  Rank& rank = ranks_[index];
  // The rank is reaped on its own, not once its events pipe ends: a descendant that
  // inherited the pipe (a daemon in a session of its own) must not hold the attempt
  // past the rank's exit, its timeout or a cancel (security review 2026-12-02, 6).
  asio::co_spawn(executor_, [self, index]() { return self->ReapRank(index); }, asio::detached);
  std::string buffer;
  bool skipping = false;  // inside a line that was over the limit
  while (true) {
    error_code ec;
    std::size_t n = co_await asio::async_read_until(
        *rank.out, asio::dynamic_buffer(buffer, config_.max_event_line_bytes), '\n',
        asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      std::string line = buffer.substr(0, n - 1);
      buffer.erase(0, n);
      if (skipping) {
        skipping = false;
      } else {
        HandleLine(rank, line);
      }
      continue;
    }
    if (ec == asio::error::not_found) {  // the line is over max_event_line_bytes
      ++dropped_lines_;
      buffer.clear();
      skipping = true;
      continue;
    }
    if (ec == asio::error::operation_aborted) {
      // ReapRank gave up on the pipe: take the whole lines it holds now.
      std::vector<char> chunk(64 * 1024);
      TakeWhatThePipeHolds(*rank.out, chunk, [&](const char* data, std::size_t n) { buffer.append(data, n); });
      for (std::size_t end; (end = buffer.find('\n')) != std::string::npos;) {
        HandleLine(rank, buffer.substr(0, end));
        buffer.erase(0, end + 1);
      }
      buffer.clear();  // a partial line from a writer that is still going
    }
    break;  // end of file (the process closed stdout, normally by exiting), or given up
  }
  if (!buffer.empty() && !skipping) HandleLine(rank, buffer);
  error_code ignored;
  rank.out->close(ignored);
  rank.events_closed = true;
  if (rank.reaped) AfterReapedAndRead(rank);
}

asio::awaitable<void> TrialRunner::ReapRank(std::size_t index) {
  auto self = shared_from_this();
  Rank& rank = ranks_[index];
  error_code ignored;
  asio::steady_timer timer(executor_);
  while (true) {
    auto reaped = TryReap(rank.pid);
    if (!reaped.ok()) break;  // not our child any more: report it as lost below
    if (reaped->has_value()) {
      rank.end.exit_code = (*reaped)->exit_code;
      rank.end.signal = (*reaped)->signal;
      break;
    }
    timer.expires_after(std::chrono::milliseconds(10));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  rank.reaped = true;
  if (!rank.events_closed) {
    // What the rank wrote before it exited is in the pipe already; a writer still
    // holding it after kEventsPipeGrace is a descendant, not the rank.
    timer.expires_after(kEventsPipeGrace);
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    if (!rank.events_closed) {
      if (!rank.log_closed) {
        const std::string note = "[bakeoff worker] rank exited, but a process it started still holds its events "
                                 "pipe; stopped reading it after " + std::to_string(kEventsPipeGrace.count()) +
                                 " s (that process was not stopped)\n";
        rank.log->Append(note.data(), note.size());
      }
      rank.out->cancel(ignored);  // SuperviseRank takes what is left and goes on
    }
    co_return;
  }
  AfterReapedAndRead(rank);
}

void TrialRunner::AfterReapedAndRead(Rank& rank) {
  if (!rank.log_closed) {
    error_code ignored;
    rank.err->cancel(ignored);  // DrainLog takes what is left, closes the log and ends the rank
    return;
  }
  OnRankEnded(rank);
}

asio::awaitable<void> TrialRunner::DrainLog(std::size_t index) {
  auto self = shared_from_this();
  Rank& rank = ranks_[index];
  std::vector<char> chunk(64 * 1024);
  while (true) {
    error_code ec;
    const std::size_t n = co_await rank.err->async_read_some(asio::buffer(chunk),
                                                            asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0) rank.log->Append(chunk.data(), n);
    if (ec == asio::error::eof) break;
    if (ec && ec != asio::error::operation_aborted) break;
    if (ec || rank.reaped) {
      // The process has ended: what it wrote is in the pipe.
      TakeWhatThePipeHolds(*rank.err, chunk, [&](const char* data, std::size_t n) { rank.log->Append(data, n); });
      break;
    }
  }
  error_code ignored;
  rank.err->close(ignored);
  rank.log->Close();
  rank.log_closed = true;
  if (rank.reaped && rank.events_closed) OnRankEnded(rank);
}

void TrialRunner::HandleLine(Rank& rank, const std::string& line) {
  if (line.empty()) return;
  auto parsed = protocol::ParseTrainerEvent(line);
  if (!parsed.ok()) {
    ++dropped_lines_;  // a log line, or an event with mistyped fields: never forwarded
    return;
  }
  if (const protocol::ErrorEvent* error = parsed->error(); error && !rank.end.error_kind) {
    rank.end.error_kind = error->kind;
    rank.end.error_message = error->message;
    if (rank.end.end_order == 0) rank.end.end_order = ++end_counter_;
  } else if (parsed->summary()) {
    rank.end.summary_seen = true;
  } else if (const protocol::StepEvent* step = parsed->step(); step && lockstep_ && step->phase == "measure") {
    lockstep_->OnMeasuredStep(lockstep_side_, static_cast<int>(&rank - ranks_.data()));
  }
  if (callbacks_.on_event) callbacks_.on_event(rank.rank, std::move(parsed).value());
}

void TrialRunner::OnRankEnded(Rank& rank) {
  rank.ended = true;
  if (lockstep_) lockstep_->OnRankClosed(lockstep_side_, static_cast<int>(&rank - ranks_.data()));
  if (rank.end.end_order == 0) rank.end.end_order = ++end_counter_;
  const bool bad = rank.end.signal != 0 || rank.end.exit_code != 0;
  // A failed rank leaves its peers blocked in collectives: stop them now.
  if (bad && !timed_out_ && !cancelled_ && !rank.end.killed_by_supervisor) KillAll();
  MaybeFinish();
}

void TrialRunner::KillAll() {
  bool any_running = false;
  for (auto& r : ranks_) {
    if (!r.ended && r.pid > 0) {
      r.end.killed_by_supervisor = true;
      any_running = true;
    }
  }
  if (any_running) SignalProcessGroup(process_group_, SIGKILL);
}

void TrialRunner::Cancel(const std::string& reason) {
  if (finished_) return;
  cancelled_ = true;
  cancel_reason_ = reason;
  KillAll();
}

void TrialRunner::MaybeFinish() {
  if (finished_) return;
  for (const auto& r : ranks_) {
    if (!r.ended) return;
  }
  if (!start_error_.empty() && !cancelled_ && !timed_out_) {
    Finish(Outcome::kFailed, start_error_);
    return;
  }
  if (!turn_timeout_reason_.empty() && !cancelled_) {
    Finish(Outcome::kTimeout, turn_timeout_reason_);
    return;
  }
  std::vector<RankEnd> ends;
  for (const auto& r : ranks_) {
    ends.push_back(r.end);
    ends.back().stderr_tail = StderrTailOf(r.end.log_path);  // every log is closed by now
  }
  auto c = ClassifyAttempt(ends, timed_out_, cancelled_, cancel_reason_);
  Finish(c.outcome, c.reason, c.infrastructure);
}

void TrialRunner::Finish(Outcome outcome, const std::string& reason, bool infrastructure) {
  if (finished_) return;
  finished_ = true;
  timeout_timer_.cancel();
  if (lockstep_) lockstep_->OnSideEnded(lockstep_side_);  // the others go on without it
  protocol::AttemptFinishedMessage message;
  message.attempt = assign_.attempt;
  message.outcome = protocol::OutcomeName(outcome);
  message.reason = reason;
  message.infrastructure = infrastructure && outcome == Outcome::kLost;
  for (const auto& r : ranks_) {
    message.exits.push_back(protocol::RankExit{r.rank, r.end.exit_code, r.end.signal});
  }
  // Posted, so that a caller of Start or Cancel is never re-entered.
  auto self = shared_from_this();
  asio::post(executor_, [self, message = std::move(message)]() mutable {
    if (self->callbacks_.on_finished) self->callbacks_.on_finished(std::move(message));
  });
}

void TrialRunner::EmitSimulated(const nlohmann::json& event) {
  for (const auto& r : ranks_) {
    nlohmann::json e = event;
    e["simulated"] = true;
    e["rank"] = r.rank;
    if (callbacks_.on_event) callbacks_.on_event(r.rank, OwnEvent(std::move(e), log_));
  }
}

void TrialRunner::EmitSimulatedStep(const protocol::StepEvent& step) {
  // Typed, without a JSON body: the outbox sends a step's fields in a step block, and
  // building and checking an object per step was most of a simulated step's cost.
  for (const auto& r : ranks_) {
    protocol::TrainerEvent event;
    event.kind = "step";
    event.fields = step;
    if (callbacks_.on_event) callbacks_.on_event(r.rank, std::move(event));
  }
}

asio::awaitable<void> TrialRunner::Simulate() {
  auto self = shared_from_this();
  const auto& cfg = assign_.config;
  auto get_int = [&](const char* key, std::int64_t fallback) {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
  };
  const std::int64_t warmup = get_int("warmup_steps", 3);
  const std::int64_t steps = get_int("steps", 20);
  const std::int64_t tokens = get_int("micro_batch", 1) * get_int("seq_len", 128) *
                              get_int("grad_accum", 1) * assign_.world_size;
  const double step_s = std::chrono::duration<double>(config_.simulate_step).count();
  EmitSimulated({{"event", "ready"}, {"world_size", assign_.world_size}, {"config", cfg}});
  asio::steady_timer timer(executor_);
  for (std::int64_t s = 0; s < warmup + steps; ++s) {
    timer.expires_after(config_.simulate_step);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (cancelled_ || timed_out_ || finished_) break;
    protocol::StepEvent step;
    step.row.step = s < warmup ? s : s - warmup;
    step.phase = s < warmup ? "warmup" : "measure";
    step.row.step_s = step_s;
    step.row.tokens = tokens;
    step.row.loss = 10.0 / (1.0 + static_cast<double>(s));
    EmitSimulatedStep(step);
  }
  for (auto& r : ranks_) {
    r.ended = true;
    r.end.exit_code = 0;
  }
  if (cancelled_) {
    Finish(Outcome::kCancelled, cancel_reason_.empty() ? "cancelled" : cancel_reason_);
  } else if (timed_out_) {
    Finish(Outcome::kTimeout, "the simulated trial ran past its timeout");
  } else if (!finished_) {
    EmitSimulated({{"event", "summary"}, {"startup_s", 0.0}, {"first_step_s", step_s},
          {"warmup_s", step_s * warmup}, {"step_s_median", step_s}, {"step_s_p10", step_s},
          {"step_s_p90", step_s}, {"tokens_per_s", step_s > 0 ? tokens / step_s : 0.0},
          {"peak_mem_bytes", 0}});
    Finish(Outcome::kSucceeded, "simulated workload (no trainer ran)");
  }
}

}  // namespace bakeoff::worker
