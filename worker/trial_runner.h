// TrialRunner: one attempt of one trial on this worker. Starts a fresh trainer process
// per local rank (docs/trainer.md: `--config FILE --rank R --world-size N --local-rank L
// --store HOST:PORT`, plus RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (rank 0's
// store), BAKEOFF_RANK_ADDR/BAKEOFF_RANK_IFACE (this host's, where the rank binds its
// collectives; see WorkerConfig::rank_address) and CUDA_VISIBLE_DEVICES), reads each rank's stdout event stream asynchronously,
// drains its stderr into the rank's capped log (worker/rank_log.h), enforces
// the trial timeout by killing the process group, and when every local rank has ended
// classifies the attempt (worker/exit_classifier.h) and reports it once.
// In simulate mode (benchmarks only) no process starts and no trial directory is
// written: timers emit ready/step/summary events marked "simulated": true.
// The "at" of its own `started` events is the injected Env's wall time.
// Thread-safety: not thread-safe; all methods and callbacks run on `executor`, which
// must be single-threaded.
#pragma once

#include <sys/types.h>

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "experiments/sweep/executor_catalog.h"
#include "protocol/clock.h"
#include "protocol/env.h"
#include "protocol/log.h"
#include "protocol/messages.h"
#include "protocol/trainer_event.h"
#include "worker/exit_classifier.h"
#include "worker/lockstep_group.h"
#include "worker/rank_log.h"
#include "worker/rank_process.h"
#include "worker/worker_config.h"

namespace bakeoff::worker {

class TrialRunner : public std::enable_shared_from_this<TrialRunner> {
 public:
  struct Callbacks {
    // One trainer event of one rank, in the order that rank wrote them, read into its
    // type once (a line that is not an event is dropped before this).
    std::function<void(int rank, protocol::TrainerEvent event)> on_event;
    // Exactly once, after every local rank has ended (or Start failed).
    std::function<void(protocol::AttemptFinishedMessage finished)> on_finished;
  };

  // How long a rank's events pipe may stay open after the rank exited: what the rank
  // wrote is in it already; a descendant holding it longer is not waited for.
  static constexpr std::chrono::seconds kEventsPipeGrace{2};

  // REQUIRES: `env` (its clock and log) outlives the runner.
  TrialRunner(boost::asio::any_io_executor executor, const WorkerConfig& config,
              protocol::AssignMessage assign, Callbacks callbacks, const Env& env = Env::Default());
  ~TrialRunner();

  // Writes the config file and starts every local rank. On failure the ranks already
  // started are killed and on_finished reports `failed` with the reason.
  void Start();

  // Before Start: local rank i runs pinned to `cpus[i]` (its slot's CPUs, worker/
  // core_partition.h); a rank without an entry, or with an empty one, is not pinned.
  void PinRanks(std::vector<std::vector<int>> cpus) { rank_cpus_ = std::move(cpus); }

  // Before Start: the ranks run as `uid` (worker --rank-uids): the trial directory and
  // the sweep's cache for that uid become its own, and HOME and TMPDIR point inside the
  // trial directory. The caller kills the uid's processes and takes the directories
  // back once the attempt has finished (WorkerAgent).
  void RunAs(uid_t uid) { run_as_ = uid; }
  const std::optional<uid_t>& run_as() const { return run_as_; }

  // Before Start: the attempt is side `side` of lockstep group `group` (docs/lockstep.md):
  // every rank gets a turn socket (BAKEOFF_TURN_FD), its lines go to the group, and the
  // group's turns and timeouts come back to this runner.
  void JoinLockstep(std::shared_ptr<LockstepGroup> group, int side) {
    lockstep_ = std::move(group);
    lockstep_side_ = side;
  }
  // The longest line a rank may write on its turn socket.
  static constexpr std::size_t kMaxTurnLineBytes = 64;

  // Kills the process group; the attempt finishes as cancelled with `reason`.
  void Cancel(const std::string& reason);

  const protocol::AttemptRef& attempt() const { return assign_.attempt; }
  int local_rank_count() const { return static_cast<int>(assign_.ranks.size()); }
  bool finished() const { return finished_; }
  const std::string& trial_dir() const { return trial_dir_; }
  // {cache} of its command: the worker's cache directory, or with RunAs the sweep's
  // directory for that uid in it ("" before Start).
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  struct Rank {
    int rank = 0;
    int local_rank = 0;
    pid_t pid = -1;
    std::unique_ptr<boost::asio::posix::stream_descriptor> out;
    std::unique_ptr<boost::asio::posix::stream_descriptor> err;  // its stderr, drained into `log`
    std::unique_ptr<boost::asio::posix::stream_descriptor> turn;  // lockstep: its turn socket
    std::unique_ptr<RankLog> log;
    bool reaped = false;     // the process has been waited for
    bool events_closed = false;  // its events pipe is read to the end (or given up on)
    bool log_closed = true;  // false while `err` is drained; the rank ends once both hold
    bool ended = false;
    RankEnd end;
  };

