// AcceptLoop: the accept loop both coordinator listeners (HTTP API, worker protocol)
// share, with the two guards an unauthenticated peer must not get past:
//  - a connection cap: at most `max_connections` served at once; one more is closed as
//    soon as it is accepted (its peer sees the connection end);
//  - back-off when accept fails for lack of resources (EMFILE, ENFILE, ENOBUFS,
//    ENOMEM): the loop sleeps 50, 100, ... up to 500 ms (±20% jitter) instead of
//    spinning, and accepts again once descriptors are free.
// Refusals and failures are logged once per streak, not once per connection.
// Thread-safety: runs on the listener's single-threaded executor; a ConnectionSlot is
// released on that executor too.
#pragma once

#include "protocol/frame_connection.h"  // first: includes <utility> before Asio

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace bakeoff::coordinator {

// One served connection's place under the cap; released when destroyed.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(std::shared_ptr<std::size_t> open) : open_(std::move(open)) { ++*open_; }
  ConnectionSlot(ConnectionSlot&&) = default;
  ConnectionSlot& operator=(ConnectionSlot&&) = default;
  ~ConnectionSlot() {
    if (open_) --*open_;
  }

 private:
  std::shared_ptr<std::size_t> open_;
};

struct AcceptOptions {
  std::string what;  // "HTTP", "worker": names the listener in log lines
  std::size_t max_connections = 256;
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{500};
};

// Accepts until `acceptor` is closed; each connection under the cap goes to `serve`
// with its slot (keep the slot alive as long as the connection).
boost::asio::awaitable<void> AcceptLoop(boost::asio::ip::tcp::acceptor& acceptor, AcceptOptions options,
                                        std::function<void(boost::asio::ip::tcp::socket, ConnectionSlot)> serve);

}  // namespace bakeoff::coordinator
