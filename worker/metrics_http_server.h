// MetricsHttpServer: the worker's tiny HTTP endpoint for Prometheus (Boost.Beast, one
// coroutine per connection, keep-alive as Prometheus scrapes). GET /metrics answers
// the text exposition that `render` returns; any other path is 404, any other method
// 405. No authentication (docs/metrics.md: bind it where only monitoring reaches).
// Served on the worker's own executor rather than prometheus-cpp's civetweb exposer,
// whose shutdown waits up to two seconds and which would add threads to the agent.
// Accepts through the listener the coordinator's listeners use (protocol/listener.h,
// header-only): at most 256 scrapers at once, and back-off when descriptors run out.
// Thread-safety: not thread-safe; every method and `render` run on `executor`
// (single-threaded). Sessions keep the server alive until they end.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "protocol/listener.h"
#include "protocol/status.h"

namespace bakeoff::worker {

class MetricsHttpServer : public std::enable_shared_from_this<MetricsHttpServer> {
 public:
  MetricsHttpServer(boost::asio::any_io_executor executor, std::function<std::string()> render);

  // Binds HOST:PORT ([IPv6]:PORT; port 0 picks a free one, see port()). kUnavailable
  // when the address cannot be bound, kInvalidArgument when it is not an address.
  Status Listen(const std::string& address);
  // Starts accepting. REQUIRES: Listen succeeded.
  void Start();
  // Stops accepting; open connections end after their current request.
  void Stop();
  int port() const { return listener_.port(); }

 private:
  boost::asio::awaitable<void> Session(boost::asio::ip::tcp::socket socket, protocol::ConnectionSlot slot);

  boost::asio::any_io_executor executor_;
  std::function<std::string()> render_;
  protocol::Listener listener_;
  bool stopped_ = false;
};

}  // namespace bakeoff::worker
