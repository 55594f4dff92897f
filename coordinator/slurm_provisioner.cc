#include "coordinator/slurm_provisioner.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/asio/post.hpp>

namespace bakeoff::coordinator {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

SlurmPolicyLimits LimitsOf(const SlurmConfig& c) {
  SlurmPolicyLimits l;
  l.units_per_node = c.gpus_per_node > 0 ? c.gpus_per_node : c.slots_per_node;
  l.max_nodes = c.max_nodes;
  l.max_pending_jobs = c.max_pending_jobs;
  l.max_submits_per_poll = c.max_submits_per_poll;
  l.idle_grace = c.idle_grace;
  l.worker_start_timeout = c.worker_start_timeout;
  return l;
}

SlurmJobState StateOf(const std::string& squeue_state) {
  if (squeue_state == "RUNNING" || squeue_state == "CONFIGURING") return SlurmJobState::kRunning;
  if (squeue_state == "PENDING" || squeue_state == "REQUEUED" || squeue_state == "REQUEUE_HOLD" ||
      squeue_state == "REQUEUE_FED" || squeue_state == "RESV_DEL_HOLD" || squeue_state == "SUSPENDED") {
    return SlurmJobState::kPending;
  }
  return SlurmJobState::kEnding;  // COMPLETING, CANCELLED, PREEMPTED, TIMEOUT, ...
}

const char* StateName(SlurmJobState s) {
  switch (s) {
    case SlurmJobState::kPending: return "pending";
    case SlurmJobState::kRunning: return "running";
    case SlurmJobState::kEnding: return "ending";
  }
  return "?";
}

}  // namespace

SlurmProvisioner::SlurmProvisioner(asio::any_io_executor executor, SlurmConfig config, CoordinatorService& service,
                                   std::unique_ptr<SlurmClient> client)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      service_(service),
      clock_(service.env().clock()),
      log_(service.env(), "coordinator.slurm"),
      client_(std::move(client)),
      policy_(LimitsOf(config_)),
      timer_(executor_),
      submit_backoff_({config_.poll_interval, std::chrono::minutes(5), 0.2}) {}

SlurmProvisioner::~SlurmProvisioner() {
  Stop();
  client_.reset();  // waits for a command in flight; its result is dropped (alive_)
}

std::string SlurmProvisioner::BatchScript(const SlurmConfig& c) {
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Written by `bakeoff coordinator --slurm-partition " << c.partition << "` and submitted with sbatch\n"
    << "# (docs/slurm.md): one `bakeoff worker` per node of the job, which takes its name, host\n"
    << "# and GPUs from the allocation and requeues its trials on SIGUSR1/SIGTERM.\n"
    << "exec srun --ntasks-per-node=1 --kill-on-bad-exit=0 " << Quote(c.worker_binary) << " worker --coordinator "
    << Quote(c.coordinator_address) << " --token-file " << Quote(c.worker_token_file);
  if (c.gpus_per_node == 0) s << " --slots " << c.slots_per_node;
  for (const auto& a : c.worker_args) s << " " << Quote(a);
  s << "\n";
  return s.str();
}

std::vector<std::string> SlurmProvisioner::SbatchArgs(const SlurmConfig& c, int nodes) {
  std::vector<std::string> a{"--job-name=" + c.job_name, "--partition=" + c.partition,
                             "--nodes=" + std::to_string(nodes), "--ntasks-per-node=1"};
  if (c.gpus_per_node > 0) {
    a.push_back("--gpus-per-node=" + std::to_string(c.gpus_per_node));
  } else {
    a.push_back("--cpus-per-task=" + std::to_string(c.slots_per_node));
  }
  if (!c.account.empty()) a.push_back("--account=" + c.account);
  if (!c.qos.empty()) a.push_back("--qos=" + c.qos);
  if (!c.time_limit.empty()) a.push_back("--time=" + c.time_limit);
  if (c.signal_seconds > 0) a.push_back("--signal=USR1@" + std::to_string(c.signal_seconds));
  a.push_back("--output=" + (std::filesystem::path(c.work_dir) / "%x-%j.out").string());
  a.insert(a.end(), c.sbatch_args.begin(), c.sbatch_args.end());
  return a;
}

