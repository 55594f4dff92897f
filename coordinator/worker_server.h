// WorkerServer: accepts worker-protocol connections (TCP, length-prefixed JSON frames;
// TLS when given a context, the handshake within 10 s) and feeds them to the
// CoordinatorService: the first frame must be `register` (within 10 s, at most
// protocol::kMaxPreAuthFrameBytes: nothing larger is allocated before the worker has
// authenticated); every later frame (up to max_frame_bytes) goes to OnFrame until the
// connection ends. At most max_worker_connections at once (protocol/listener.h).
// Thread-safety: runs on the service's single-threaded executor.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "coordinator/coordinator_service.h"
#include "protocol/frame_connection.h"
#include "protocol/listener.h"
#include "protocol/log_limiter.h"

namespace bakeoff::coordinator {

class WorkerServer {
 public:
  // `tls` null: plain TCP.
  WorkerServer(boost::asio::any_io_executor executor, CoordinatorService& service,
               std::shared_ptr<protocol::TlsContext> tls = nullptr);

  // Binds host:port (port 0 picks a free port; see port()).
  Status Listen(const std::string& address) { return listener_.Listen(address); }
  void Start();
  void Stop() { listener_.Stop(); }
  int port() const { return listener_.port(); }

 private:
  boost::asio::awaitable<void> Serve(boost::asio::ip::tcp::socket socket, protocol::ConnectionSlot slot);
  // The connection over `socket`, after the TLS handshake when there is one; null (and
  // a log line) when the handshake fails.
  boost::asio::awaitable<std::shared_ptr<protocol::FrameConnection>> Open(boost::asio::ip::tcp::socket socket);


  boost::asio::any_io_executor executor_;
  CoordinatorService& service_;
  protocol::Listener listener_;
  std::shared_ptr<protocol::TlsContext> tls_;
  // Lines a peer can trigger by connecting (a failed handshake, a connection that ends
  // before registering): at most one per 10 s, with how many were left out (security
  // review 2026-12-07, A13: silent connections wrote 21 MB of log in 40 s).
  logging::LogLimiter peer_log_;
};

}  // namespace bakeoff::coordinator
