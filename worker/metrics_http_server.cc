#include "worker/metrics_http_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace bakeoff::worker {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {
// A scraper that stays silent this long is dropped (Prometheus scrapes every few s).
constexpr std::chrono::seconds kIdleTimeout{60};
}  // namespace

MetricsHttpServer::MetricsHttpServer(asio::any_io_executor executor, std::function<std::string()> render)
    : executor_(std::move(executor)), render_(std::move(render)), acceptor_(executor_) {}

Status MetricsHttpServer::Listen(const std::string& address) {
  auto split = protocol::SplitHostPort(address, "--metrics-listen");
  if (!split.ok()) return split.status();
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(split->first, ec);
  if (ec) return Status::InvalidArgument("--metrics-listen '" + address + "': not an IP address");
  tcp::endpoint endpoint(ip, static_cast<unsigned short>(split->second));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("worker: cannot serve /metrics on " + address + ": " + ec.message() +
                               "; pass another --metrics-listen HOST:PORT (port 0 picks a free one)");
  }
  port_ = acceptor_.local_endpoint().port();
  return Status::Ok();
}

void MetricsHttpServer::Start() {
  auto self = shared_from_this();
  asio::co_spawn(executor_, [self]() { return self->AcceptLoop(); }, asio::detached);
}

void MetricsHttpServer::Stop() {
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
}

asio::awaitable<void> MetricsHttpServer::AcceptLoop() {
  auto self = shared_from_this();
  while (acceptor_.is_open()) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor_.is_open()) break;
      continue;  // e.g. too many open files: keep serving the connections we have
    }
    asio::co_spawn(executor_, [self, s = std::move(socket)]() mutable { return self->Session(std::move(s)); },
                   asio::detached);
  }
}

asio::awaitable<void> MetricsHttpServer::Session(tcp::socket socket) {
  auto self = shared_from_this();
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  while (!stopped_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(4 * 1024);  // a scrape has no body
    stream.expires_after(kIdleTimeout);
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    const auto& request = parser.get();
    const std::string target(request.target());
    const std::string path = target.substr(0, target.find('?'));
    http::response<http::string_body> response{http::status::ok, request.version()};
    response.set(http::field::server, "bakeoff-worker");
    if (path != "/metrics") {
      response.result(http::status::not_found);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "not found: this endpoint serves GET /metrics\n";
    } else if (request.method() != http::verb::get && request.method() != http::verb::head) {
      response.result(http::status::method_not_allowed);
      response.set(http::field::allow, "GET, HEAD");
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "use GET /metrics\n";
    } else {
      response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      if (request.method() == http::verb::get) response.body() = render_();
    }
    response.keep_alive(request.keep_alive());
    response.prepare_payload();
    stream.expires_after(std::chrono::seconds(30));
    co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !request.keep_alive()) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

}  // namespace bakeoff::worker