Status SlurmProvisioner::Start() {
  std::error_code ec;
  std::filesystem::create_directories(config_.work_dir, ec);
  if (ec) return Status::Unavailable("slurm: cannot create --slurm-work-dir '" + config_.work_dir + "': " + ec.message());
  script_path_ = (std::filesystem::path(config_.work_dir) / (config_.job_name + ".sh")).string();
  {
    std::ofstream out(script_path_, std::ios::trunc);
    out << BatchScript(config_);
    if (!out) return Status::Unavailable("slurm: cannot write the batch script '" + script_path_ + "'");
  }
  chmod(script_path_.c_str(), 0755);
  log_.Info("provisioning", {{"partition", config_.partition},
                             {"max_nodes", config_.max_nodes},
                             {"max_pending_jobs", config_.max_pending_jobs},
                             {"gpus_per_node", config_.gpus_per_node},
                             {"slots_per_node", config_.slots_per_node},
                             {"idle_grace_s", config_.idle_grace.count() / 1000},
                             {"script", script_path_}});
  service_.SetExtraMetrics([this, alive = alive_]() { return *alive ? MetricsText() : std::string(); });
  asio::post(executor_, [this, alive = alive_]() {
    if (*alive) Poll();
  });
  return Status::Ok();
}

void SlurmProvisioner::Stop() {
  if (!*alive_) return;
  *alive_ = false;
  timer_.cancel();
  service_.SetExtraMetrics({});
  service_.SetCapacityNote("");
}

void SlurmProvisioner::ArmTimer() {
  if (!*alive_) return;
  timer_.expires_after(config_.poll_interval);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (!ec && *alive) Poll();
  });
}

void SlurmProvisioner::RoundStep(int delta) {
  in_flight_ += delta;
  if (in_flight_ == 0) ArmTimer();
}

void SlurmProvisioner::Poll() {
  if (!*alive_ || in_flight_ > 0) return;
  timer_.cancel();
  RoundStep(+1);
  client_->Query(config_.job_name, [this, alive = alive_](Result<std::vector<SlurmQueueEntry>> queue) {
    if (!*alive) return;
    OnQueue(std::move(queue));
    RoundStep(-1);
  });
}

void SlurmProvisioner::OnQueue(Result<std::vector<SlurmQueueEntry>> queue) {
  const auto now = clock_.Now();
  if (!queue.ok()) {
    // Without a fresh view nothing is submitted or cancelled this round (a slurmctld
    // that does not answer must not make us submit twice).
    if (last_query_error_ != queue.status().message()) log_.Warning("squeue failed", {{"error", queue.status().message()}});
    last_query_error_ = queue.status().message();
    SlurmPlan none;
    UpdateNote(none);
    return;
  }
  last_query_error_.clear();
  std::map<std::string, const SlurmQueueEntry*> seen;
  for (const auto& e : *queue) seen[e.id] = &e;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    const SlurmJob& job = it->second;
    log_.Info("job ended (no longer in squeue)",
              {{"job", job.id}, {"output", config_.work_dir + "/" + config_.job_name + "-" + job.id + ".out"}});
    cancel_sent_.erase(job.id);
    workers_seen_.erase(job.id);
    it = jobs_.erase(it);
  }
  for (const auto& e : *queue) {
    auto it = jobs_.find(e.id);
    if (it == jobs_.end()) {
      if (adopted_) continue;  // someone else's job of our name, submitted since: not ours
      SlurmJob job;
      job.id = e.id;
      job.nodes = e.nodes;
      job.submitted_at = now;
      job.last_active = now;
      it = jobs_.emplace(e.id, job).first;
      log_.Info("job adopted (found in squeue at start: a previous coordinator's)",
                {{"job", e.id}, {"state", e.state}});
    }
    SlurmJob& job = it->second;
    // A job we cancelled may still show RUNNING for a moment: it is on its way out.
    const SlurmJobState state = cancel_sent_.count(e.id) ? SlurmJobState::kEnding : StateOf(e.state);
    if (state != job.state) {
      log_.Info("job state", {{"job", job.id}, {"state", StateName(state)}, {"slurm_state", e.state}});
    }
    job.state = state;
    job.reason = e.reason;
    job.nodes = std::max(1, e.nodes);
    if (state == SlurmJobState::kRunning && !job.running_since) job.running_since = now;
  }
  adopted_ = true;
  Decide();
}

