// The coordinator obtains its workers from a real Slurm (slurmctld, slurmd and munged
// that the test configures and starts itself, tests/integration/slurm_cluster.h): a
// sweep submitted to `bakeoff coordinator --slurm-partition` gets its workers through
// sbatch, runs to the end, and the idle worker jobs are cancelled (squeue shows none);
// a worker that Slurm signals (time limit or preemption) requeues its trial, which then
// succeeds on a new job's worker. Most tests run the simulated workload (`--simulate`):
// the Slurm path is what they test; one runs the real trainer (two Gloo ranks, tiny
// model, 5 steps) in a Slurm worker job.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/integration/slurm_cluster.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

std::string SimulatedSweep(const std::string& name, int variants, int repeats, int steps) {
  std::string values;
  for (int v = 1; v <= variants; ++v) values += (values.empty() ? "" : ", ") + std::to_string(v);
  return "name: " + name +
         "\n"
         "question: do Slurm workers run it?\n"
         "workload:\n"
         "  executor: lora\n"
         "  model: tiny\n"
         "  seq_len: 16\n"
         "  warmup_steps: 1\n"
         "  steps: " +
         std::to_string(steps) +
         "\n"
         "parameters:\n"
         "  micro_batch: {values: [" +
         values +
         "]}\n"
         "baseline: {micro_batch: 1}\n"
         "repeats: " +
         std::to_string(repeats) +
         "\n"
         "limits: {trial_timeout: 5m, max_attempts: 3}\n";
}

class SlurmProvisioningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = SlurmCluster::WhyNot(); !why.empty()) GTEST_SKIP() << why;
    dir_ = FreshTestDir("bakeoff-slurm");
    slurm_ = std::make_unique<SlurmCluster>();
    ASSERT_TRUE(slurm_->Start());
    // The coordinator inherits it and runs sbatch/squeue/scancel against this Slurm.
    setenv("SLURM_CONF", slurm_->conf_path().c_str(), 1);
    cluster_ = std::make_unique<TestCluster>(dir_, "");
  }
  void TearDown() override {
    cluster_.reset();  // the coordinator first: it submits nothing more
    slurm_.reset();    // cancels every job, waits for squeue to be empty, stops Slurm
  }

  bool StartCoordinator(const std::string& idle_grace, const std::string& partition = "test",
                        const std::string& workload = "--simulate --simulate-step-ms 20", int slots = 1) {
    return cluster_->StartCoordinator(
        {"--slurm-partition", partition, "--slurm-max-nodes", "2", "--slurm-slots-per-node", std::to_string(slots),
         "--slurm-idle-grace", idle_grace, "--slurm-poll-interval", "500ms", "--slurm-job-name", job_name_,
         "--slurm-worker-args",
         workload + " --host 127.0.0.1 --metrics-listen off --work-dir " + (dir_ / "worker-dirs").string()});
  }
  // Our jobs squeue lists.
  std::vector<coordinator::SlurmQueueEntry> OurJobs() {
    auto r = slurm_->Run({"squeue", "--noheader", "--name=" + job_name_, "--format=%i|%T|%D|%r"});
    return coordinator::ProcessSlurmClient::ParseQueue(r.out);
  }
  json Workers() {
    auto w = cluster_->client().GetJson("/api/v1/workers");
    return w.ok() ? *w : json::array();
  }
  std::string Log() { return ReadFile(cluster_->CoordinatorLog()); }
  std::string Diagnostics() {
    std::string out = "coordinator log:\n" + Log() + "\nsqueue:\n" + slurm_->Run({"squeue"}).out + "\njob outputs:\n";
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_ / "slurm", ec)) {
      if (f.path().extension() == ".out") out += f.path().string() + ":\n" + ReadFile(f.path()) + "\n";
    }
    auto tail = [](const std::string& s) { return s.size() > 4000 ? s.substr(s.size() - 4000) : s; };
    return out + "slurmctld (tail):\n" + tail(ReadFile(slurm_->log_dir() / "slurmctld.log")) + "\nslurmd (tail):\n" +
           tail(ReadFile(slurm_->log_dir() / "slurmd.log"));
  }

  std::filesystem::path dir_;
  std::string job_name_ = "bakeoff-test-" + std::to_string(getpid());
  std::unique_ptr<SlurmCluster> slurm_;
  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(SlurmProvisioningTest, SweepGetsItsWorkersThroughSbatchAndIdleJobsAreCancelled) {
  ASSERT_TRUE(StartCoordinator("3s"));
  // Nothing queued: nothing submitted.
  EXPECT_TRUE(OurJobs().empty());
  cluster_->Submit(SimulatedSweep("slurm-e2e", 2, 2, 40));
  ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 180s)) << Diagnostics();

  // Every trial succeeded once, on workers started by Slurm jobs.
  auto rows = cluster_->Query("SELECT t.outcome, a.worker_id FROM trials t JOIN attempts a ON a.trial_id = t.id AND "
                              "a.attempt = t.attempts_used WHERE t.sweep_id = " +
                              std::to_string(cluster_->sweep_id()));
  ASSERT_EQ(rows.size(), 4u);
  std::map<std::string, std::string> job_of;
  for (const auto& w : Workers()) job_of[w["id"]] = w.value("slurm_job_id", "");
  for (const auto& r : rows) {
    EXPECT_EQ(r[0], "succeeded");
    const std::string worker = r[1];
    ASSERT_TRUE(job_of.count(worker)) << worker;
    EXPECT_FALSE(job_of[worker].empty()) << "worker " << worker << " has no Slurm job";
    EXPECT_EQ(worker, slurm_->node() + "-" + job_of[worker]);  // its name comes from the allocation
  }
  const std::string log = Log();
  EXPECT_NE(log.find("sbatch job="), std::string::npos) << log;

  // Idle after the grace with nothing queued: cancelled, and squeue shows none of ours.
  ASSERT_TRUE(WaitFor([&] { return OurJobs().empty(); }, 90s)) << Diagnostics();
  EXPECT_NE(Log().find("scancel job="), std::string::npos);
  auto metrics = cluster_->client().GetText("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->find("bakeoff_slurm_submissions_total{result=\"ok\"}"), std::string::npos);
  EXPECT_EQ(metrics->find("bakeoff_slurm_cancellations_total 0\n"), std::string::npos) << *metrics;
}

