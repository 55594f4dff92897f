// A results database on a full, failing or read-only disk: writes fail with
// kResourceExhausted / kIoError naming the file, the store turns unhealthy (so the
// coordinator refuses new work), and everything committed before stays readable.
// Faults come from a real size limit (PRAGMA max_page_count) and from a SQLite VFS
// that wraps the default one and fails writes on demand (LevelDB's
// FaultInjectionTestEnv pattern).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <cstring>

#include "metrics/store/read_only_query.h"
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

using namespace testing;  // the store's test helpers: results_store_test_util.h

// --- A VFS whose files fail xWrite/xTruncate/xSync with g_write_fault when set. -------

std::atomic<int> g_write_fault{SQLITE_OK};
constexpr const char* kFaultVfsName = "bakeoff-fault-injection";

struct FaultFile {
  sqlite3_file base;   // pMethods points at kFaultMethods
  sqlite3_file* real;  // the wrapped file, stored right after this struct
};

sqlite3_file* Real(sqlite3_file* file) { return reinterpret_cast<FaultFile*>(file)->real; }

int FaultClose(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int FaultRead(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  return Real(f)->pMethods->xRead(Real(f), buffer, amount, offset);
}
int FaultWrite(sqlite3_file* f, const void* buffer, int amount, sqlite3_int64 offset) {
  if (int fault = g_write_fault.load(); fault != SQLITE_OK) return fault;
  return Real(f)->pMethods->xWrite(Real(f), buffer, amount, offset);
}
int FaultTruncate(sqlite3_file* f, sqlite3_int64 size) {
  if (int fault = g_write_fault.load(); fault != SQLITE_OK) return fault;
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int FaultSync(sqlite3_file* f, int flags) {
  if (int fault = g_write_fault.load(); fault != SQLITE_OK) {
    return fault == SQLITE_FULL ? SQLITE_FULL : SQLITE_IOERR_FSYNC;
  }
  return Real(f)->pMethods->xSync(Real(f), flags);
}
int FaultFileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int FaultLock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int FaultUnlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int FaultCheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FaultFileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int FaultSectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int FaultDeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int FaultShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int FaultShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void FaultShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int FaultShmUnmap(sqlite3_file* f, int delete_flag) {
  return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag);
}
int FaultFetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), offset, amount, out);
}
int FaultUnfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
  return Real(f)->pMethods->xUnfetch(Real(f), offset, page);
}

const sqlite3_io_methods kFaultMethods = {
    3,          FaultClose,       FaultRead,        FaultWrite,
    FaultTruncate, FaultSync,     FaultFileSize,    FaultLock,
    FaultUnlock, FaultCheckReservedLock, FaultFileControl, FaultSectorSize,
    FaultDeviceCharacteristics, FaultShmMap, FaultShmLock, FaultShmBarrier,
    FaultShmUnmap, FaultFetch,    FaultUnfetch,
};

sqlite3_vfs g_fault_vfs;

int FaultOpen(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  auto* parent = static_cast<sqlite3_vfs*>(vfs->pAppData);
  auto* wrapper = reinterpret_cast<FaultFile*>(file);
  wrapper->real = reinterpret_cast<sqlite3_file*>(wrapper + 1);
  wrapper->base.pMethods = nullptr;
  int rc = parent->xOpen(parent, name, wrapper->real, flags, out_flags);
  // Only a file that opened (has methods) may be closed through the wrapper; the real
  // file's methods must be at least version 3 for WAL's shared memory.
  if (wrapper->real->pMethods != nullptr) wrapper->base.pMethods = &kFaultMethods;
  return rc;
}

// Forwards every VFS-level call to the default VFS.
void RegisterFaultVfsOnce() {
  static bool registered = [] {
    sqlite3_vfs* parent = sqlite3_vfs_find(nullptr);
    g_fault_vfs = *parent;
    g_fault_vfs.pNext = nullptr;
    g_fault_vfs.zName = kFaultVfsName;
    g_fault_vfs.pAppData = parent;
    g_fault_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + parent->szOsFile;
    g_fault_vfs.xOpen = FaultOpen;
    g_fault_vfs.xDelete = [](sqlite3_vfs* vfs, const char* name, int sync_dir) {
      auto* p = static_cast<sqlite3_vfs*>(vfs->pAppData);
      return p->xDelete(p, name, sync_dir);
    };
    g_fault_vfs.xAccess = [](sqlite3_vfs* vfs, const char* name, int flags, int* out) {
      auto* p = static_cast<sqlite3_vfs*>(vfs->pAppData);
      return p->xAccess(p, name, flags, out);
    };
    g_fault_vfs.xFullPathname = [](sqlite3_vfs* vfs, const char* name, int size, char* out) {
      auto* p = static_cast<sqlite3_vfs*>(vfs->pAppData);
      return p->xFullPathname(p, name, size, out);
    };
    // The remaining members (dlopen, randomness, time, syscalls) keep the parent's
    // functions, which ignore the vfs argument's identity.
    return sqlite3_vfs_register(&g_fault_vfs, 0) == SQLITE_OK;
  }();
  ASSERT_TRUE(registered);
}

