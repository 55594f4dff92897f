// RankLog: a rank's log file (its stderr; an allowlisted command's stdout too) with a
// size cap. The rank writes into a pipe that the worker drains into this log, so a rank
// printing forever cannot fill the worker's disk, and is never blocked for long nor
// killed for it. The log keeps what a user debugging the rank needs, the head (its
// configuration and start-up lines) and the tail (its error or traceback), and drops
// the middle, marked by one line saying how many bytes went:
//
//   PATH           the first head_bytes() of the output; once closed, then the marker
//                  line (only when bytes were dropped) and the tail
//   PATH.tail      while the output runs past the head: the newest tail segment
//   PATH.tail.old  the segment before it; older segments are dropped
//
// Close appends the segments to PATH and removes them. A closed log holds at most
// max_bytes: the whole output when it fit, else its first head_bytes(), the marker and
// at least its last segment_bytes() (at most 2 x segment_bytes()). While the rank runs
// the three files hold at most max_bytes together (1.5 x max_bytes for the moment of
// Close). A write error (a full disk) stops the writing, never the draining: the rank
// is not blocked by its log, and the marker is then lost with the rest.
// Thread-safety: not thread-safe; one owner (the TrialRunner, on its executor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "protocol/status.h"

namespace bakeoff::worker {

class RankLog {
 public:
  // The smallest cap accepted (WorkerConfig::max_rank_log_bytes).
  static constexpr std::uint64_t kMinMaxBytes = 64 * 1024;
  // Room kept below max_bytes for the marker line.
  static constexpr std::uint64_t kMarkerReserve = 256;

  // Creates (truncates) `path`. REQUIRES: max_bytes >= kMinMaxBytes.
  static Result<std::unique_ptr<RankLog>> Create(std::string path, std::uint64_t max_bytes);
  ~RankLog();  // closes it
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  // Appends what the rank wrote.
  void Append(const char* data, std::size_t size);
  // Writes the marker and the tail into PATH and removes the segment files. Idempotent;
  // nothing is appended after it.
  void Close();

  const std::string& path() const { return path_; }
  std::uint64_t head_bytes() const { return head_bytes_; }
  std::uint64_t segment_bytes() const { return segment_bytes_; }
  // Bytes the rank wrote, and of them those dropped from the middle so far.
  std::uint64_t bytes_received() const { return received_; }
  std::uint64_t bytes_dropped() const { return dropped_; }

 private:
  RankLog(std::string path, int fd, std::uint64_t max_bytes);
  void Write(int fd, const char* data, std::size_t size);
  void Rotate();
  void AppendFile(const std::string& from);

  std::string path_;
  int fd_ = -1;
  std::uint64_t head_bytes_ = 0;
  std::uint64_t segment_bytes_ = 0;
  std::uint64_t head_written_ = 0;
  int segment_fd_ = -1;               // PATH.tail, open for writing; -1 before the head is full
  std::uint64_t segment_written_ = 0;  // bytes in PATH.tail
  std::uint64_t old_segment_ = 0;      // bytes in PATH.tail.old (0: none)
  std::uint64_t received_ = 0;
  std::uint64_t dropped_ = 0;
  bool failed_ = false;  // a write failed: nothing more is written
  bool closed_ = false;
};

}  // namespace bakeoff::worker
