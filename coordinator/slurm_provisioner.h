// SlurmProvisioner: obtains workers from Slurm for `bakeoff coordinator --slurm-partition`
// (docs/slurm.md). Every poll_interval it asks squeue about this coordinator's jobs,
// reads the waiting trials and live workers from the service (CapacityView), lets
// SlurmPolicy decide, and runs sbatch / scancel through a SlurmClient. It never blocks
// the executor (the client runs commands on its own thread), runs one round at a time,
// backs off (doubling from poll_interval to 5 minutes, with jitter) after a failed
// sbatch, and reports what it does: log lines, the waiting reason of sweeps whose
// trials wait for its jobs (CoordinatorService::SetCapacityNote) and bakeoff_slurm_*
// series on /metrics.
// Thread-safety: not thread-safe; construct, Start, Stop and destroy on the service's
// executor (or before it runs).
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "coordinator/coordinator_service.h"
#include "coordinator/slurm_client.h"
#include "coordinator/slurm_config.h"
#include "coordinator/slurm_policy.h"
#include "protocol/backoff.h"
#include "protocol/clock.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {

class SlurmProvisioner {
 public:
  // REQUIRES: config.Validate() succeeded; `service` outlives this. Time and logs come
  // from the service's Env.
  SlurmProvisioner(boost::asio::any_io_executor executor, SlurmConfig config, CoordinatorService& service,
                   std::unique_ptr<SlurmClient> client);
  ~SlurmProvisioner();

  // Writes the batch script into config.work_dir and starts polling (the first poll at
  // once). An error when the directory or script cannot be written.
  Status Start();
  void Stop();

  // The batch script the jobs run (after Start).
  const std::string& script_path() const { return script_path_; }
  // Runs a poll round now unless one is in flight (tests; the timer calls it).
  void Poll();
  // GET /metrics lines (bakeoff_slurm_*).
  std::string MetricsText() const;
  // Our jobs as last seen (tests, the note).
  const std::map<std::string, SlurmJob>& jobs() const { return jobs_; }
  bool round_in_flight() const { return in_flight_ > 0; }

  // The batch script for `config` (documented in docs/slurm.md).
  static std::string BatchScript(const SlurmConfig& config);
  // sbatch's arguments (but --parsable and the script) for a job of `nodes` nodes.
  static std::vector<std::string> SbatchArgs(const SlurmConfig& config, int nodes);

 private:
  void ArmTimer();
  void OnQueue(Result<std::vector<SlurmQueueEntry>> queue);
  void Decide();
  void SubmitJobs(std::vector<int> nodes);
  void RoundStep(int delta);  // in-flight bookkeeping; a round ends at zero
  void UpdateNote(const SlurmPlan& plan);

  boost::asio::any_io_executor executor_;
  SlurmConfig config_;
  CoordinatorService& service_;
  const Clock& clock_;  // service_.env().clock()
  const logging::Logger log_;  // "coordinator.slurm"
  std::unique_ptr<SlurmClient> client_;
  SlurmPolicy policy_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::string script_path_;
  std::map<std::string, SlurmJob> jobs_;
  std::set<std::string> cancel_sent_;  // scancel succeeded or in flight
  // Workers that registered from each job (live or since gone): the job's nodes they
  // cover are no longer capacity on its way.
  std::map<std::string, std::set<std::string>> workers_seen_;
  int in_flight_ = 0;
  bool adopted_ = false;  // the first squeue adopts jobs of our name (a restart's)
  // sbatch failures: the last reason, and no new submission before next_submit_.
  std::string last_submit_error_;
  Clock::TimePoint next_submit_{};
  Backoff submit_backoff_;  // after a failed sbatch: poll_interval doubling to 5 minutes
  std::string last_query_error_;
  std::string last_note_;
  // Figures for /metrics.
  std::uint64_t submitted_ok_ = 0, submitted_failed_ = 0, cancelled_ = 0;
  int nodes_held_back_ = 0, trials_unplaceable_ = 0;
};

}  // namespace bakeoff::coordinator
