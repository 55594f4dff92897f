#include "worker/stray_reaper.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "protocol/log.h"
#include "worker/rank_process.h"

namespace bakeoff::worker {
namespace {

// The reaper is the process's, not an agent's (StartStrayReaper is idempotent), so it logs
// through Env::Default() and not through an agent's Env.
constexpr logging::Logger kReaperLog("worker");

// Sweeps, then waits `period`, for as long as the executor runs.
void ScheduleSweep(std::shared_ptr<boost::asio::steady_timer> timer, std::chrono::milliseconds period) {
  timer->expires_after(period);
  timer->async_wait([timer, period](const boost::system::error_code& ec) {
    if (ec) return;
    for (const auto& stray : KillStrayChildren()) {
      kReaperLog.Warning("killed a process a rank left behind", {{"pid", std::to_string(stray.pid)}, {"name", stray.name}});
    }
    ScheduleSweep(timer, period);
  });
}

}  // namespace

Status StartStrayReaper(boost::asio::any_io_executor executor, std::chrono::milliseconds period) {
  static std::once_flag once;
  static Status started;
  std::call_once(once, [&] {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
      started = Status::Unavailable(std::string("cannot become a child subreaper (prctl): ") + strerror(errno) +
                                    "; a process a rank leaves behind outlives it");
      return;
    }
    ScheduleSweep(std::make_shared<boost::asio::steady_timer>(executor), period);
  });
  return started;
}

}  // namespace bakeoff::worker
