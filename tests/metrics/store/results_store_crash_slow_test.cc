// A writer killed with SIGKILL mid-batch leaves a database that opens, passes
// PRAGMA integrity_check and holds every batch (and every transition) whose call had
// returned before the kill, and no part of any other batch. The writer is a forked
// child that reports each committed batch number through a pipe; the parent kills it
// at an arbitrary moment while it is writing, several rounds in a row on the same file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "metrics/store/read_only_query.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using namespace testing;  // the store's test helpers: results_store_test_util.h

constexpr int kRowsPerBatch = 1000;
constexpr int kRounds = 8;

// One message per committed write, 8 bytes: the batch number (>= 0), or -(trial id) for
// a trial finished with a FULL transition.
void Report(int fd, int64_t value) {
  const char* bytes = reinterpret_cast<const char*>(&value);
  size_t left = sizeof(value);
  while (left > 0) {
    ssize_t n = ::write(fd, bytes, left);
    if (n <= 0) ::_exit(3);
    bytes += n;
    left -= static_cast<size_t>(n);
  }
}

// The child: appends batches forever (until killed), finishing a trial every few
// batches. Numbers its batches from first_batch so rounds never collide.
[[noreturn]] void WriterMain(const std::string& path, int fd, int64_t first_batch) {
  StoreOptions options;
  options.path = path;
  Result<std::unique_ptr<ResultsStore>> opened = ResultsStore::Open(options);
  if (!opened.ok()) ::_exit(2);
  ResultsStore& store = **opened;
  Result<std::vector<SweepRecord>> sweeps = store.Reader()->ListSweeps();
  if (!sweeps.ok() || sweeps->empty()) ::_exit(2);
  Result<std::vector<TrialRecord>> trials = store.Reader()->ListTrials(sweeps->front().id);
  if (!trials.ok()) ::_exit(2);
  int64_t writer_trial = trials->front().id;  // assigned by the parent, attempt 1
  for (int64_t batch = first_batch;; ++batch) {
    std::vector<StepRecord> steps;
    steps.reserve(kRowsPerBatch);
    for (int i = 0; i < kRowsPerBatch; ++i) {
      steps.push_back(Step(writer_trial, 1, 0, batch * kRowsPerBatch + i));
    }
    Result<BatchResult> written = store.AppendStepMetrics(steps);
    if (!written.ok() || written->written != kRowsPerBatch) ::_exit(4);
    Report(fd, batch);
    if (batch % 7 == 0) {
      // Finish the next queued trial: a durable transition the parent must find.
      for (const TrialRecord& trial : *trials) {
        if (trial.id == writer_trial || trial.state != TrialState::kQueued) continue;
        Result<TransitionResult> assigned = store.AssignTrial(trial.id, 0, Placement("w", "h"));
        if (!assigned.ok()) ::_exit(5);
        if (!assigned->applied) continue;  // finished in an earlier round
        Result<TransitionResult> done = store.FinishTrial(trial.id, 1, Outcome::kSucceeded, "");
        if (!done.ok() || !done->applied) ::_exit(5);
        Report(fd, -trial.id);
        break;
      }
    }
  }
}

