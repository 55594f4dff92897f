#include "experiments/trainer/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <thread>

namespace bakeoff::trainer {
namespace {

Result<ncclDataType_t> NcclType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return ncclFloat32;
    case torch::kFloat64: return ncclFloat64;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kFloat16: return ncclFloat16;
    case torch::kInt64: return ncclInt64;
    case torch::kInt32: return ncclInt32;
    default:
      return Status::InvalidArgument(std::string("nccl: unsupported dtype ") +
                                     c10::toString(t.scalar_type()));
  }
}

}  // namespace

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(const Options& options) {
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(options));
  const std::string where = options.store.host + ":" + std::to_string(options.store.port);
  const int rank = options.store.rank;
  // Before any NCCL call: NCCL reads its environment once. overwrite=0 keeps an operator's.
  if (!options.bind_interface.empty()) setenv("NCCL_SOCKET_IFNAME", options.bind_interface.c_str(), 0);
  try {
    auto store = ConnectStore(options.store);
    if (!store.ok()) return store.status();
    comm->store_ = *store;
    ncclUniqueId id;
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) return Status::Internal("ncclGetUniqueId failed");
      std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
      comm->store_->set("bakeoff/nccl_id", bytes);
    } else {
      auto bytes = comm->store_->get("bakeoff/nccl_id");
      if (bytes.size() != sizeof(id)) return Status::Internal("nccl: malformed unique id in the store");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    cudaSetDevice(options.device_index);
    ncclResult_t r = ncclCommInitRank(&comm->comm_, options.store.world_size, id, rank);
    if (r != ncclSuccess) {
      return Status::Unavailable(std::string("ncclCommInitRank: ") + ncclGetErrorString(r));
    }
  } catch (const std::exception& e) {
    return Status::Unavailable("rendezvous at " + where + " (rank " + std::to_string(rank) +
                               ") failed: " + e.what());
  }
  return comm;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

Status NcclCommunicator::Finish(const char* what, int result, std::chrono::steady_clock::time_point start,
                                int64_t bytes) {
  if (result != ncclSuccess) {
    return Status::Unavailable(std::string(what) + ": " + ncclGetErrorString(static_cast<ncclResult_t>(result)));
  }
  const auto deadline = start + options_.collective_timeout;
  while (true) {
    cudaError_t q = cudaStreamQuery(nullptr);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) return Status::Internal(std::string(what) + ": " + cudaGetErrorString(q));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess || std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      return Status::Unavailable(std::string(what) + " on rank " + std::to_string(options_.store.rank) +
                                 (async != ncclSuccess ? std::string(": ") + ncclGetErrorString(async)
                                                       : ": timed out (a peer rank died or hangs)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.bytes += bytes;
  ++stats_.calls;
  return Status::Ok();
}

template <typename Fn>
Status NcclCommunicator::Collective(const char* what, const torch::Tensor& typed, int64_t bytes, Fn&& enqueue) {
  if (comm_ == nullptr) return Status::Unavailable("nccl: communicator aborted after an earlier failure");
  auto type = NcclType(typed);
  if (!type.ok()) return type.status();
  const auto start = std::chrono::steady_clock::now();
  return Finish(what, enqueue(*type), start, bytes);
}

Status NcclCommunicator::AllReduceSum(torch::Tensor& t) {
  return Collective("all-reduce", t, t.nbytes(), [&](ncclDataType_t type) {
    return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), type, ncclSum, comm_, nullptr);
  });
}

Status NcclCommunicator::ReduceScatterSum(const torch::Tensor& in, torch::Tensor& out) {
  return Collective("reduce-scatter", in, in.nbytes(), [&](ncclDataType_t type) {
    return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), type, ncclSum, comm_, nullptr);
  });
}

Status NcclCommunicator::AllGather(const torch::Tensor& in, torch::Tensor& out) {
  return Collective("all-gather", in, out.nbytes(), [&](ncclDataType_t type) {
    return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), type, comm_, nullptr);
  });
}

Status NcclCommunicator::Broadcast(torch::Tensor& t, int root) {
  return Collective("broadcast", t, t.nbytes(), [&](ncclDataType_t type) {
    return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), type, root, comm_, nullptr);
  });
}

Status NcclCommunicator::Barrier() {
  // NCCL has no barrier: an all-reduce of one element is the customary one.
  auto one = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, options_.device_index));
  return AllReduceSum(one);
}

}  // namespace bakeoff::trainer
