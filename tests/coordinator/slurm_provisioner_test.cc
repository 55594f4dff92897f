#include "coordinator/slurm_provisioner.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::coordinator {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Answers from the test's script, completed on the executor like the real client.
class FakeSlurmClient : public SlurmClient {
 public:
  explicit FakeSlurmClient(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}
  void Submit(const SlurmSubmitRequest& request, std::function<void(Result<std::string>)> done) override {
    submits.push_back(request);
    Result<std::string> r = submit_error.empty() ? Result<std::string>(std::to_string(++next_id))
                                                 : Result<std::string>(Status::Unavailable(submit_error));
    if (r.ok()) queue.push_back({*r, "PENDING", request.nodes, "Priority"});
    boost::asio::post(executor_, [done, r]() { done(r); });
  }
  void Query(const std::string&, std::function<void(Result<std::vector<SlurmQueueEntry>>)> done) override {
    ++queries;
    Result<std::vector<SlurmQueueEntry>> r = query_error.empty() ? Result<std::vector<SlurmQueueEntry>>(queue)
                                                                 : Result<std::vector<SlurmQueueEntry>>(Status::Unavailable(query_error));
    boost::asio::post(executor_, [done, r]() { done(r); });
  }
  void Cancel(const std::vector<std::string>& ids, std::function<void(Status)> done) override {
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
    for (const auto& id : ids) {
      std::erase_if(queue, [&](const SlurmQueueEntry& e) { return e.id == id; });
    }
    boost::asio::post(executor_, [done]() { done(Status::Ok()); });
  }

  boost::asio::any_io_executor executor_;
  std::vector<SlurmSubmitRequest> submits;
  std::vector<SlurmQueueEntry> queue;
  std::vector<std::string> cancelled;
  std::string submit_error, query_error;
  int next_id = 100;
  int queries = 0;
};

class NullLink : public WorkerLink {
 public:
  Status Send(const json&) override { return Status::Ok(); }
  void Close() override {}
};

const char* kSweep = R"(name: slurm
question: are workers obtained?
workload: {executor: lora, model: tiny, seq_len: 16, warmup_steps: 1, steps: 2}
parameters:
  micro_batch: {values: [1, 2]}
  world_size: {value: 2}
baseline: {micro_batch: 1}
repeats: 1
)";

class SlurmProvisionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-slurmprov");
    ASSERT_NO_FATAL_FAILURE(testing::OpenTestStore(dir_, store_));
    ASSERT_NO_FATAL_FAILURE(testing::StartService(service_, io_, config_, *store_, env_));
    slurm_.partition = "gpu";
    slurm_.gpus_per_node = 0;
    slurm_.slots_per_node = 2;  // world size 2 fits one node
    slurm_.max_nodes = 4;
    slurm_.idle_grace = 60s;
    slurm_.worker_token_file = (dir_ / "worker-token").string();
    slurm_.worker_binary = "/opt/bakeoff/bin/bakeoff";
    slurm_.coordinator_address = "coord:7070";
    slurm_.work_dir = (dir_ / "slurm").string();
    ASSERT_TRUE(slurm_.Validate().ok());
    auto client = std::make_unique<FakeSlurmClient>(io_.get_executor());
    client_ = client.get();
    provisioner_ = std::make_unique<SlurmProvisioner>(io_.get_executor(), slurm_, *service_, std::move(client));
    ASSERT_TRUE(provisioner_->Start().ok());
  }
  void TearDown() override {
    provisioner_.reset();
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Pump() {
    io_.restart();
    io_.poll();
  }
  void Round() {
    provisioner_->Poll();
    Pump();
  }
  std::int64_t Submit() {
    auto result = service_->SubmitSweep(kSweep);
    EXPECT_TRUE(std::holds_alternative<json>(result));
    return std::get<json>(result)["id"];
  }
  void RegisterFromJob(const std::string& name, const std::string& job) {
    protocol::RegisterMessage m;
    m.worker_name = name;
    m.host = "127.0.0.1";
    m.resources.cpu_slots = 2;
    m.store_ports = {30000, 30010};
    m.slurm_job_id = job;
    auto link = std::make_shared<NullLink>();
    auto reply = service_->OnRegister(m, link);
    ASSERT_EQ(reply["type"], "registered") << reply.dump();
    links_[name] = link;
    Pump();
  }
  // Every worker reports each attempt it runs finished with `outcome`.
  void FinishAll(const std::string& outcome) {
    std::int64_t seq = 0;
    for (const auto& w : WorkersJson(service_->State())) {
      for (const auto& a : w["running"]) {
        const json done = testing::FinishedFrame({a["trial_id"], a["attempt"]}, outcome, ++seq);
        service_->OnFrame(w["id"], links_[w["id"]].get(), done);
      }
    }
    Pump();
  }

  std::filesystem::path dir_;
  boost::asio::io_context io_;
  FakeClock clock_;
  TestEnv env_{clock_};  // the service's time and log
  CoordinatorConfig config_;
  SlurmConfig slurm_;
  std::unique_ptr<metrics::ResultsStore> store_;
  std::unique_ptr<CoordinatorService> service_;
  FakeSlurmClient* client_ = nullptr;
  std::map<std::string, std::shared_ptr<NullLink>> links_;
  std::unique_ptr<SlurmProvisioner> provisioner_;
};