void SlurmProvisioner::Decide() {
  const auto now = clock_.Now();
  const bool cuda = config_.gpus_per_node > 0;
  CapacityView view = Capacity(service_.State(), SlurmPolicy::kMaxLookahead);
  std::vector<int> queued;
  for (const auto& t : view.queued) {
    if (t.cuda == cuda) queued.push_back(t.world_size);
  }
  std::vector<int> free_units;
  for (auto& [id, job] : jobs_) {
    job.registered_workers = 0;
    job.busy_workers = 0;
  }
  for (const auto& w : view.workers) {
    if (!w.slurm_job_id.empty()) {
      auto job = jobs_.find(w.slurm_job_id);
      if (job != jobs_.end()) {
        workers_seen_[job->first].insert(w.id);
        if (w.busy) ++job->second.busy_workers;
      }
    }
    if (w.schedulable) free_units.push_back(cuda ? w.free_cuda_devices : w.free_cpu_slots);
  }
  for (auto& [id, job] : jobs_) {
    // A worker that registered and left (preempted) is no capacity to wait for either.
    auto seen = workers_seen_.find(id);
    job.registered_workers = seen == workers_seen_.end() ? 0 : static_cast<int>(seen->second.size());
    if (job.busy_workers > 0 || !queued.empty()) job.last_active = now;
  }
  std::vector<SlurmJob> jobs;
  for (const auto& [id, job] : jobs_) jobs.push_back(job);
  SlurmPlan plan = policy_.Plan(queued, free_units, jobs, now);
  nodes_held_back_ = plan.held_back;
  trials_unplaceable_ = plan.unplaceable;

  if (!plan.cancel.empty()) {
    for (std::size_t i = 0; i < plan.cancel.size(); ++i) {
      log_.Info("scancel", {{"job", plan.cancel[i]}, {"reason", plan.cancel_reasons[i]}});
      jobs_[plan.cancel[i]].state = SlurmJobState::kEnding;
      cancel_sent_.insert(plan.cancel[i]);
    }
    RoundStep(+1);
    client_->Cancel(plan.cancel, [this, alive = alive_, ids = plan.cancel](Status s) {
      if (!*alive) return;
      if (s.ok()) {
        cancelled_ += ids.size();
      } else {
        log_.Warning("scancel failed; retried at the next poll", {{"error", s.message()}});
        for (const auto& id : ids) cancel_sent_.erase(id);  // the next squeue says where they stand
      }
      RoundStep(-1);
    });
  }
  if (!plan.submit_nodes.empty() && now >= next_submit_) SubmitJobs(plan.submit_nodes);
  UpdateNote(plan);
}

void SlurmProvisioner::SubmitJobs(std::vector<int> nodes) {
  if (nodes.empty() || !*alive_) return;
  const int n = nodes.front();
  nodes.erase(nodes.begin());
  SlurmSubmitRequest request;
  request.nodes = n;
  request.sbatch_args = SbatchArgs(config_, n);
  request.script_path = script_path_;
  RoundStep(+1);
  client_->Submit(request, [this, alive = alive_, n, rest = std::move(nodes)](Result<std::string> id) mutable {
    if (!*alive) return;
    const auto now = clock_.Now();
    if (id.ok()) {
      ++submitted_ok_;
      last_submit_error_.clear();
      submit_backoff_.Reset();
      SlurmJob job;
      job.id = *id;
      job.nodes = n;
      job.submitted_at = now;
      job.last_active = now;
      jobs_[*id] = job;
      log_.Info("sbatch", {{"job", *id}, {"nodes", n}, {"partition", config_.partition}});
      SubmitJobs(std::move(rest));
    } else {
      ++submitted_failed_;
      const auto delay = submit_backoff_.Next();
      next_submit_ = now + delay;
      last_submit_error_ = id.status().message();
      log_.Warning("sbatch failed", {{"error", last_submit_error_}, {"retry_ms", delay.count()}});
    }
    SlurmPlan empty;
    empty.held_back = nodes_held_back_;
    empty.unplaceable = trials_unplaceable_;
    UpdateNote(empty);
    RoundStep(-1);
  });
}

