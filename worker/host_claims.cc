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

namespace {

std::string DirectoryWithoutEnvironment() {
  std::error_code ec;
  if (std::filesystem::is_directory("/run/lock", ec)) return "/run/lock/bakeoff";
  return "/tmp/bakeoff-locks";
}

}  // namespace

std::string HostClaims::DefaultDirectory() {
  const char* env = std::getenv("BAKEOFF_HOST_LOCK_DIR");
  if (env != nullptr && *env != '\0') return env;
  return DirectoryWithoutEnvironment();
}

namespace {

// A holder's text as shown in a message: printable ASCII, anything else as \xNN, at most
// 100 bytes (another process wrote it: it must not drive the terminal it is shown on).
std::string Printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text.substr(0, 100)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

// Whether a claim file or the directory belongs to someone this worker trusts: root or
// its own user.
bool TrustedOwner(uid_t uid) { return uid == 0 || uid == geteuid(); }

}  // namespace

HostClaims::HostClaims(std::string directory) : directory_(std::move(directory)) {}

Status HostClaims::CheckDirectory() {
  if (directory_checked_) return Status::Ok();
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(directory_, ec))) {
    std::filesystem::create_directories(directory_, ec);
    if (ec) return Status::IoError("cannot create the host lock directory " + directory_ + ": " + ec.message());
    // Not writable by others: nobody else can plant, replace or hold its files.
    chmod(directory_.c_str(), 0755);
  }
  struct stat st;
  if (lstat(directory_.c_str(), &st) != 0) {
    return Status::IoError("cannot read the host lock directory " + directory_ + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Unavailable("the host lock directory " + directory_ +
                               " is not a directory (a symbolic link?); remove it, or set BAKEOFF_HOST_LOCK_DIR "
                               "to a directory of yours");
  }
  if (!TrustedOwner(st.st_uid)) {
    return Status::Unavailable("the host lock directory " + directory_ + " belongs to uid " +
                               std::to_string(st.st_uid) +
                               ", another user, who could hold every claim in it: remove it, or set "
                               "BAKEOFF_HOST_LOCK_DIR to a directory of yours");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    // An older worker made it world-writable (01777): ours or root's, so it can be fixed.
    if (st.st_uid != geteuid() || chmod(directory_.c_str(), 0755) != 0) {
      return Status::Unavailable("the host lock directory " + directory_ +
                                 " is writable by other users, who could hold every claim in it; make it 0755 "
                                 "(chmod 0755 " + directory_ + "), or set BAKEOFF_HOST_LOCK_DIR to a directory "
                                 "of yours");
    }
  }
  directory_checked_ = true;
  return Status::Ok();
}

HostClaims::~HostClaims() {
  for (int fd : fds_) close(fd);  // releases every flock
}

Result<bool> HostClaims::Lock(const std::string& name, bool shared, std::string* holder) {
  BAKEOFF_RETURN_IF_ERROR(CheckDirectory());
  const std::string path = directory_ + "/" + name;
  int fd = -1;
  for (int tries = 0; tries < 2 && fd < 0; ++tries) {
    // 0600: flock needs only a read descriptor, so a claim another user could open,
    // that user could hold.
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      const int err = errno;
      return Status::IoError("cannot open " + path + ": " + std::strerror(err) +
                             (err == EACCES ? "; the directory is another user's: set BAKEOFF_HOST_LOCK_DIR to a "
                                              "directory of yours"
                                            : ""));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !TrustedOwner(st.st_uid)) {
      // Planted while the directory was world-writable: ours to remove (the directory
      // is ours or root's), then claimed anew.
      close(fd);
      fd = -1;
      if (unlink(path.c_str()) != 0) {
        return Status::Unavailable("the claim " + path + " belongs to another user and cannot be removed: remove it");
      }
    } else if (st.st_uid == geteuid()) {
      fchmod(fd, 0600);  // an older worker made it 0666
    }
  }
  if (fd < 0) return Status::Unavailable("the claim " + path + " keeps being replaced by another user");
  if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char buffer[128] = {};
      ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
      std::string text = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      *holder = text.empty() ? "a worker that shares it (--share-cores)" : Printable(text);
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
  if (!enabled()) {
    if (port_claims_ == nullptr) {
      port_claims_ = std::make_unique<HostClaims>(DirectoryWithoutEnvironment());
      if (!port_claims_->CheckDirectory().ok() || access(port_claims_->directory_.c_str(), W_OK) != 0) {
        // Root's directory, and this is another user's test run: a directory of its own.
        port_claims_ = std::make_unique<HostClaims>("/tmp/bakeoff-locks-" + std::to_string(geteuid()));
      }
    }
    return port_claims_->ClaimStorePorts(range, ports);
  }
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