  std::vector<std::vector<int>> rank_cpus_;

  // Start's steps. Each returns false after finishing the attempt (or, for SpawnRank,
  // after giving up starting the rest).
  bool WriteTrialFiles();  // the trial directory, its config, outputs/, the rank uid's dirs
  // Whether a path the ranks need (the trial or cache directory, the data root, the
  // program) is under /tmp: then /tmp stays the host's (a private one would hide it).
  bool NeedsHostTmp() const;
  void ArmTimeout();
  bool ResolveCommand(const spec::ExecutorTemplate** command);  // the allowlisted template
  bool StorePortIsFree();
  std::vector<std::string> RankEnvironment(std::size_t index) const;
  bool SpawnRank(std::size_t index, const spec::ExecutorTemplate* command);
  bool GiveUpStarting(std::size_t index, const std::string& reason);
  void JoinLockstepGroup();
  // Lockstep: writes `go turn` to the rank's turn socket; reads its requests.
  void SendTurn(std::size_t index, std::int64_t turn);
  boost::asio::awaitable<void> ReadTurns(std::size_t index);

  // Reads the rank's events; with ReapRank, ends the rank once it has exited and its
  // events are read (AfterReapedAndRead).
  boost::asio::awaitable<void> SuperviseRank(std::size_t index);
  // Waits for the rank's exit; gives its events pipe kEventsPipeGrace more, then stops
  // reading it (a descendant holding the pipe open does not hold the attempt).
  boost::asio::awaitable<void> ReapRank(std::size_t index);
  void AfterReapedAndRead(Rank& rank);
  // Copies the rank's stderr into its log until end of file, or, once the process has
  // been reaped, what its pipe still holds (a descendant that kept the pipe open does
  // not hold the attempt back); then closes the log.
  boost::asio::awaitable<void> DrainLog(std::size_t index);
  boost::asio::awaitable<void> Simulate();
  // One simulated event for every rank, marked "simulated": true.
  void EmitSimulated(const nlohmann::json& event);
  void EmitSimulatedStep(const protocol::StepEvent& step);
  void HandleLine(Rank& rank, const std::string& line);
  // The argument vector and environment of an allowlisted command's rank.
  // RunAs: the trial directory (home/, tmp/ made) and the sweep's cache for the uid
  // become the uid's own, mode 0700.
  Status GiveDirectoriesToRankUid();
  Status PrepareCommand(const spec::ExecutorTemplate& command, const std::string& config_path,
                        const std::string& output_dir, const std::vector<std::string>& rank_env,
                        SpawnRequest* request) const;
  void OnRankEnded(Rank& rank);
  void KillAll();
  // `infrastructure`: with kLost, the worker's own machinery failed before the variant
  // ran (AttemptFinishedMessage::infrastructure).
  void Finish(protocol::Outcome outcome, const std::string& reason, bool infrastructure = false);
  void MaybeFinish();

  boost::asio::any_io_executor executor_;
  const WorkerConfig& config_;
  const Clock& clock_;  // of the Env given
  const logging::Logger log_;  // "worker", on the Env given
  protocol::AssignMessage assign_;
  Callbacks callbacks_;
  std::vector<Rank> ranks_;
  pid_t process_group_ = -1;
  boost::asio::steady_timer timeout_timer_;
  std::string trial_dir_;
  std::string config_path_;
  std::string output_dir_;
  std::string cache_dir_;
  std::shared_ptr<LockstepGroup> lockstep_;
  int lockstep_side_ = 0;
  std::string turn_timeout_reason_;  // set when the group gave up on this side
  bool private_shm_ = false;  // its ranks get the trial's shm/ as /dev/shm
  bool private_tmp_ = false;  // and its tmp/ as /tmp
  std::optional<uid_t> run_as_;
  bool timed_out_ = false;
  bool cancelled_ = false;
  std::string cancel_reason_;
  bool finished_ = false;
  int end_counter_ = 0;
  std::string start_error_;  // a rank could not be started
  std::uint64_t dropped_lines_ = 0;
};

}  // namespace bakeoff::worker
