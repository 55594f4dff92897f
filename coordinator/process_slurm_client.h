// ProcessSlurmClient: SlurmClient running the real sbatch, squeue and scancel as child
// processes (argument vectors, never a shell) on its own single thread, each bounded by
// a timeout after which the command is killed; results are posted back to the
// coordinator's executor. Commands run one at a time, in call order.
// Thread-safety: call from the executor given to the constructor; the destructor waits
// for the command in flight (at most its timeout).
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/thread_pool.hpp>

#include "coordinator/slurm_client.h"
#include "protocol/env.h"

namespace bakeoff::coordinator {

// What a finished command printed and how it ended.
struct CommandResult {
  int exit_code = -1;  // -1: it did not exit normally (signal, timeout, could not start)
  std::string out;     // stdout, at most kMaxCommandOutputBytes
  std::string err;     // stderr, likewise
};
inline constexpr std::size_t kMaxCommandOutputBytes = 1u << 20;

// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null, waits at most
// `timeout` on `clock`, then kills it. Unavailable when it could not start or timed out.
// Blocking: never call on the coordinator's executor.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                 const Clock& clock = Env::Default().clock());

class ProcessSlurmClient : public SlurmClient {
 public:
  ProcessSlurmClient(boost::asio::any_io_executor executor, std::string sbatch, std::string squeue,
                     std::string scancel, std::chrono::milliseconds timeout, const Env& env = Env::Default());
  ~ProcessSlurmClient() override;

  void Submit(const SlurmSubmitRequest& request, std::function<void(Result<std::string>)> done) override;
  void Query(const std::string& job_name, std::function<void(Result<std::vector<SlurmQueueEntry>>)> done) override;
  void Cancel(const std::vector<std::string>& job_ids, std::function<void(Status)> done) override;

  // squeue --format=%i|%T|%D|%r lines into entries (malformed lines are skipped).
  static std::vector<SlurmQueueEntry> ParseQueue(const std::string& text);
  // sbatch --parsable prints "ID" or "ID;CLUSTER": the id, or "" when it is not one.
  static std::string ParseJobId(const std::string& text);

 private:
  void Run(std::vector<std::string> argv, std::function<void(Result<CommandResult>)> done);

  boost::asio::any_io_executor executor_;
  std::string sbatch_, squeue_, scancel_;
  std::chrono::milliseconds timeout_;
  const Env& env_;  // its clock times a command against timeout_
  boost::asio::thread_pool pool_{1};
};

}  // namespace bakeoff::coordinator