TEST_F(SlurmProvisioningTest, WorkerSignalledBySlurmRequeuesItsTrialWhichThenSucceeds) {
  ASSERT_TRUE(StartCoordinator("2s"));
  // One trial of about 20 s (1000 simulated steps of 20 ms).
  cluster_->Submit(SimulatedSweep("slurm-signal", 1, 1, 1000));
  std::string job;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& t : cluster_->Trials()) {
          if (t.value("state", "") != "running") continue;
          for (const auto& w : Workers()) {
            if (w["id"] == t.value("worker_id", "")) job = w.value("slurm_job_id", "");
          }
        }
        return !job.empty();
      },
      120s))
      << Diagnostics();
  // What Slurm sends before a time limit (sbatch --signal=USR1@N) or on preemption.
  auto signalled = slurm_->Run({"scancel", "--signal=USR1", job});
  ASSERT_EQ(signalled.exit_code, 0) << signalled.err;

  ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 180s)) << Diagnostics();
  auto attempts = cluster_->Query("SELECT a.attempt, a.outcome, a.reason FROM attempts a JOIN trials t ON t.id = "
                                  "a.trial_id WHERE t.sweep_id = " +
                                  std::to_string(cluster_->sweep_id()) + " ORDER BY a.attempt");
  // Exactly two: the worker said it was leaving before it reported, so the requeued trial
  // was not placed on it again.
  ASSERT_EQ(attempts.size(), 2u) << Diagnostics();
  EXPECT_EQ(attempts[0][1], "lost");  // requeued: not the trial's fault, not final
  EXPECT_NE(attempts[0][2].get<std::string>().find("SIGUSR1"), std::string::npos) << attempts[0][2];
  EXPECT_EQ(attempts.back()[1], "succeeded");
  auto trial = cluster_->Query("SELECT outcome FROM trials WHERE sweep_id = " + std::to_string(cluster_->sweep_id()));
  ASSERT_EQ(trial.size(), 1u);
  EXPECT_EQ(trial[0][0], "succeeded");
  // The signalled worker left (its job ended), and the new job is cancelled once idle.
  ASSERT_TRUE(WaitFor([&] { return OurJobs().empty(); }, 90s)) << Diagnostics();
}

