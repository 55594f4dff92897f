// LockstepGroup: the attempts of one lockstep group on this worker (docs/lockstep.md):
// the CPU slots they share, and the TurnArbiter that decides who computes, applied to
// the ranks' turn sockets (through each side's hooks) and to a timer for the turn
// timeout. WorkerAgent makes one when the group's first side is assigned and drops it
// when its last side has ended.
// Thread-safety: not thread-safe; all calls and the timer run on the worker's executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "protocol/clock.h"
#include "protocol/env.h"
#include "protocol/log.h"
#include "worker/turn_arbiter.h"

namespace bakeoff::worker {

class LockstepGroup : public std::enable_shared_from_this<LockstepGroup> {
 public:
  // How a side's attempt is told what the arbiter decided.
  struct SideHooks {
    std::function<void(int rank_index, std::int64_t turn)> go;   // write `go T` to that rank
    std::function<void(const std::string& reason)> time_out;      // end the attempt `timeout`
    std::function<void(const std::string& reason)> left_rotation;  // it runs on without turns
  };

  // REQUIRES: `env` (its clock and log) outlives the group.
  LockstepGroup(boost::asio::any_io_executor executor, std::string name, int sides,
                std::chrono::milliseconds turn_timeout, const Env& env);
  ~LockstepGroup();

  const std::string& name() const { return name_; }

  // Side `side` started `ranks` local ranks.
  void Join(int side, int ranks, SideHooks hooks);
  // One line a rank wrote on its turn socket ("warmup", "step", "done", "end"); anything
  // else is a protocol error and ends the rank's turn-taking.
  void OnLine(int side, int rank, std::string_view line);
  // The rank's socket closed (or its process ended).
  void OnRankClosed(int side, int rank);
  // The rank reported a measured step on its event stream.
  void OnMeasuredStep(int side, int rank);
  // The side's attempt has finished.
  void OnSideEnded(int side);
  // Every side has ended: the group may be dropped.
  bool finished() const { return arbiter_.finished(); }

  // The CPU slots the group's ranks share (held by WorkerAgent until the group ends).
  std::vector<std::size_t> slots;
  bool slots_acquired = false;
  int members = 0;  // its attempts running on this worker

 private:
  void Apply(std::vector<TurnArbiter::Effect> effects);
  void Rearm();

  boost::asio::any_io_executor executor_;
  std::string name_;
  const Clock& clock_;  // of the Env given
  const logging::Logger log_;  // "worker", on the Env given
  TurnArbiter arbiter_;
  std::map<int, SideHooks> hooks_;
  boost::asio::steady_timer timer_;
};

}  // namespace bakeoff::worker
