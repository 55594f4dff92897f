// TcpProxy: a loopback TCP proxy the test controls, placed between a worker and the
// coordinator to cut or partition their connection (issue 7: "routes it through a
// proxy it controls"). One thread polls the listening socket and every connection pair
// and copies bytes both ways.
//   CutAll()            closes both sides of every open connection at once (a reset).
//   SetPartitioned(true) stops copying in either direction: bytes of open connections
//                        wait in the kernel buffers, as in a network partition, and new
//                        connections are closed at once (a real one would time out
//                        without a byte delivered); false heals it (what waited flows).
// Thread-safety: the control methods may be called from any thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bakeoff::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = Loopback(0);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 16) != 0) {
      throw std::runtime_error("proxy: cannot listen on loopback");
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (pipe(wake_) != 0) throw std::runtime_error("proxy: pipe");
    thread_ = std::thread([this] { Loop(); });
  }
  ~TcpProxy() {
    stop_ = true;
    Wake();
    thread_.join();
    for (auto& p : pairs_) p.Close();
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void CutAll() {
    cut_requested_ = true;
    Wake();
    // Return once the loop has done it, so the test's next step sees it done.
    while (cut_requested_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void SetPartitioned(bool partitioned) {
    partitioned_ = partitioned;
    Wake();
  }
  int connections_accepted() const { return accepted_; }

 private:
  struct Pair {
    int client = -1, upstream = -1;
    void Close() {
      if (client >= 0) close(client);
      if (upstream >= 0) close(upstream);
      client = upstream = -1;
    }
  };

  static sockaddr_in Loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }
  void Wake() { (void)!write(wake_[1], "x", 1); }

  // Copies what `from` has to `to`; false when either side is done.
  static bool Copy(int from, int to) {
    char buffer[65536];
    ssize_t n = read(from, buffer, sizeof(buffer));
    if (n <= 0) return false;
    for (ssize_t sent = 0; sent < n;) {
      ssize_t w = send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return false;
      sent += w;
    }
    return true;
  }

  void Loop() {
    std::vector<Pair> pending;  // accepted, not yet connected upstream
    while (!stop_) {
      if (cut_requested_) {
        for (auto& p : pairs_) p.Close();
        pairs_.clear();
        for (auto& p : pending) p.Close();
        pending.clear();
        cut_requested_ = false;
      }
      if (!partitioned_) {
        for (auto& p : pending) {
          sockaddr_in target = Loopback(target_port_);
          p.upstream = socket(AF_INET, SOCK_STREAM, 0);
          if (connect(p.upstream, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
            p.Close();
            continue;
          }
          pairs_.push_back(p);
        }
        pending.clear();
      }
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      if (!partitioned_) {
        for (const auto& p : pairs_) {
          fds.push_back({p.client, POLLIN, 0});
          fds.push_back({p.upstream, POLLIN, 0});
        }
      }
      if (poll(fds.data(), fds.size(), 200) <= 0) continue;
      if (fds[0].revents) {
        char drain[64];
        (void)!read(wake_[0], drain, sizeof(drain));
      }
      if (fds[1].revents & POLLIN) {
        int client = accept(listen_fd_, nullptr, nullptr);
        if (client >= 0 && partitioned_) {
          close(client);
        } else if (client >= 0) {
          ++accepted_;
          pending.push_back(Pair{client, -1});
        }
      }
      if (partitioned_) continue;
      std::vector<Pair> alive;
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        Pair p = pairs_[i];
        const pollfd& c = fds[2 + 2 * i];
        const pollfd& u = fds[3 + 2 * i];
        bool ok = true;
        if (c.revents & (POLLIN | POLLHUP | POLLERR)) ok = Copy(p.client, p.upstream);
        if (ok && (u.revents & (POLLIN | POLLHUP | POLLERR))) ok = Copy(p.upstream, p.client);
        if (ok) {
          alive.push_back(p);
        } else {
          p.Close();
        }
      }
      pairs_ = alive;
    }
    for (auto& p : pending) p.Close();
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::vector<Pair> pairs_;  // owned by the loop thread (and the destructor after join)
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_requested_{false};
  std::atomic<bool> partitioned_{false};
  std::atomic<int> accepted_{0};
};

}  // namespace bakeoff::testing
