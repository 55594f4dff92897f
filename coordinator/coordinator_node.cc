#include "coordinator/coordinator_node.h"

#include <unistd.h>

#include <algorithm>

#include "coordinator/process_slurm_client.h"

namespace bakeoff::coordinator {

CoordinatorNode::CoordinatorNode(boost::asio::any_io_executor executor, CoordinatorConfig config, const Env& env)
    : executor_(std::move(executor)), config_(std::move(config)), env_(env) {}

CoordinatorNode::~CoordinatorNode() { Stop(); }

Status CoordinatorNode::Start() {
  // First, so that a bad certificate stops startup before the database is touched.
  if (!config_.tls_cert_path.empty() || !config_.tls_key_path.empty()) {
    auto tls = protocol::MakeServerTlsContext(config_.tls_cert_path, config_.tls_key_path);
    if (!tls.ok()) return tls.status();
    tls_ = std::move(tls).value();
  }
  metrics::StoreOptions options;
  options.path = config_.db_path;
  options.durable = config_.store_durable;
  // The store's timestamps come from the coordinator's one clock, like every other time.
  options.env = &env_;
  // SQLite's default page size; the cap is whole pages.
  if (config_.db_max_bytes > 0) options.max_page_count = std::max<std::int64_t>(1, config_.db_max_bytes / 4096);
  auto store = metrics::ResultsStore::Open(options);
  if (!store.ok()) return store.status().WithContext("opening the results database '" + config_.db_path + "'");
  store_ = std::move(store).value();
  service_ = std::make_unique<CoordinatorService>(executor_, config_, *store_, env_);
  BAKEOFF_RETURN_IF_ERROR(service_->Recover());
  workers_ = std::make_unique<WorkerServer>(executor_, *service_, tls_);
  BAKEOFF_RETURN_IF_ERROR(workers_->Listen(config_.worker_listen));
  http_ = std::make_unique<HttpServer>(executor_, *service_, tls_);
  BAKEOFF_RETURN_IF_ERROR(http_->Listen(config_.http_listen));
  workers_->Start();
  http_->Start();
  service_->Start();
  if (config_.slurm.enabled()) {
    SlurmConfig slurm = config_.slurm;
    if (slurm.coordinator_address.empty()) {
      // The bound port (the flag may say 0); a wildcard address is reached at our name.
      std::string host = config_.worker_listen.substr(0, config_.worker_listen.rfind(':'));
      if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
        char name[256] = {0};
        gethostname(name, sizeof(name) - 1);
        host = name;
      }
      slurm.coordinator_address = host + ":" + std::to_string(workers_->port());
    }
    auto client = std::make_unique<ProcessSlurmClient>(executor_, slurm.sbatch, slurm.squeue, slurm.scancel,
                                                       slurm.command_timeout, env_);
    slurm_ = std::make_unique<SlurmProvisioner>(executor_, std::move(slurm), *service_, std::move(client));
    BAKEOFF_RETURN_IF_ERROR(slurm_->Start());
  }
  return Status::Ok();
}

void CoordinatorNode::Stop() {
  if (slurm_) slurm_->Stop();
  if (http_) http_->Stop();
  if (workers_) workers_->Stop();
  if (service_) service_->Stop();
}

}  // namespace bakeoff::coordinator