TEST_F(SlurmProvisioningTest, RealTrainerSweepRunsInSlurmWorkerJobs) {
  const std::string trainer = RealTrainerPath();
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no trainer at " << trainer << " (build bakeoff-trainer)";
  // Two-rank Gloo trials on one two-slot worker per job.
  ASSERT_TRUE(StartCoordinator("3s", "test", "--trainer " + trainer, /*slots=*/2));
  cluster_->Submit(
      "name: slurm-real\n"
      "question: does the real trainer run in Slurm worker jobs?\n"
      "workload: {executor: lora, model: tiny, seq_len: 32, warmup_steps: 1, steps: 5, threads: 1}\n"
      "parameters:\n"
      "  micro_batch: {values: [1, 2]}\n"
      "  world_size: {value: 2}\n"
      "baseline: {micro_batch: 1}\n"
      "repeats: 1\n");
  ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 300s)) << Diagnostics();
  auto rows = cluster_->Query("SELECT t.outcome, a.worker_id FROM trials t JOIN attempts a ON a.trial_id = t.id AND "
                              "a.attempt = t.attempts_used WHERE t.sweep_id = " +
                              std::to_string(cluster_->sweep_id()));
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r[0], "succeeded") << Diagnostics();
    EXPECT_EQ(r[1].get<std::string>().rfind(slurm_->node() + "-", 0), 0u) << r[1];
  }
  ASSERT_TRUE(WaitFor([&] { return OurJobs().empty(); }, 90s)) << Diagnostics();
}

TEST_F(SlurmProvisioningTest, StaticBatchScriptStartsAWorkerThatRunsASweep) {
  // No --slurm-partition: the site submits deploy/slurm/bakeoff-worker.sbatch itself.
  ASSERT_TRUE(cluster_->StartCoordinator());
  setenv("BAKEOFF_COORDINATOR", ("127.0.0.1:" + std::to_string(cluster_->worker_port())).c_str(), 1);
  setenv("BAKEOFF_WORKER_TOKEN_FILE", (dir_ / "worker-token").c_str(), 1);
  setenv("BAKEOFF_BIN", (std::string(BAKEOFF_BINARY_DIR) + "/bakeoff").c_str(), 1);
  setenv("BAKEOFF_WORKER_ARGS", "--simulate --simulate-step-ms 20 --host 127.0.0.1 --metrics-listen off", 1);
  auto submitted = slurm_->Run({"sbatch", "--parsable", "--job-name=" + job_name_, "--partition=test",
                                "--output=" + (dir_ / "static-%j.out").string(),
                                std::string(BAKEOFF_SOURCE_DIR) + "/deploy/slurm/bakeoff-worker.sbatch"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string job = coordinator::ProcessSlurmClient::ParseJobId(submitted.out);
  ASSERT_FALSE(job.empty()) << submitted.out;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& w : Workers()) {
          if (w.value("slurm_job_id", "") == job && w.value("connected", false)) return true;
        }
        return false;
      },
      120s))
      << ReadFile(dir_ / ("static-" + job + ".out")) << Diagnostics();
  cluster_->Submit(SimulatedSweep("slurm-static", 2, 1, 20));
  ASSERT_TRUE(WaitFor([&] { return cluster_->SweepFinished(); }, 120s)) << Diagnostics();
  // scancel: the worker leaves cleanly (gone, not lost) and the job ends.
  ASSERT_EQ(slurm_->Run({"scancel", job}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return OurJobs().empty(); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return cluster_->WorkerState(slurm_->node() + "-" + job) == "gone"; }, 30s))
      << Workers().dump();
}

TEST_F(SlurmProvisioningTest, FailingSbatchIsShownAsTheSweepsWaitingReasonAndTheCoordinatorCarriesOn) {
  ASSERT_TRUE(StartCoordinator("2s", "no-such-partition"));
  cluster_->Submit(SimulatedSweep("slurm-bad-partition", 1, 1, 10));
  std::string waiting;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto sweep = cluster_->client().GetJson("/api/v1/sweeps/" + std::to_string(cluster_->sweep_id()));
        waiting = sweep.ok() ? sweep->value("waiting", "") : "";
        return waiting.find("sbatch failed") != std::string::npos;
      },
      60s))
      << Diagnostics();
  // Slurm's own words say what is wrong.
  EXPECT_NE(waiting.find("partition"), std::string::npos) << waiting;
  EXPECT_NE(Log().find("sbatch failed: sbatch exited 1"), std::string::npos) << Log();
  auto metrics = cluster_->client().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();  // still serving
  EXPECT_NE(metrics->find("bakeoff_slurm_submissions_total{result=\"failed\"}"), std::string::npos);
  EXPECT_TRUE(OurJobs().empty());
  auto trials = cluster_->Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].value("state", ""), "queued");  // waits, is not failed
}

}  // namespace
}  // namespace bakeoff::testing
