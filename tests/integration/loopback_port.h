// A loopback TCP port for a server a test starts that cannot report the port it bound
// (Prometheus, slurmctld, a trainer's TCPStore). Tests that can bind port 0 themselves
// should.
//
// The port must stay free until that server binds it, against two takers:
//  - outgoing connections: every connect() draws its local port from the kernel's
//    ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default).
//    A port read back from bind(0) is one of those, and a suite beside it that opens
//    hundreds of connections can take it: a trainer's store then could not bind and its
//    other rank waited 120 s for a step (CI, 2026-12-07). So the port is taken from
//    20000-29499, below the ephemeral range and the workers' store ports (29500 up);
//  - other test processes: each port is claimed with flock(2) on a file in
//    /tmp/bakeoff-test-ports for the claiming process's life (released when it exits,
//    even by SIGKILL; close-on-exec, so the server it starts does not hold it).
// Thread-safety: a function; a process's claims are never given back before it exits.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace bakeoff::testing {

// Whether 127.0.0.1:`port` can be bound now.
inline bool LoopbackPortBindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return bound;
}

// A port of 20000-29499 that no other test process has claimed and that can be bound
// now, claimed for this process's life (see above). Aborts when none is left.
inline int FreeLoopbackPort() {
  constexpr int kFirst = 20000, kLast = 29499;
  const std::string dir = "/tmp/bakeoff-test-ports";
  mkdir(dir.c_str(), 0700);
  // Each process starts at its own place, so that processes side by side rarely try
  // the same ports in turn.
  const int span = kLast - kFirst + 1;
  const int start = static_cast<int>(getpid() * 7919L % span);
  for (int i = 0; i < span; ++i) {
    const int port = kFirst + (start + i) % span;
    const std::string claim = dir + "/" + std::to_string(port);
    const int fd = open(claim.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another process's (or an earlier call's)
      close(fd);
      continue;
    }
    if (!LoopbackPortBindable(port)) {
      close(fd);
      continue;
    }
    return port;  // fd stays open: the claim lasts until this process exits
  }
  std::abort();
}

}  // namespace bakeoff::testing