// Reads one 8-byte report, waiting at most `timeout`; false on EOF or timeout. A zero
// timeout still reads what is already in the pipe (the drain after the kill relies on it).
bool ReadReport(int fd, int64_t* value, std::chrono::milliseconds timeout) {
  char* bytes = reinterpret_cast<char*>(value);
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got < sizeof(*value)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) return false;
    ssize_t n = ::read(fd, bytes + got, sizeof(*value) - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// Kills and reaps the child if the test leaves early.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(ResultsStoreCrashTest, WriterKilledMidBatchKeepsEveryCommittedBatch) {
  TempDir dir;
  std::string path = dir.File("results.db");
  {
    StoreOptions options;
    options.path = path;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    testing::SampleSweep sample = MakeSampleSweep("crash", /*repeats=*/20);
    Result<CreatedSweep> created = (*store)->CreateSweep(sample.sweep, sample.variants, sample.trials);
    ASSERT_TRUE(created.ok());
    ASSERT_TRUE((*store)->AssignTrial(created->trial_ids[0], 0, Placement("w", "h"))->applied);
  }  // closed before any fork: no SQLite connection crosses a fork

  std::mt19937 random(20261130);
  std::set<int64_t> committed_batches;
  std::set<int64_t> finished_trials;
  int64_t next_batch = 0;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ChildGuard child;
    child.pid = ::fork();
    ASSERT_GE(child.pid, 0);
    if (child.pid == 0) {
      ::close(fds[0]);
      WriterMain(path, fds[1], next_batch);
    }
    ::close(fds[1]);
    // Let it commit a random number of batches, then kill it at a uniformly random
    // point of the next batch period (a kill right after a report would always land
    // between batches, where there is nothing to tear).
    int wanted = 3 + static_cast<int>(random() % 12);
    int64_t highest = next_batch - 1;
    auto first_report_at = std::chrono::steady_clock::now();
    for (int seen = 0; seen < wanted;) {
      int64_t report = 0;
      ASSERT_TRUE(ReadReport(fds[0], &report, std::chrono::seconds(60)))
          << "round " << round << ": the writer stopped reporting";
      if (report >= 0) {
        committed_batches.insert(report);
        highest = std::max(highest, report);
        if (seen == 0) first_report_at = std::chrono::steady_clock::now();
        ++seen;
      } else {
        finished_trials.insert(-report);
      }
    }
    auto period = (std::chrono::steady_clock::now() - first_report_at) / std::max(1, wanted - 1);
    std::uniform_int_distribution<int64_t> jitter(0, std::chrono::duration_cast<std::chrono::microseconds>(period).count());
    std::this_thread::sleep_for(std::chrono::microseconds(jitter(random)));
    ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
    int wait_status = 0;
    ASSERT_EQ(::waitpid(child.pid, &wait_status, 0), child.pid);
    child.pid = -1;
    ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
        << "the writer exited by itself with status " << wait_status;
    // Reports written before the kill but not yet read are commits too.
    int64_t report = 0;
    while (ReadReport(fds[0], &report, std::chrono::milliseconds(0))) {
      if (report >= 0) {
        committed_batches.insert(report);
        highest = std::max(highest, report);
      } else {
        finished_trials.insert(-report);
      }
    }
    ::close(fds[0]);
    next_batch = highest + 1000;  // a gap: the killed batch's numbers are never reused

    // The database opens, is intact, and holds every reported batch whole.
    Result<QueryResult> integrity = RunReadOnlyQuery(path, "PRAGMA integrity_check");
    ASSERT_TRUE(integrity.ok()) << integrity.status().ToString();
    ASSERT_EQ(integrity->rows[0][0], "ok");
    StoreOptions options;
    options.path = path;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<QueryResult> per_batch = RunReadOnlyQuery(
        path, "SELECT step / " + std::to_string(kRowsPerBatch) +
                  " AS batch, COUNT(*) FROM step_metrics GROUP BY batch ORDER BY batch",
        QueryLimits{1'000'000, std::chrono::seconds(60)});
    ASSERT_TRUE(per_batch.ok()) << per_batch.status().ToString();
    std::set<int64_t> stored_batches;
    for (const auto& row : per_batch->rows) {
      int64_t batch = row[0].get<int64_t>();
      EXPECT_EQ(row[1].get<int64_t>(), kRowsPerBatch) << "batch " << batch << " is partial";
      stored_batches.insert(batch);
    }
    for (int64_t batch : committed_batches) {
      EXPECT_TRUE(stored_batches.count(batch)) << "committed batch " << batch << " is missing";
    }
    // At most the one batch in flight may be stored without having been reported.
    EXPECT_LE(stored_batches.size(), committed_batches.size() + round + 1);
    for (int64_t trial : finished_trials) {
      Result<TrialRecord> stored = (*store)->Reader()->GetTrial(trial);
      ASSERT_TRUE(stored.ok());
      EXPECT_EQ(stored->state, TrialState::kFinished) << "finished trial " << trial << " reverted";
    }
  }
  EXPECT_GE(committed_batches.size(), static_cast<size_t>(kRounds * 3));
}

}  // namespace
}  // namespace bakeoff::metrics
