// The c10d TCPStore through which a trial's ranks find each other (Gloo's rendezvous,
// NCCL's unique id), and the one place that decides who hosts it: rank 0 hosts it at the
// store address, unless a launcher's agent already does. torchrun's default launch hosts
// a TCPStore at MASTER_ADDR:MASTER_PORT in its agent and says so with
// TORCHELASTIC_USE_AGENT_STORE=True; every rank, rank 0 included, then connects to it as
// a client, and the keys go under a prefix of the launch attempt
// (TORCHELASTIC_RESTART_COUNT), so a restarted group never reads an earlier one's.
// Thread-safety: ConnectStore may be called from any thread; the store it returns is
// c10d's, safe for concurrent use.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "protocol/status.h"

namespace bakeoff::trainer {

struct StoreOptions {
  std::string host = "127.0.0.1";  // the store's: rank 0's host, or torchrun's agent's
  int port = 29500;
  int rank = 0;
  int world_size = 1;
  // True: the launcher's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True); no
  // rank binds the port.
  bool agent_hosts_store = false;
  int64_t attempt = 0;  // TORCHELASTIC_RESTART_COUNT; names the key prefix
  // How long rank 0 waits for every rank to join, and a client for the store to answer.
  std::chrono::milliseconds timeout{60000};
};

// What a rank of a process group needs whatever the backend: where the group meets (the
// store's address, this rank, the group's size and the rendezvous timeout), where this
// rank's own sockets bind (an address of this host, else an interface; the backend's
// header says which it needs), and how long a collective may take.
struct GroupOptions {
  StoreOptions store;
  std::string bind_address;
  std::string bind_interface;
  std::chrono::milliseconds collective_timeout{120000};
};

// Hosts or connects to the store. Fails (Unavailable) when the port cannot be bound or
// the store does not answer in time; the message says which rank, what it tried, how long
// it actually waited and the configured timeout (a bind failure is immediate, not a
// timeout), and what to do.
Result<c10::intrusive_ptr<c10d::Store>> ConnectStore(const StoreOptions& options);

// Reads torchrun's TORCHELASTIC_USE_AGENT_STORE: true for "True", "true" or "1".
bool AgentHostsStore(const char* value);

}  // namespace bakeoff::trainer
