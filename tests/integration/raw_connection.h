// RawConnection: a plain TCP connection to a coordinator port on loopback, for what a
// broken or hostile client sends (bytes the real clients never would). Reads time out
// (after 15 s unless told otherwise). Thread-safety: one owner.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

namespace bakeoff::testing {

class RawConnection {
 public:
  explicit RawConnection(int port, std::chrono::seconds read_timeout = std::chrono::seconds(15)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval timeout{static_cast<time_t>(read_timeout.count()), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void Write(const std::string& bytes) { (void)!send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Everything the peer sends until it closes (or the read timeout passes: then `closed`
  // is false).
  std::string ReadUntilClosed(bool* closed) {
    std::string got;
    char buffer[4096];
    while (true) {
      ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) {
        got.append(buffer, static_cast<size_t>(n));
        continue;
      }
      *closed = n == 0 || errno == ECONNRESET;
      return got;
    }
  }
  // What one read returns (at most 4096 bytes; "" when closed or the read timeout passed).
  std::string ReadSome() {
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  }
  // Whether the peer has closed (or reset) the connection, without waiting.
  bool ClosedByPeer() {
    char byte;
    ssize_t n = recv(fd_, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A worker-protocol frame's 4-byte big-endian length header announcing `length` bytes.
inline std::string FrameHeader(std::uint32_t length) {
  const std::uint32_t n = htonl(length);
  return std::string(reinterpret_cast<const char*>(&n), 4);
}

}  // namespace bakeoff::testing