TEST_F(SlurmProvisionerTest, NothingQueuedSubmitsNothing) {
  Pump();  // Start's first round
  Round();
  EXPECT_GE(client_->queries, 1);
  EXPECT_TRUE(client_->submits.empty());
}

TEST_F(SlurmProvisionerTest, QueuedTrialsGetOneJobEachAndTheSweepSaysItWaitsForThem) {
  const auto sweep = Submit();
  Round();
  ASSERT_EQ(client_->submits.size(), 2u);  // two world-size-2 trials, 2 slots per node
  const auto& args = client_->submits[0].sbatch_args;
  auto has = [&](const std::string& a) { return std::find(args.begin(), args.end(), a) != args.end(); };
  EXPECT_TRUE(has("--partition=gpu"));
  EXPECT_TRUE(has("--nodes=1"));
  EXPECT_TRUE(has("--cpus-per-task=2"));
  EXPECT_TRUE(has("--signal=USR1@120"));
  EXPECT_NE(WaitingReason(service_->State(), sweep).find("job 101 (1 node, "), std::string::npos)
      << WaitingReason(service_->State(), sweep);
  // The next round counts the pending jobs as capacity: no more submissions.
  Round();
  EXPECT_EQ(client_->submits.size(), 2u);
  EXPECT_NE(service_->MetricsText().find("bakeoff_slurm_jobs{state=\"pending\"} 2"), std::string::npos);
}

TEST_F(SlurmProvisionerTest, IdleJobsAreCancelledAfterTheGraceOnceNothingWaits) {
  Submit();
  Round();
  ASSERT_EQ(client_->submits.size(), 2u);
  for (auto& e : client_->queue) e.state = "RUNNING";
  RegisterFromJob("n1-101", "101");
  RegisterFromJob("n1-102", "102");
  Round();
  // A busy job is kept, whatever the time.
  clock_.Advance(61s);
  Round();
  EXPECT_TRUE(client_->cancelled.empty());
  // The pair's other side then runs on the first side's worker (docs/sweep.md,
  // "Placement"); once it ends nothing runs or waits any more; still within the grace.
  FinishAll("succeeded");
  Round();
  EXPECT_TRUE(client_->cancelled.empty());
  FinishAll("succeeded");
  Round();
  EXPECT_TRUE(client_->cancelled.empty());
  clock_.Advance(61s);
  Round();
  EXPECT_EQ(client_->cancelled, (std::vector<std::string>{"101", "102"}));
  EXPECT_NE(service_->MetricsText().find("bakeoff_slurm_cancellations_total 2"), std::string::npos);
}

TEST_F(SlurmProvisionerTest, FailedSbatchIsTheWaitingReasonAndTheNextTryWaitsABackoff) {
  client_->submit_error = "sbatch exited 1: sbatch: error: invalid account or account/partition combination";
  const auto sweep = Submit();
  Round();
  ASSERT_EQ(client_->submits.size(), 1u);  // the first failure stops this round's submissions
  EXPECT_NE(WaitingReason(service_->State(), sweep).find("invalid account"), std::string::npos)
      << WaitingReason(service_->State(), sweep);
  Round();
  EXPECT_EQ(client_->submits.size(), 1u);  // within the back-off
  clock_.Advance(13s);                     // past 10 s (poll interval) +20% jitter
  client_->submit_error.clear();
  Round();
  EXPECT_EQ(client_->submits.size(), 3u);
  EXPECT_EQ(WaitingReason(service_->State(), sweep).find("sbatch failed"), std::string::npos);
}

TEST_F(SlurmProvisionerTest, FailingSqueueSubmitsAndCancelsNothing) {
  client_->query_error = "squeue exited 1: slurm_load_jobs error: Unable to contact slurm controller";
  const auto sweep = Submit();
  Round();
  EXPECT_TRUE(client_->submits.empty());
  EXPECT_NE(WaitingReason(service_->State(), sweep).find("Unable to contact slurm controller"), std::string::npos);
}

TEST_F(SlurmProvisionerTest, BatchScriptRunsOneWorkerPerNodeWithTheTokenFileNotTheToken) {
  const std::string script = SlurmProvisioner::BatchScript(slurm_);
  EXPECT_NE(script.find("exec srun --ntasks-per-node=1"), std::string::npos) << script;
  EXPECT_NE(script.find("'/opt/bakeoff/bin/bakeoff' worker --coordinator 'coord:7070' --token-file"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("--slots 2"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::coordinator
