#include "coordinator/group_commit.h"

#include <optional>
#include <utility>

#include <boost/asio/post.hpp>

namespace bakeoff::coordinator {

GroupCommit::GroupCommit(boost::asio::any_io_executor executor, metrics::ResultsStore& store, const Clock& clock,
                         std::chrono::milliseconds window, CoordinatorMetrics& metrics, Hooks hooks)
    : executor_(std::move(executor)), store_(store), clock_(clock), window_(window), metrics_(metrics),
      hooks_(std::move(hooks)) {}

void GroupCommit::Begin() {
  if (!store_.in_group()) {
    store_.BeginGroup();
    opened_ = clock_.Now();
  }
  PostEndOfTurn();
}

void GroupCommit::PostEndOfTurn() {
  if (turn_posted_) return;
  turn_posted_ = true;
  boost::asio::post(executor_, [this]() { EndOfTurn(); });
}

void GroupCommit::AfterCommit(std::function<void()> send) {
  if (store_.in_group()) {
    waiting_.push_back(std::move(send));
  } else {
    send();
  }
}

void GroupCommit::CommitIfOld() {
  if (window_.count() <= 0 || !store_.in_group()) return;
  if (clock_.Now() - opened_ < window_) return;
  if (hooks_.before_commit) hooks_.before_commit();
  (void)Finish();
}

void GroupCommit::EndOfTurn() {
  if (!stopped_) {
    if (hooks_.before_commit) hooks_.before_commit();
    (void)Finish();
  }
  turn_posted_ = false;
}

Status GroupCommit::Finish() {
  Status committed = Status::Ok();
  if (store_.in_group()) {
    // Timed only when it writes: a turn that stored nothing (most ticks) commits nothing.
    std::optional<CoordinatorMetrics::StoreWriteTimer> timer;
    if (store_.group_pending()) timer.emplace(metrics_, "commit_group");
    committed = store_.CommitGroup();
  }
  std::vector<std::function<void()>> waiting;
  waiting.swap(waiting_);
  if (!committed.ok()) {
    if (hooks_.lost) hooks_.lost(committed);
    return committed;
  }
  for (auto& send : waiting) send();
  return Status::Ok();
}

void GroupCommit::Stop() {
  stopped_ = true;
  // What this turn stored is committed; what waited for it is not sent any more.
  if (store_.in_group()) (void)store_.CommitGroup();
  waiting_.clear();
}

}  // namespace bakeoff::coordinator
