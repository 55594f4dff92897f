#include "worker/host_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <string>

#include "worker/core_partition.h"

namespace bakeoff::worker {

std::string HostClaims::DefaultDirectory() {
  const char* env = std::getenv("BAKEOFF_HOST_LOCK_DIR");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (std::filesystem::is_directory("/run/lock", ec)) return "/run/lock/bakeoff";
  return "/tmp/bakeoff-locks";
}

HostClaims::HostClaims(std::string directory) : directory_(std::move(directory)) {}

HostClaims::~HostClaims() {
  for (int fd : fds_) close(fd);  // releases every flock
}

Result<bool> HostClaims::Lock(const std::string& name, bool shared, std::string* holder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory_, ec)) {
    std::filesystem::create_directories(directory_, ec);
    if (ec) return Status::IoError("cannot create the host lock directory " + directory_ + ": " + ec.message());
    // Every user's workers claim here: world-writable and sticky, as /tmp.
    chmod(directory_.c_str(), 01777);
  }
  const std::string path = directory_ + "/" + name;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  fchmod(fd, 0666);  // another user's worker must be able to open it to claim it later
  if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char buffer[128] = {};
      ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
      std::string text = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      *holder = text.empty() ? "a worker that shares it (--share-cores)" : text;
    }
    close(fd);
    if (err == EWOULDBLOCK) return false;
    return Status::IoError("cannot lock " + path + ": " + std::strerror(err));
  }
  if (!shared) {
    // Who holds it, for the next claimer's message.
    const std::string who = "bakeoff worker pid " + std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, who.data(), who.size(), 0);
  }
  fds_.push_back(fd);
  return true;
}

void HostClaims::ReleaseFrom(std::size_t first) {
  for (std::size_t i = first; i < fds_.size(); ++i) close(fds_[i]);
  fds_.resize(std::min(first, fds_.size()));
}

Status HostClaims::ClaimCpus(std::vector<int>* cpus, bool all_required, bool shared) {
  if (!enabled()) return Status::Ok();
  const std::size_t before = fds_.size();
  std::vector<int> mine, held;
  std::string holder;
  for (int cpu : *cpus) {
    std::string who;
    auto locked = Lock("cpu" + std::to_string(cpu) + ".lock", shared, &who);
    if (!locked.ok()) {
      ReleaseFrom(before);
      return locked.status();
    }
    if (*locked) {
      mine.push_back(cpu);
    } else {
      held.push_back(cpu);
      if (holder.empty()) holder = who;
    }
  }
  if (shared || held.empty()) return Status::Ok();
  const std::string message =
      "CPU(s) " + FormatCpuList(held) + " of this host are held by another Bakeoff worker (" + holder +
      ", claims in " + directory_ + "): ranks of both would share cores and time each other. Give each "
      "worker on a host CPUs of its own (--cpus), or --share-cores to share them on purpose (recorded in "
      "every trial)";
  if (all_required || mine.empty()) {
    ReleaseFrom(before);  // a refused worker keeps nothing
    return Status::Unavailable(message);
  }
  *cpus = mine;
  return Status::Ok();
}

Status HostClaims::ClaimUids(unsigned first, int count) {
  if (!enabled()) return Status::Ok();
  const std::size_t before = fds_.size();
  for (int i = 0; i < count; ++i) {
    std::string who;
    auto locked = Lock("uid-" + std::to_string(first + i) + ".lock", false, &who);
    if (!locked.ok() || !*locked) {
      ReleaseFrom(before);
      if (!locked.ok()) return locked.status();
      return Status::Unavailable("uid " + std::to_string(first + i) + " of --rank-uids is held by another Bakeoff "
                                 "worker on this host (" + who + ", claims in " + directory_ + "); give each "
                                 "worker a range of its own");
    }
  }
  return Status::Ok();
}

Status HostClaims::ClaimStorePorts(protocol::PortRange* range, int ports) {
  if (!enabled()) return Status::Ok();
  std::string holder;
  int first = -1, claimed = 0;
  for (int block = range->first / kPortBlock; block <= range->last / kPortBlock && claimed < ports; ++block) {
    std::string who;
    auto locked = Lock("store-ports-" + std::to_string(block * kPortBlock) + ".lock", false, &who);
    if (!locked.ok()) return locked.status();
    if (!*locked) {
      if (holder.empty()) holder = who;
      if (first >= 0) break;  // a window is consecutive ports
      continue;
    }
    const int low = std::max(range->first, block * kPortBlock);
    const int high = std::min(range->last, block * kPortBlock + kPortBlock - 1);
    if (first < 0) first = low;
    claimed = high - first + 1;
  }
  if (first < 0) {
    return Status::Unavailable(
        "every store port of " + std::to_string(range->first) + "-" + std::to_string(range->last) +
        " is held by another Bakeoff worker on this host (" + holder + "); give this one other ports (--store-ports)");
  }
  *range = {first, first + claimed - 1};
  return Status::Ok();
}

}  // namespace bakeoff::worker
