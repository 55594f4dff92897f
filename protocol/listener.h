// Listener: binding a TCP listener and the accept loop that the coordinator's two
// listeners (HTTP API, worker protocol) and the worker's /metrics endpoint share, with
// the guards an unauthenticated peer must not get past:
//  - a connection cap: at most `max_connections` served at once. At the cap, the oldest
//    connection that has not authenticated yet (ConnectionSlot::Authenticated) is shut
//    down to make room; only when every open connection has authenticated is the new
//    one closed as soon as it is accepted (its peer sees the connection end). So peers
//    that connect and say nothing cannot hold the cap against a worker that registers
//    or a probe of /healthz (security review, hole 4). A silent connection goes before
//    one that is speaking (bytes waiting to be read, or a request being served,
//    ConnectionSlot::Serving): at a cap churned by reconnecting silent peers, an honest
//    request is not shut down between its accept and its answer;
//  - at most `max_pending_per_peer` unauthenticated connections from one address: one
//    more from it shuts its oldest down;
//  - back-off when accept fails for lack of resources (EMFILE, ENFILE, ENOBUFS,
//    ENOMEM): the loop sleeps 50, 100, ... up to 500 ms (±20% jitter) instead of
//    spinning, and accepts again once descriptors are free.
// Refusals and failures are logged once per streak, not once per connection.
// Header-only, in protocol/ so that the coordinator and the worker share it.
// Thread-safety: runs on the listener's single-threaded executor; a ConnectionSlot is
// released on that executor too.
#pragma once

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "protocol/backoff.h"
#include "protocol/frame_connection.h"
#include "protocol/status.h"

namespace bakeoff::protocol {

// One accept loop's account of its connections: how many are open, and those that
// have not authenticated yet, oldest first, each with a duplicate of its descriptor
// (shutting the duplicate down ends the connection; holding it means the number is
// never another socket's). Used on the listener's executor only.
class ConnectionBook {
 public:
  struct Pending {
    int fd = -1;  // a dup() of the connection's socket, ours to close
    std::string peer;
    bool evicted = false;  // shut down to make room; its slot is not released yet
    bool serving = false;  // a request of its is being served (ConnectionSlot::Serving)
  };

  std::shared_ptr<Pending> Add(int socket_fd, const std::string& peer) {
    auto p = std::make_shared<Pending>(Pending{::dup(socket_fd), peer, false, false});
    pending_.push_back(p);
    ++by_peer_[peer];
    ++open_;
    return p;
  }
  void AddAuthenticated() { ++open_; }
  // The connection authenticated: no longer a candidate for eviction.
  void Forget(const std::shared_ptr<Pending>& p) {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (*it != p) continue;
      pending_.erase(it);
      if (--by_peer_[p->peer] == 0) by_peer_.erase(p->peer);
      break;
    }
    if (p->fd >= 0) ::close(p->fd);
    p->fd = -1;
  }
  // A slot ends (its Pending, if it had one, is forgotten first).
  void Release(const std::shared_ptr<Pending>& p) {
    if (p && p->evicted) --evicting_;
    --open_;
  }
  // Open connections that are not on their way out.
  std::size_t open() const { return open_ - evicting_; }
  std::size_t PendingFrom(const std::string& peer) const {
    auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? 0 : it->second;
  }
  // Shuts down the oldest unauthenticated connection (of `peer`; of anyone when empty),
  // a silent one if there is one, else the oldest that is speaking: its session's reads
  // fail at once, and the session ends and releases its slot. False when there is none.
  bool EvictOldest(const std::string& peer = "") {
    std::shared_ptr<Pending> oldest_speaking;
    for (const auto& p : pending_) {
      if (!peer.empty() && p->peer != peer) continue;
      if (Speaking(*p)) {
        if (!oldest_speaking) oldest_speaking = p;
        continue;
      }
      Evict(p);
      return true;
    }
    if (!oldest_speaking) return false;
    Evict(oldest_speaking);
    return true;
  }

