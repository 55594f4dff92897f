#include "coordinator/slurm_policy.h"

#include <algorithm>
#include <numeric>

namespace bakeoff::coordinator {

SlurmPlan SlurmPolicy::Plan(const std::vector<int>& queued, const std::vector<int>& free_units,
                            const std::vector<SlurmJob>& jobs, Clock::TimePoint now) const {
  SlurmPlan plan;
  const int unit = std::max(1, limits_.units_per_node);

  // Supply: live workers' free units, and a node's worth per node not yet registered.
  std::vector<int> bins(free_units.begin(), free_units.end());
  int nodes_held = 0;
  int jobs_unregistered = 0;
  for (const auto& job : jobs) {
    nodes_held += job.nodes;
    const int missing = std::max(0, job.nodes - job.registered_workers);
    if (missing > 0 && job.state != SlurmJobState::kEnding) {
      ++jobs_unregistered;
      for (int i = 0; i < missing; ++i) bins.push_back(unit);
    }
  }

  // Demand placed onto supply, then onto new nodes.
  std::vector<int> new_jobs;  // node counts, in order
  std::vector<int> new_bins;  // free units of new single-node jobs (small trials share them)
  std::vector<std::size_t> new_bin_job;
  const std::size_t n = std::min(queued.size(), kMaxLookahead);
  plan.demand = static_cast<int>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int ws = std::max(1, queued[i]);
    if (ws > limits_.max_nodes * unit) {
      ++plan.unplaceable;
      continue;
    }
    auto fits = std::find_if(bins.begin(), bins.end(), [ws](int free) { return free >= ws; });
    if (fits != bins.end()) {
      *fits -= ws;
      continue;
    }
    if (std::accumulate(bins.begin(), bins.end(), 0) >= ws) {  // spread, largest first
      int left = ws;
      std::sort(bins.begin(), bins.end(), std::greater<int>());
      for (int& free : bins) {
        const int take = std::min(free, left);
        free -= take;
        left -= take;
        if (left == 0) break;
      }
      continue;
    }
    if (ws <= unit) {
      auto shared = std::find_if(new_bins.begin(), new_bins.end(), [ws](int free) { return free >= ws; });
      if (shared != new_bins.end()) {
        *shared -= ws;
        continue;
      }
      new_bins.push_back(unit - ws);
      new_jobs.push_back(1);
      continue;
    }
    new_jobs.push_back((ws + unit - 1) / unit);  // one gang job
  }

  // Limits, in order; the first job that does not fit holds back the rest.
  int submits = 0;
  for (std::size_t i = 0; i < new_jobs.size(); ++i) {
    const int nodes = new_jobs[i];
    if (nodes_held + nodes > limits_.max_nodes || jobs_unregistered + 1 > limits_.max_pending_jobs ||
        submits + 1 > limits_.max_submits_per_poll) {
      for (std::size_t j = i; j < new_jobs.size(); ++j) plan.held_back += new_jobs[j];
      break;
    }
    plan.submit_nodes.push_back(nodes);
    nodes_held += nodes;
    ++jobs_unregistered;
    ++submits;
  }

  // Cancellations.
  for (const auto& job : jobs) {
    if (job.state == SlurmJobState::kEnding) continue;
    if (job.state == SlurmJobState::kRunning && job.running_since && job.registered_workers < job.nodes &&
        now - *job.running_since >= limits_.worker_start_timeout) {
      plan.cancel.push_back(job.id);
      plan.cancel_reasons.push_back("its worker(s) did not register within the start timeout (" +
                                    std::to_string(job.registered_workers) + " of " + std::to_string(job.nodes) +
                                    "); see the job's output file");
      continue;
    }
    if (n > 0 || job.busy_workers > 0) continue;
    if (now - job.last_active >= limits_.idle_grace) {
      plan.cancel.push_back(job.id);
      plan.cancel_reasons.push_back(job.state == SlurmJobState::kPending
                                        ? "no trial waits for it (still pending in Slurm's queue)"
                                        : "its workers are idle and no trial waits");
    }
  }
  return plan;
}

}  // namespace bakeoff::coordinator
