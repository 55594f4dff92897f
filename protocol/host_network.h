// This host's network as rank processes see it: which interface holds an address, which
// address an interface has, and which local address the kernel routes toward a peer. The
// worker uses them to tell each rank where to bind its collectives (docs/distributed.md,
// "Addresses"); the trainer uses them when started without the worker (torchrun). Header-
// only and free of Boost and LibTorch, like status.h, because the trainer-only build
// uses it too.
// Thread-safety: reentrant functions; each reads the kernel's current view.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "protocol/status.h"

namespace bakeoff::protocol {

namespace host_network_detail {

// The numeric form of an IPv4 or IPv6 socket address ("" for other families).
inline std::string Numeric(const sockaddr* address) {
  if (address == nullptr) return "";
  char text[INET6_ADDRSTRLEN] = {0};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof(text));
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text, sizeof(text));
  } else {
    return "";
  }
  return text;
}

// Every numeric address `host` (an IP literal or a name) resolves to; empty when none.
inline std::vector<std::string> Resolve(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    std::string numeric = Numeric(a->ai_addr);
    if (!numeric.empty()) out.push_back(numeric);
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace host_network_detail

// The name of the interface (e.g. "eth0", "lo") that holds `host`, an IP literal or a
// name resolved first; "" when it is no address of this host (behind NAT, a typo, a name
// that does not resolve).
inline std::string InterfaceHolding(const std::string& host) {
  const auto wanted = host_network_detail::Resolve(host);
  if (wanted.empty()) return "";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    const std::string numeric = host_network_detail::Numeric(i->ifa_addr);
    for (const auto& w : wanted) {
      if (!numeric.empty() && numeric == w) name = i->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

// The address of interface `interface`: its first IPv4 address, else its first IPv6 one
// (link-local ones last). NotFound when there is no such interface or it has no address.
inline Result<std::string> InterfaceAddress(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::IoError("cannot list this host's interfaces: " +
                                                     std::string(std::strerror(errno)));
  std::string v4, v6, link_local;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || interface != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) {
      v4 = host_network_detail::Numeric(i->ifa_addr);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* a6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      auto& slot = IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr) ? link_local : v6;
      if (slot.empty()) slot = host_network_detail::Numeric(i->ifa_addr);
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  if (!link_local.empty()) return link_local;
  return Status::NotFound("interface \"" + interface +
                          "\" does not exist on this host or has no address (`ip -brief addr` lists them)");
}

// The local address the kernel would send from to reach `host` (a connected UDP socket;
// nothing is sent); "" when `host` does not resolve or there is no route to it.
inline std::string LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
  std::string local;
  for (addrinfo* a = found; a != nullptr && local.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      local = host_network_detail::Numeric(reinterpret_cast<sockaddr*>(&bound));
    }
    close(fd);
  }
  freeaddrinfo(found);
  return local;
}

}  // namespace bakeoff::protocol