 private:
  static bool Speaking(const Pending& p) {
    int waiting = 0;
    return p.serving || (::ioctl(p.fd, FIONREAD, &waiting) == 0 && waiting > 0);
  }
  void Evict(std::shared_ptr<Pending> p) {  // by value: Forget erases it from the list
    ::shutdown(p->fd, SHUT_RDWR);
    Forget(p);
    p->evicted = true;
    ++evicting_;
  }

  std::size_t open_ = 0;
  std::size_t evicting_ = 0;
  std::list<std::shared_ptr<Pending>> pending_;
  std::map<std::string, std::size_t> by_peer_;
};

// One served connection's place under the cap; released when destroyed. Until
// Authenticated() it may be shut down to make room (ConnectionBook).
class ConnectionSlot {
 public:
  // A slot that is authenticated from the start (never evicted).
  explicit ConnectionSlot(std::shared_ptr<ConnectionBook> book) : book_(std::move(book)) { book_->AddAuthenticated(); }
  ConnectionSlot(std::shared_ptr<ConnectionBook> book, int socket_fd, const std::string& peer)
      : book_(std::move(book)), pending_(book_->Add(socket_fd, peer)) {}
  ConnectionSlot(ConnectionSlot&&) = default;
  ConnectionSlot& operator=(ConnectionSlot&&) = default;
  ~ConnectionSlot() {
    if (!book_) return;
    if (pending_ && !pending_->evicted) book_->Forget(pending_);
    book_->Release(pending_);
  }
  // The peer proved who it is (a worker registered, a request carried a valid token):
  // its connection is no longer shut down to make room. Idempotent.
  void Authenticated() {
    if (!book_ || !pending_ || pending_->evicted) return;
    book_->Forget(pending_);
    pending_.reset();
  }
  // A request of the peer's is being served (true from its header to its answer): the
  // connection is shut down to make room only when no silent one is left.
  void Serving(bool serving) {
    if (pending_) pending_->serving = serving;
  }

 private:
  std::shared_ptr<ConnectionBook> book_;
  std::shared_ptr<ConnectionBook::Pending> pending_;
};

struct AcceptOptions {
  std::string what;  // "HTTP", "worker": names the listener in log lines
  std::size_t max_connections = 256;
  std::string log_prefix = "bakeoff coordinator";  // the process's, at the start of log lines
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{500};
  std::size_t max_pending_per_peer = 16;  // unauthenticated connections from one address
};

// How Listener::Listen's errors name the address: `address` in kInvalidArgument
// ("HTTP listen address 'X': not an IP address"); kUnavailable reads
// "`unavailable` X: why`hint`".
struct ListenErrors {
  std::string address;      // "HTTP listen address", "--metrics-listen"
  std::string unavailable;  // "cannot listen for HTTP on"
  std::string hint;         // "" or "; pass another ..."
};