void SlurmProvisioner::UpdateNote(const SlurmPlan& plan) {
  std::vector<std::string> parts;
  if (!last_query_error_.empty()) parts.push_back("squeue failed: " + last_query_error_);
  if (!last_submit_error_.empty()) parts.push_back("sbatch failed: " + last_submit_error_ + " (retrying with backoff)");
  std::string pending;
  int starting = 0;
  for (const auto& [id, job] : jobs_) {
    if (job.state == SlurmJobState::kPending) {
      pending += (pending.empty() ? "" : ", ") + std::string("job ") + id + " (" + std::to_string(job.nodes) +
                 " node" + (job.nodes == 1 ? "" : "s") + ", " + (job.reason.empty() ? "pending" : job.reason) + ")";
    } else if (job.state == SlurmJobState::kRunning && job.registered_workers < job.nodes) {
      ++starting;
    }
  }
  if (!pending.empty()) parts.push_back("Slurm worker jobs pending in partition " + config_.partition + ": " + pending);
  if (starting > 0) parts.push_back(std::to_string(starting) + " Slurm job(s) started, waiting for their workers to register");
  if (plan.unplaceable > 0) {
    const int unit = policy_.limits().units_per_node;
    parts.push_back(std::to_string(plan.unplaceable) + " trial(s) need more than --slurm-max-nodes=" +
                    std::to_string(config_.max_nodes) + " nodes of " + std::to_string(unit) +
                    (config_.gpus_per_node > 0 ? " GPU(s)" : " slot(s)") + "; raise it or lower world_size");
  }
  if (plan.held_back > 0) {
    parts.push_back(std::to_string(plan.held_back) + " more node(s) wanted beyond --slurm-max-nodes=" +
                    std::to_string(config_.max_nodes) + " / --slurm-max-pending-jobs=" +
                    std::to_string(config_.max_pending_jobs));
  }
  std::string note;
  for (const auto& p : parts) note += (note.empty() ? "" : "; ") + p;
  if (note != last_note_ && !note.empty()) log_.Info("waiting", {{"why", note}});
  last_note_ = note;
  service_.SetCapacityNote(note);
}

std::string SlurmProvisioner::MetricsText() const {
  int pending = 0, running = 0, ending = 0;
  for (const auto& [id, job] : jobs_) {
    (job.state == SlurmJobState::kPending ? pending : job.state == SlurmJobState::kRunning ? running : ending)++;
  }
  std::ostringstream m;
  m << "# HELP bakeoff_slurm_jobs Slurm worker jobs of this coordinator, by state (squeue at the last poll).\n"
    << "# TYPE bakeoff_slurm_jobs gauge\n"
    << "bakeoff_slurm_jobs{state=\"pending\"} " << pending << "\n"
    << "bakeoff_slurm_jobs{state=\"running\"} " << running << "\n"
    << "bakeoff_slurm_jobs{state=\"ending\"} " << ending << "\n"
    << "# HELP bakeoff_slurm_submissions_total sbatch calls for worker jobs, by result.\n"
    << "# TYPE bakeoff_slurm_submissions_total counter\n"
    << "bakeoff_slurm_submissions_total{result=\"ok\"} " << submitted_ok_ << "\n"
    << "bakeoff_slurm_submissions_total{result=\"failed\"} " << submitted_failed_ << "\n"
    << "# HELP bakeoff_slurm_cancellations_total Worker jobs cancelled with scancel (idle, or workers never registered).\n"
    << "# TYPE bakeoff_slurm_cancellations_total counter\n"
    << "bakeoff_slurm_cancellations_total " << cancelled_ << "\n"
    << "# HELP bakeoff_slurm_nodes_held_back Nodes queued trials want beyond --slurm-max-nodes or --slurm-max-pending-jobs.\n"
    << "# TYPE bakeoff_slurm_nodes_held_back gauge\n"
    << "bakeoff_slurm_nodes_held_back " << nodes_held_back_ << "\n"
    << "# HELP bakeoff_slurm_trials_unplaceable Queued trials wider than --slurm-max-nodes nodes.\n"
    << "# TYPE bakeoff_slurm_trials_unplaceable gauge\n"
    << "bakeoff_slurm_trials_unplaceable " << trials_unplaceable_ << "\n";
  return m.str();
}

}  // namespace bakeoff::coordinator
