// A free loopback TCP port for a test process to listen on, for servers that cannot
// report the port they bound (Prometheus, slurmctld, a trainer's TCPStore). Another
// process may take it first; tests that can bind port 0 themselves should.
// Thread-safety: a function.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace bakeoff::testing {

// A loopback TCP port that was free a moment ago (bound to 0, read back, closed).
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace bakeoff::testing