// Accepts until `acceptor` is closed; each connection under the cap goes to `serve`
// with its slot (keep the slot alive as long as the connection).
inline boost::asio::awaitable<void> AcceptLoop(
    boost::asio::ip::tcp::acceptor& acceptor, AcceptOptions options,
    std::function<void(boost::asio::ip::tcp::socket, ConnectionSlot)> serve) {
  namespace asio = boost::asio;
  auto log = [&options](const std::string& line) {
    fprintf(stderr, "%s: %s listener: %s\n", options.log_prefix.c_str(), options.what.c_str(), line.c_str());
  };
  // Failures that pass once resources free up: wait instead of retrying at once.
  auto out_of_resources = [](const boost::system::error_code& ec) {
    if (ec.category() != boost::system::system_category()) return false;
    const int e = ec.value();
    return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
  };
  auto book = std::make_shared<ConnectionBook>();
  Backoff backoff({options.backoff_initial, options.backoff_max, 0.2});
  std::size_t failed = 0;   // accepts failed in the current streak
  std::size_t refused = 0;  // connections refused at the cap in the current streak
  while (acceptor.is_open()) {
    boost::system::error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open()) break;
      if (!out_of_resources(ec)) continue;  // e.g. a peer that reset before we accepted
      if (failed++ == 0) {
        log("accept failed (" + ec.message() + ", " + std::to_string(book->open()) + " connections open); backing off up to " +
            std::to_string(options.backoff_max.count()) + " ms");
      }
      asio::steady_timer timer(acceptor.get_executor(), backoff.Next());
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (failed > 0) {
      log("accepting again after " + std::to_string(failed) + " failed accepts");
      failed = 0;
      backoff.Reset();
    }
    const auto remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? std::string("?") : remote.address().to_string();
    // One address holding many connections that say nothing: its oldest goes.
    if (book->PendingFrom(peer) >= options.max_pending_per_peer) book->EvictOldest(peer);
    if (book->open() >= options.max_connections && !book->EvictOldest()) {
      if (refused++ == 0) {
        log(std::to_string(book->open()) +
            " connections open, the cap, all authenticated: closing new ones until some end");
      }
      socket.close(ec);
      continue;
    }
    if (refused > 0) {
      log("under the cap again after refusing " + std::to_string(refused) + " connections");
      refused = 0;
    }
    const int fd = socket.native_handle();
    serve(std::move(socket), ConnectionSlot(book, fd, peer));
  }
}

// A listening socket with its accept loop and what serves each connection: what each
// server holds.
class Listener {
 public:
  // Serves one connection. The accept loop holds the function while it runs, and a
  // copy lives as long as each session: what it captures (a shared_ptr to the server)
  // stays alive that long.
  using Session = std::function<boost::asio::awaitable<void>(boost::asio::ip::tcp::socket, ConnectionSlot)>;

  Listener(boost::asio::any_io_executor executor, ListenErrors errors, AcceptOptions options)
      : acceptor_(std::move(executor)), errors_(std::move(errors)), options_(std::move(options)) {}

  // Binds HOST:PORT ([IPv6]:PORT; port 0 picks a free one, see port()) and listens.
  // kInvalidArgument when it is not an address, kUnavailable when it cannot be bound.
  Status Listen(const std::string& address) {
    namespace asio = boost::asio;
    auto split = protocol::SplitHostPort(address, errors_.address);
    if (!split.ok()) return split.status();
    boost::system::error_code ec;
    auto ip = asio::ip::make_address(split->first, ec);
    if (ec) return Status::InvalidArgument(errors_.address + " '" + address + "': not an IP address");
    asio::ip::tcp::endpoint endpoint(ip, static_cast<unsigned short>(split->second));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::Unavailable(errors_.unavailable + " " + address + ": " + ec.message() + errors_.hint);
    port_ = acceptor_.local_endpoint().port();
    return Status::Ok();
  }
  // Starts the accept loop (AcceptLoop) on the acceptor's executor; each connection's
  // session is spawned there too. REQUIRES: Listen succeeded.
  void Start(Session session) {
    namespace asio = boost::asio;
    auto serve = [executor = acceptor_.get_executor(), session = std::move(session)](asio::ip::tcp::socket socket,
                                                                           ConnectionSlot slot) {
      asio::co_spawn(
          executor,
          [session, socket = std::move(socket), slot = std::move(slot)]() mutable {
            return session(std::move(socket), std::move(slot));
          },
          asio::detached);
    };
    asio::co_spawn(acceptor_.get_executor(), AcceptLoop(acceptor_, options_, serve), asio::detached);
  }
  // Stops accepting; open connections go on.
  void Stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }
  int port() const { return port_; }

 private:
  boost::asio::ip::tcp::acceptor acceptor_;
  ListenErrors errors_;
  AcceptOptions options_;
  int port_ = 0;
};

}  // namespace bakeoff::protocol
