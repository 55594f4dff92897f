// CoordinatorNode: a whole coordinator (results store, service, worker listener, HTTP
// API) on one executor, as `bakeoff coordinator` and `bakeoff local` run it. Start opens
// the store, recovers unfinished sweeps, binds both listeners (port 0: a free port, see
// http_port() / worker_port()) and starts serving.
// Time, logs and the store's files come from the Env it is given (protocol/env.h), which
// it hands to every part. Thread-safety: construct, Start and Stop on the executor's
// thread (or before it runs).
#pragma once

#include <memory>

#include "protocol/env.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/http_server.h"
#include "coordinator/slurm_provisioner.h"
#include "coordinator/worker_server.h"
#include "metrics/store/results_store.h"

namespace bakeoff::coordinator {

class CoordinatorNode {
 public:
  // `env` must outlive this.
  CoordinatorNode(boost::asio::any_io_executor executor, CoordinatorConfig config, const Env& env = Env::Default());
  ~CoordinatorNode();

  Status Start();
  void Stop();

  int http_port() const { return http_ ? http_->port() : 0; }
  int worker_port() const { return workers_ ? workers_->port() : 0; }
  // How many times the web page (GET /) was served (`bakeoff local` keeps it up a little
  // after the sweep when someone opened it).
  int pages_served() const { return http_ ? http_->pages_served() : 0; }
  bool tls() const { return tls_ != nullptr; }
  CoordinatorService& service() { return *service_; }
  SlurmProvisioner* slurm() { return slurm_.get(); }
  metrics::ResultsStore& store() { return *store_; }

 private:
  boost::asio::any_io_executor executor_;
  CoordinatorConfig config_;
  const Env& env_;
  std::unique_ptr<metrics::ResultsStore> store_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<WorkerServer> workers_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<SlurmProvisioner> slurm_;  // null unless config.slurm.enabled()
  std::shared_ptr<protocol::TlsContext> tls_;  // null: plain TCP and HTTP
};

}  // namespace bakeoff::coordinator
