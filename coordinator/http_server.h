// HttpServer: the coordinator's HTTP API (Boost.Beast, one coroutine per connection)
// documented in docs/cli.md. Every route but /healthz needs `Authorization: Bearer
// TOKEN` (401 with `WWW-Authenticate: Bearer` otherwise; compared in constant time).
// Request bodies are limited (413 past CoordinatorConfig::max_request_body_bytes).
// Errors are JSON: {"error": "..."}.
// Thread-safety: runs on the service's single-threaded executor.
#pragma once

#include "protocol/frame_connection.h"  // first: includes <utility> before Asio

#include <functional>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "coordinator/coordinator_service.h"

namespace bakeoff::coordinator {

// Renders the report of a sweep (id or name) in a format ("table", "json", ...).
// Injected by main so that the coordinator does not depend on the report's build.
using ReportRenderer =
    std::function<Result<std::string>(const std::string& db_path, const std::string& sweep,
                                      const std::string& format)>;

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  bool bearer_challenge = false;  // add WWW-Authenticate: Bearer
};

class HttpServer {
 public:
  HttpServer(boost::asio::any_io_executor executor, CoordinatorService& service,
             ReportRenderer report_renderer);

  Status Listen(const std::string& address);
  void Start();
  void Stop();
  int port() const { return port_; }

  // The routing and handling of one request, transport-free (unit-testable).
  HttpReply Handle(const std::string& method, const std::string& target,
                   const std::string& authorization, const std::string& body);

 private:
  boost::asio::awaitable<void> AcceptLoop();
  boost::asio::awaitable<void> Session(boost::asio::ip::tcp::socket socket);

  boost::asio::any_io_executor executor_;
  CoordinatorService& service_;
  ReportRenderer report_renderer_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
};

}  // namespace bakeoff::coordinator
