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
    : executor_(std::move(executor)), render_(std::move(render)),
      listener_(executor_,
                {"--metrics-listen", "worker: cannot serve /metrics on",
                 "; pass another --metrics-listen HOST:PORT (port 0 picks a free one)"},
                {"/metrics", 256, "bakeoff worker"}) {}

Status MetricsHttpServer::Listen(const std::string& address) { return listener_.Listen(address); }

void MetricsHttpServer::Start() {
  // The accept loop and each session hold `self`.
  listener_.Start([self = shared_from_this()](tcp::socket socket, protocol::ConnectionSlot slot) {
    return self->Session(std::move(socket), std::move(slot));
  });
}

void MetricsHttpServer::Stop() {
  stopped_ = true;
  listener_.Stop();
}

asio::awaitable<void> MetricsHttpServer::Session(tcp::socket socket, protocol::ConnectionSlot slot) {
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
