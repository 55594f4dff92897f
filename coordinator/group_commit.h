// GroupCommit: the coordinator's store writes of one turn of its event loop (the frames
// read in one pass, the scheduling they cause, a tick) share one store group, one
// transaction and one fsync (metrics::ResultsStore::BeginGroup; docs/scale.md). What the
// turn decided leaves only once that group has committed: every frame sent and every
// acknowledgement recorded while it is open waits, in order, so that nothing is
// acknowledged or dispatched on a write that could still be lost. A lost group sends
// none of it and calls the owner's `lost` hook, which reloads from the store.
//
// Thread-safety: not thread-safe; every call on the one executor given to the
// constructor (the coordinator's io thread).
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <chrono>
#include <functional>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "coordinator/coordinator_metrics.h"
#include "metrics/store/results_store.h"
#include "protocol/clock.h"
#include "protocol/status.h"

namespace bakeoff::coordinator {

class GroupCommit {
 public:
  struct Hooks {
    // Runs just before the turn's group commits: what it writes joins the group (the
    // service's deferred scheduling).
    std::function<void()> before_commit;
    // The group was lost; nothing that waited for it was sent.
    std::function<void(const Status& why)> lost;
  };
  // `window`: a turn longer than this (a busy loop) commits at CommitIfOld; 0 = only at
  // the end of a turn.
  GroupCommit(boost::asio::any_io_executor executor, metrics::ResultsStore& store, const Clock& clock,
              std::chrono::milliseconds window, CoordinatorMetrics& metrics, Hooks hooks);

  // Opens the group if none is open, and posts the end of the turn, which commits it.
  // Call before any store write made on the executor.
  void Begin();
  // Posts the end of the turn (behind the handlers already queued, so that the frames of
  // this pass join the group) unless it is posted already.
  void PostEndOfTurn();
  // Runs `send` once the open group commits; at once when no group is open.
  void AfterCommit(std::function<void()> send);
  // Commits when the open group is older than the window (before_commit first).
  // REQUIRES: the caller holds no reference that a reload (the lost hook) invalidates.
  void CommitIfOld();
  // Commits the open group, then runs what waited for it; when the group is lost, drops
  // it and calls the lost hook. Returns the commit's Status.
  Status Finish();
  // Commits what is open and drops what waits without running it; later turns do
  // nothing (the service stops).
  void Stop();
  // Drops what waits without running it (a reload after a lost group).
  void Discard() { waiting_.clear(); }
  void Restart() { stopped_ = false; }

 private:
  void EndOfTurn();

  boost::asio::any_io_executor executor_;
  metrics::ResultsStore& store_;
  const Clock& clock_;
  std::chrono::milliseconds window_;
  CoordinatorMetrics& metrics_;
  Hooks hooks_;
  bool stopped_ = false;
  bool turn_posted_ = false;
  Clock::TimePoint opened_{};  // when the open group was begun
  std::vector<std::function<void()>> waiting_;  // for the open group, in order
};

}  // namespace bakeoff::coordinator
