#include "worker/rank_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace bakeoff::worker {

namespace {

int OpenForWriting(const std::string& path) {
  return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

}  // namespace

Result<std::unique_ptr<RankLog>> RankLog::Create(std::string path, std::uint64_t max_bytes) {
  if (max_bytes < kMinMaxBytes) {
    return Status::InvalidArgument("rank log cap of " + std::to_string(max_bytes) + " bytes is under the minimum of " +
                                   std::to_string(kMinMaxBytes));
  }
  const int fd = OpenForWriting(path);
  if (fd < 0) return Status::IoError("cannot create the rank log '" + path + "': " + strerror(errno));
  return std::unique_ptr<RankLog>(new RankLog(std::move(path), fd, max_bytes));
}

RankLog::RankLog(std::string path, int fd, std::uint64_t max_bytes)
    : path_(std::move(path)),
      fd_(fd),
      head_bytes_(max_bytes / 2),
      segment_bytes_((max_bytes - max_bytes / 2 - kMarkerReserve) / 2) {
  // Earlier segments of a log of this name (a previous worker's) would be appended.
  unlink((path_ + ".tail").c_str());
  unlink((path_ + ".tail.old").c_str());
}

RankLog::~RankLog() { Close(); }

void RankLog::Write(int fd, const char* data, std::size_t size) {
  while (size > 0 && !failed_) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;  // a full disk: the rank goes on, its log stops here
      break;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void RankLog::Append(const char* data, std::size_t size) {
  if (closed_) return;
  received_ += size;
  if (head_written_ < head_bytes_) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, head_bytes_ - head_written_));
    Write(fd_, data, n);
    head_written_ += n;
    data += n;
    size -= n;
  }
  while (size > 0) {
    if (segment_fd_ < 0 || segment_written_ == segment_bytes_) Rotate();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, segment_bytes_ - segment_written_));
    if (segment_fd_ >= 0) Write(segment_fd_, data, n);
    segment_written_ += n;
    data += n;
    size -= n;
  }
}

// PATH.tail becomes PATH.tail.old (whose bytes are dropped) and a new PATH.tail starts.
void RankLog::Rotate() {
  const std::string tail = path_ + ".tail";
  if (segment_fd_ >= 0) {
    close(segment_fd_);
    segment_fd_ = -1;
    if (rename(tail.c_str(), (path_ + ".tail.old").c_str()) != 0) failed_ = true;
    dropped_ += old_segment_;
    old_segment_ = segment_written_;
  } else if (segment_written_ > 0) {
    dropped_ += segment_written_;  // written nowhere (the segment could not be opened)
  }
  segment_written_ = 0;
  if (!failed_) {
    segment_fd_ = OpenForWriting(tail);
    if (segment_fd_ < 0) failed_ = true;
  }
}

void RankLog::AppendFile(const std::string& from) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return;
  char buffer[64 * 1024];
  while (!failed_) {
    const ssize_t n = read(in, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    Write(fd_, buffer, static_cast<std::size_t>(n));
  }
  close(in);
}

void RankLog::Close() {
  if (closed_) return;
  closed_ = true;
  const std::string tail = path_ + ".tail";
  const std::string old = path_ + ".tail.old";
  if (segment_fd_ >= 0) {
    close(segment_fd_);
    segment_fd_ = -1;
  }
  if (dropped_ > 0) {
    char marker[kMarkerReserve];
    const int n = snprintf(marker, sizeof(marker),
                           "\n[bakeoff worker: %llu bytes of this rank's output dropped here; the log keeps the "
                           "first %llu and the last %llu bytes (--max-rank-log-bytes)]\n",
                           static_cast<unsigned long long>(dropped_), static_cast<unsigned long long>(head_written_),
                           static_cast<unsigned long long>(old_segment_ + segment_written_));
    Write(fd_, marker, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof(marker)) - 1)));
  }
  // One segment at a time, each removed once copied, to keep the peak on disk low.
  if (old_segment_ > 0) AppendFile(old);
  unlink(old.c_str());
  if (segment_written_ > 0) AppendFile(tail);
  unlink(tail.c_str());
  close(fd_);
  fd_ = -1;
}

}  // namespace bakeoff::worker