class ResultsStoreFaultTest : public ::testing::Test {
 protected:
  void TearDown() override { g_write_fault = SQLITE_OK; }

  std::unique_ptr<ResultsStore> OpenStore(StoreOptions options) {
    options.path = db_path_;
    Result<std::unique_ptr<ResultsStore>> store = ResultsStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Stores a sweep and assigns its first trial; returns that trial's id.
  int64_t StartTrial(ResultsStore& store) {
    testing::SampleSweep sample = MakeSampleSweep();
    Result<CreatedSweep> created = store.CreateSweep(sample.sweep, sample.variants, sample.trials);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return 0;
    trials_ = created->trial_ids;
    EXPECT_TRUE(store.AssignTrial(trials_[0], 0, Placement("w1", "node-a"))->applied);
    return trials_[0];
  }

  struct Started {
    std::unique_ptr<ResultsStore> store;  // nullptr when it could not open (recorded)
    int64_t trial = 0;
  };
  // Opens a store with `options` and starts its first trial (StartTrial).
  Started OpenAndStart(StoreOptions options) {
    Started started{OpenStore(std::move(options))};
    if (started.store != nullptr) started.trial = StartTrial(*started.store);
    return started;
  }
  // As OpenAndStart, on the file system that fails writes with g_write_fault.
  Started OpenOnFaultyDiskAndStart() {
    RegisterFaultVfsOnce();
    StoreOptions options;
    options.env = &faulty_disk_;
    // The faults count the writer's writes: no second connection writing beside it.
    options.background_checkpoint = false;
    return OpenAndStart(options);
  }

  static std::vector<StepRecord> Batch(int64_t trial, int batch, int rows) {
    std::vector<StepRecord> steps;
    for (int i = 0; i < rows; ++i) steps.push_back(Step(trial, 1, 0, batch * rows + i));
    return steps;
  }

  int64_t CountSteps() { return CountRows(db_path_, "step_metrics"); }

  TempDir dir_;
  // The system's clock and log; the database's files through the fault VFS.
  struct FaultyDiskEnv : EnvWrapper {
    FaultyDiskEnv() : EnvWrapper(Env::Default()) {}
    std::string StoreVfs() const override { return kFaultVfsName; }
  } faulty_disk_;
  std::string db_path_ = dir_.File("results.db");
  std::vector<int64_t> trials_;
};

TEST_F(ResultsStoreFaultTest, FullDatabaseRefusesWritesAndKeepsCommittedRows) {
  StoreOptions options;
  options.max_page_count = 80;
  auto [store, trial] = OpenAndStart(options);
  ASSERT_NE(store, nullptr);

  int committed = 0;
  Status failure;
  for (int batch = 0; batch < 1000; ++batch) {
    Result<BatchResult> written = store->AppendStepMetrics(Batch(trial, batch, 200));
    if (!written.ok()) {
      failure = written.status();
      break;
    }
    ++committed;
  }
  ASSERT_FALSE(failure.ok()) << "80 pages never filled up";
  ASSERT_GT(committed, 0);
  EXPECT_EQ(failure.code(), Status::Code::kResourceExhausted) << failure.ToString();
  EXPECT_NE(failure.message().find(db_path_), std::string::npos) << failure.message();
  EXPECT_FALSE(store->healthy());
  EXPECT_EQ(store->health().code(), Status::Code::kResourceExhausted);
  // Still full: the probe says so rather than declaring the store healthy.
  EXPECT_EQ(store->Probe().code(), Status::Code::kResourceExhausted);
  EXPECT_FALSE(store->healthy());

  // Every committed batch is intact, through the store and through another connection.
  EXPECT_EQ(CountSteps(), committed * 200);
  Result<std::vector<StepRecord>> read = store->Reader()->ReadStepMetrics(trial);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(static_cast<int>(read->size()), committed * 200);
  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, TrialState::kAssigned);

  // With room again (a larger limit), the store recovers.
  store.reset();
  options.max_page_count = 100000;
  store = OpenStore(options);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Probe().ok());
  EXPECT_TRUE(store->healthy());
  EXPECT_TRUE(store->AppendStepMetrics(Batch(trial, 5000, 10)).ok());
  EXPECT_EQ(CountSteps(), committed * 200 + 10);
}

struct DiskFault {
  const char* name;
  int sqlite_code;                 // what the file system returns
  Status::Code expected;           // what the store reports
};

class ResultsStoreDiskFaultTest : public ResultsStoreFaultTest,
                                  public ::testing::WithParamInterface<DiskFault> {};

