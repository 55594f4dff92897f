// What the coordinator's test suites share, besides the per-test directory of the
// integration suites (test_files.h, FreshTestDir): the results store in it (optionally
// capped: a disk that fills up), a coordinator service over it as after a start or
// restart, a worker's attempt_finished frame, and the tiny LoRA workload their sweeps run.
// Thread-safety: test code, on the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "coordinator/coordinator_config.h"
#include "coordinator/coordinator_service.h"
#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "protocol/messages.h"
#include "tests/integration/test_files.h"  // FreshTestDir
#include "tests/protocol/test_env.h"

namespace bakeoff::testing {

// The workload of the test sweeps: a few steps of the tiny model (a YAML block).
inline constexpr const char* kTinyWorkload = R"(workload:
  executor: lora
  model: tiny
  seq_len: 16
  warmup_steps: 1
  steps: 2
)";

// A worker's registration: `name` on host `host` with `slots` CPU slots, offering
// `executors` (command templates).
inline protocol::RegisterMessage Registration(const std::string& name, int slots, const std::string& host = "127.0.0.1",
                                              std::vector<std::string> executors = {}) {
  protocol::RegisterMessage m;
  m.worker_name = name;
  m.host = host;
  m.resources.cpu_slots = slots;
  m.store_ports = {30000, 30002};
  m.executors = std::move(executors);
  return m;
}

// Opens (creating) `dir`/results.db into `store`; `max_page_count` 0: not capped.
inline void OpenTestStore(const std::filesystem::path& dir, std::unique_ptr<metrics::ResultsStore>& store,
                          std::int64_t max_page_count = 0) {
  metrics::StoreOptions options;
  options.path = (dir / "results.db").string();
  options.max_page_count = max_page_count;
  auto opened = metrics::ResultsStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store = std::move(opened).value();
}

// Starts `service` anew over `store` (a coordinator start or restart) and recovers it.
inline void StartService(std::unique_ptr<coordinator::CoordinatorService>& service, boost::asio::io_context& io,
                         const coordinator::CoordinatorConfig& config, metrics::ResultsStore& store, const Env& env) {
  service = std::make_unique<coordinator::CoordinatorService>(io.get_executor(), config, store, env);
  ASSERT_TRUE(service->Recover().ok());
}

// The attempt_finished frame a worker sends for its part of `attempt`.
inline nlohmann::json FinishedFrame(const protocol::AttemptRef& attempt, const std::string& outcome,
                                    std::int64_t outbox_seq = 0, const std::string& reason = "") {
  protocol::AttemptFinishedMessage done;
  done.attempt = attempt;
  done.outcome = outcome;
  done.reason = reason;
  done.outbox_seq = outbox_seq;
  return protocol::ToJson(done);
}

}  // namespace bakeoff::testing