TEST_P(ResultsStoreDiskFaultTest, FailingDiskMakesStoreUnhealthyAndKeepsCommittedRows) {
  auto [store, trial] = OpenOnFaultyDiskAndStart();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendStepMetrics(Batch(trial, 0, 50)).ok());
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);

  g_write_fault = GetParam().sqlite_code;
  Result<BatchResult> batch = store->AppendStepMetrics(Batch(trial, 1, 50));
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), GetParam().expected) << batch.status().ToString();
  EXPECT_NE(batch.status().message().find(db_path_), std::string::npos);
  EXPECT_FALSE(store->healthy());
  Result<TransitionResult> finish = store->FinishTrial(trial, 1, Outcome::kSucceeded, "");
  ASSERT_FALSE(finish.ok());
  EXPECT_EQ(finish.status().code(), GetParam().expected) << finish.status().ToString();
  EXPECT_FALSE(store->Probe().ok());
  EXPECT_FALSE(store->healthy());

  // Reads work meanwhile and see exactly what was committed before the fault.
  Result<std::vector<StepRecord>> read = store->Reader()->ReadStepMetrics(trial);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->size(), 50u);
  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, TrialState::kRunning);

  // The disk recovers: Probe() restores health and the refused transition now applies.
  g_write_fault = SQLITE_OK;
  EXPECT_TRUE(store->Probe().ok());
  EXPECT_TRUE(store->healthy());
  Result<TransitionResult> retried = store->FinishTrial(trial, 1, Outcome::kSucceeded, "");
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_TRUE(retried->applied);
  store.reset();
  EXPECT_EQ(CountSteps(), 50);
  Result<QueryResult> check = RunReadOnlyQuery(db_path_, "PRAGMA integrity_check");
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->rows[0][0], "ok");
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ResultsStoreDiskFaultTest,
    ::testing::Values(DiskFault{"NoSpaceLeft", SQLITE_FULL, Status::Code::kResourceExhausted},
                      DiskFault{"WriteError", SQLITE_IOERR_WRITE, Status::Code::kIoError},
                      DiskFault{"ReadOnly", SQLITE_READONLY, Status::Code::kIoError}),
    [](const ::testing::TestParamInfo<DiskFault>& info) { return std::string(info.param.name); });

// Group commit on a failing disk: the group's writes succeed in memory, its commit
// fails; the commit says so (the caller must not have acknowledged any of it), the
// store turns unhealthy, and none of the group is on disk while everything committed
// before it is.
TEST_F(ResultsStoreFaultTest, AGroupWhoseCommitFailsLosesOnlyItselfAndSaysSo) {
  auto [store, trial] = OpenOnFaultyDiskAndStart();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendStepMetrics(Batch(trial, 0, 50)).ok());

  store->BeginGroup();
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  ASSERT_TRUE(store->AppendStepMetrics(Batch(trial, 1, 50)).ok());
  ASSERT_TRUE(store->FinishTrial(trial, 1, Outcome::kSucceeded, "")->applied);
  g_write_fault = SQLITE_IOERR;
  Status committed = store->CommitGroup();
  EXPECT_FALSE(committed.ok());
  EXPECT_EQ(committed.code(), Status::Code::kIoError) << committed.ToString();
  EXPECT_FALSE(store->healthy());
  EXPECT_FALSE(store->in_group());

  g_write_fault = SQLITE_OK;
  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->state, TrialState::kAssigned) << "the lost group's transitions are not stored";
  EXPECT_EQ(CountSteps(), 50) << "the batch committed before the group is kept";
  // Once the disk writes again, the same transitions apply (the worker sends them again).
  EXPECT_TRUE(store->Probe().ok());
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  ASSERT_TRUE(store->FinishTrial(trial, 1, Outcome::kSucceeded, "")->applied);
}

// A disk error inside a group's write rolls back the whole transaction (SQLite may do
// it by itself; the store then does it always): the writes before it in the group are gone, so every later write of the group is
// refused and the commit reports the loss (nothing after the loss may commit decisions
// taken on the lost writes).
TEST_F(ResultsStoreFaultTest, AWriteThatLosesTheGroupsTransactionFailsTheRestOfTheGroup) {
  StoreOptions options;
  options.max_page_count = 80;
  auto [store, trial] = OpenAndStart(options);
  ASSERT_NE(store, nullptr);
  store->BeginGroup();
  ASSERT_TRUE(store->MarkRunning(trial, 1)->applied);
  Status failure;
  for (int batch = 0; batch < 1000 && failure.ok(); ++batch) {
    Result<BatchResult> written = store->AppendStepMetrics(Batch(trial, batch, 200));
    if (!written.ok()) failure = written.status();
  }
  ASSERT_FALSE(failure.ok()) << "80 pages never filled up";
  EXPECT_EQ(failure.code(), Status::Code::kResourceExhausted) << failure.ToString();
  EXPECT_FALSE(store->healthy());
  Result<TransitionResult> later = store->FinishTrial(trial, 1, Outcome::kSucceeded, "");
  EXPECT_FALSE(later.ok()) << "a write after the group lost its transaction must not commit";
  Status committed = store->CommitGroup();
  EXPECT_EQ(committed.code(), Status::Code::kResourceExhausted) << committed.ToString();
  Result<TrialRecord> stored = store->Reader()->GetTrial(trial);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, TrialState::kAssigned) << "the group's mark-running went with its transaction";
}

}  // namespace
}  // namespace bakeoff::metrics
