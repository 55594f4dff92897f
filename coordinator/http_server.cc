#include "coordinator/http_server.h"

#include <array>
#include <cstdio>
#include <limits>

#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "coordinator/api_json.h"
#include "coordinator/web_assets.h"
#include "metrics/store/read_only_query.h"
#include "metrics/store/results_reader.h"
#include "metrics/report/report_renderer.h"
#include "metrics/report/report_service.h"
#include "protocol/json_limits.h"
#include "protocol/token.h"

namespace bakeoff::coordinator {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using nlohmann::json;

namespace {

// A 200 reply of `content_type` (the other fields at their defaults).
HttpReply Reply200(std::string content_type, std::string body) {
  HttpReply reply;
  reply.content_type = std::move(content_type);
  reply.body = std::move(body);
  return reply;
}

// A sweep's JSON with what only the running coordinator knows: "waiting" (why its queued
// trials cannot start, when they cannot) and, for an adaptive sweep, "comparisons".
json WithLiveState(json sweep, const CoordinatorService& service, std::int64_t id) {
  const CoordinatorState state = service.State();
  if (std::string reason = WaitingReason(state, id); !reason.empty()) sweep["waiting"] = reason;
  if (auto answered = AnsweredComparisons(state, id)) {
    sweep["comparisons"] = {{"total", answered->second}, {"answered", answered->first}};
  }
  return sweep;
}

constexpr std::chrono::seconds kTlsHandshakeTimeout{10};
// A connection that has not shown a valid token yet sends its request header within this.
constexpr std::chrono::seconds kPreAuthHeaderTimeout{10};

// Whether a Host header names this machine's loopback (localhost, 127.0.0.0/8, [::1]),
// with or without a port: what a page served by `bakeoff local` is opened as. A DNS
// rebinding page reaches the same socket under its own name, which this refuses.
bool LoopbackHost(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name.front() == '[') {
    const auto close = name.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = name.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || rest.find_first_not_of("0123456789", 1) != std::string::npos)) return false;
    name = name.substr(1, close - 1);
    return name == "::1";
  }
  if (const auto colon = name.find(':'); colon != std::string::npos) {
    if (name.find_first_not_of("0123456789", colon + 1) != std::string::npos) return false;
    name = name.substr(0, colon);
  }
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "localhost") return true;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address_v4(name, ec);
  return !ec && address.is_loopback();
}

std::string PeerAddress(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  return ec ? std::string("an unknown peer") : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

// Invalid UTF-8 (from a user's SQL, a trainer's message) is replaced, never thrown.
HttpReply JsonReply(int status, const json& body) {
  HttpReply reply;
  reply.status = status;
  reply.body = body.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  return reply;
}

HttpReply Error(int status, const std::string& message) { return JsonReply(status, {{"error", message}}); }

HttpReply ErrorFrom(const Status& status) { return Error(HttpStatusFor(status), status.message()); }

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string UrlDecode(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (text[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Every key=value of a query string, decoded; a key given twice keeps its last value.
std::map<std::string, std::string> QueryParams(const std::string& query) {
  std::map<std::string, std::string> params;
  std::size_t pos = 0;
  while (pos < query.size()) {
    auto amp = query.find('&', pos);
    std::string pair = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!pair.empty()) {
      auto eq = pair.find('=');
      params[UrlDecode(pair.substr(0, eq))] = eq == std::string::npos ? "" : UrlDecode(pair.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return params;
}

// Runs `work` on `pool` (the thread pool's executor, or a strand of it) and completes on
// `home` (the service's executor), holding work on `home` meanwhile. Written out rather
// than co_spawn(pool, ..., use_awaitable): Boost 1.74's co_spawn may resume the
// awaiting coroutine on the pool's thread.
template <typename Executor, typename Token>
auto RunOffExecutor(Executor pool, asio::any_io_executor home, std::function<HttpReply()> work, Token&& token) {
  return asio::async_initiate<Token, void(HttpReply)>(
      [pool, home](auto handler, std::function<HttpReply()> work) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        auto home_work = asio::prefer(home, asio::execution::outstanding_work.tracked);
        asio::post(pool, [shared, home_work, work = std::move(work)]() {
          // An exception here would end the process (a pool thread): the request fails instead.
          std::shared_ptr<HttpReply> reply;
          try {
            reply = std::make_shared<HttpReply>(work());
          } catch (const std::bad_alloc&) {
            reply = std::make_shared<HttpReply>(Error(503, "the coordinator ran out of memory for this request"));
          } catch (const std::exception& e) {
            reply = std::make_shared<HttpReply>(Error(500, std::string("internal error: ") + e.what()));
          }
          asio::post(home_work, [shared, reply]() { (*shared)(std::move(*reply)); });
        });
      },
      token, std::move(work));
}

// Prometheus' text format; scraped by GET /metrics (docs/metrics.md).
HttpReply MetricsReply(const CoordinatorService& service) {
  return Reply200("text/plain; version=0.0.4; charset=utf-8", service.MetricsText());
}

}  // namespace

HttpServer::HttpServer(asio::any_io_executor executor, CoordinatorService& service,
                       std::shared_ptr<protocol::TlsContext> tls)
    : executor_(executor),
      service_(service),
      listener_(executor, {"HTTP listen address", "cannot listen for HTTP on", ""},
                {.what = "HTTP",
                 .max_connections = service.config().max_http_connections,
                 .max_pending_per_peer = service.config().max_pending_connections_per_peer}),
      tls_(std::move(tls)) {}

HttpServer::~HttpServer() {
  submit_pool_.join();
  query_pool_.join();
  blocking_pool_.join();
}

void HttpServer::Start() {
  listener_.Start(
      [this](tcp::socket socket, protocol::ConnectionSlot slot) { return Session(std::move(socket), std::move(slot)); });
}

asio::awaitable<void> HttpServer::Session(tcp::socket socket, protocol::ConnectionSlot slot) {
  // Whatever a peer sends, it holds at most kMaxHttpConnectionsPerPeer connections: a
  // token holder (or anyone, before it is evicted) cannot hold the whole cap.
  boost::system::error_code peer_ec;
  const auto remote = socket.remote_endpoint(peer_ec);
  const std::string peer_address = peer_ec ? std::string("?") : remote.address().to_string();
  std::size_t& open_here = (*open_by_peer_)[peer_address];
  if (open_here >= kMaxHttpConnectionsPerPeer) {
    peer_log_.Warning(service_.log(), "HTTP connection closed: its address holds the most connections one address may hold",
                      peer_address, std::to_string(open_here) + " connections open");
    socket.close(peer_ec);
    co_return;
  }
  ++open_here;
  // Shared: a session's frame may be destroyed after the server (at its io_context's
  // shutdown).
  struct PeerCount {
    std::shared_ptr<std::map<std::string, std::size_t>> by_peer;
    std::string peer;
    ~PeerCount() {
      auto it = by_peer->find(peer);
      if (it != by_peer->end() && --it->second == 0) by_peer->erase(it);
    }
  } peer_count{open_by_peer_, peer_address};
  if (!tls_) {
    beast::tcp_stream stream(std::move(socket));
    co_await ServeRequests(stream, slot);
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    // Lingering close: a client still sending a body we refused (413) would get a reset
    // instead of our answer if the socket closed with its bytes unread. Drain, bounded.
    stream.expires_after(std::chrono::seconds(2));
    std::array<char, 16384> sink;
    for (std::size_t drained = 0; drained < (64u << 20);) {
      drained += co_await stream.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    co_return;
  }
  const std::string peer = PeerAddress(socket);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls_);
  boost::system::error_code ec;
  // The deadline keeps a client that never speaks TLS from holding the connection.
  beast::get_lowest_layer(stream).expires_after(kTlsHandshakeTimeout);
  co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    peer_log_.Warning(service_.log(), "HTTPS connection: TLS handshake failed", peer,
                      protocol::TlsErrorText(ec, stream.native_handle()));
    co_return;
  }
  co_await ServeRequests(stream, slot);
  // close_notify, bounded: a client that has gone does not answer it.
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
}

std::optional<HttpReply> HttpServer::Refusal(const RequestHead& head, bool& authenticated,
                                             protocol::ConnectionSlot& slot) {
  std::optional<HttpReply> refused = Authorize(head.method, head.target, head.authorization);
  if (refused) return refused;
  // Only a token that matched authenticates: an open route (/healthz) answered to any
  // header, or a worker credential, leaves the connection evictable.
  if (!authenticated && TokenMatches(head.authorization)) {
    slot.Authenticated();
    authenticated = true;
  }
  if (service_.config().open_reads) {
    // Reads without a token (bakeoff local): only a request addressed to the loopback,
    // and from a page of this origin when a browser says where it comes from, so that
    // neither a rebound DNS name nor another site's page can read or post (A12).
    if (!LoopbackHost(head.host)) {
      return Error(403, "Host '" + head.host.substr(0, 100) +
                            "' is not a loopback name: this coordinator answers requests to localhost, "
                            "127.0.0.1 or [::1] only");
    }
    if (!head.origin.empty() && head.origin != "http://" + head.host && head.origin != "https://" + head.host) {
      return Error(403, "Origin '" + head.origin.substr(0, 100) +
                            "' is not this page's: requests from other sites are refused");
    }
  }
  const std::size_t body_limit = service_.config().max_request_body_bytes;
  if (head.content_length && *head.content_length > body_limit) {
    return Error(413, "request body over the limit of " + std::to_string(body_limit) + " bytes");
  }
  return std::nullopt;
}

asio::awaitable<HttpReply> HttpServer::Answer(const std::string& method, const std::string& target,
                                              const std::string& body) {
  HttpReply reply = Dispatch(method, target, body);
  if (reply.blocking_work) {
    // Queries, submissions (one at a time, in order) and the rest each have a pool.
    asio::thread_pool& pool = reply.query ? query_pool_ : reply.in_order ? submit_pool_ : blocking_pool_;
    reply = co_await RunOffExecutor(pool.get_executor(), executor_, std::move(reply.blocking_work),
                                    asio::use_awaitable);
  }
  if (reply.then_on_executor) {
    auto then = std::move(reply.then_on_executor);
    reply = then();
  }
  co_return reply;
}

void HttpServer::BoundAnswerBytes(HttpReply& reply) const {
  // Bodies waiting to be written are bounded together: past the bound a large answer
  // is dropped at once (with what it held) and the client told to retry, rather than
  // held for a client that may never read it.
  const std::size_t body_bytes = reply.body.size();
  if (body_bytes > kSmallReplyBytes && response_bytes_in_flight_ + body_bytes > kMaxResponseBytesInFlight) {
    reply = Error(503, "the coordinator is already sending " + std::to_string(response_bytes_in_flight_) +
                           " bytes of answers, near its limit of " + std::to_string(kMaxResponseBytesInFlight) +
                           "; retry in a few seconds");
  }
}

namespace {

// The response for `reply`, its headers set, its body moved out of it.
http::response<http::string_body> ResponseFor(HttpReply& reply, unsigned version, bool keep_alive) {
  http::response<http::string_body> response{static_cast<http::status>(reply.status), version};
  response.set(http::field::server, "bakeoff");
  response.set(http::field::content_type, reply.content_type);
  if (reply.bearer_challenge) response.set(http::field::www_authenticate, "Bearer realm=\"bakeoff\"");
  if (!reply.allow.empty()) response.set(http::field::allow, ReplaceAll(reply.allow, " or ", ", "));
  response.set("X-Content-Type-Options", "nosniff");
  if (reply.page) {
    // The page runs its own script only (no inline script, nothing from elsewhere) and
    // talks to this coordinator alone; no frame may embed it. Inline style is allowed
    // for the report it shows in a sandboxed frame (the report's own <style>).
    response.set("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
                 "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    response.set(http::field::cache_control, "no-cache");
    response.set("Referrer-Policy", "no-referrer");
  }
  response.keep_alive(keep_alive);
  response.body() = std::move(reply.body);
  response.prepare_payload();
  return response;
}

}  // namespace

template <typename Stream>
asio::awaitable<void> HttpServer::ServeRequests(Stream& stream, protocol::ConnectionSlot& slot) {
  beast::flat_buffer buffer;
  bool authenticated = false;
  const std::size_t body_limit = service_.config().max_request_body_bytes;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 * 1024);
    // The header first, with no body limit yet: the limit is checked after the token
    // (Refusal), so that an unauthenticated client learns nothing but 401. (Not
    // boost::none: Boost 1.74 compares a Content-Length with an unset limit as over it.)
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    // Until a request carries a valid token the connection may be shut down to make room
    // (protocol/listener.h), and it gets less time to send its header.
    beast::get_lowest_layer(stream).expires_after(authenticated ? std::chrono::seconds(30) : kPreAuthHeaderTimeout);
    boost::system::error_code ec;
    co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      // Closed, timed out or not HTTP. A TLS client on the plain port gets a line: it
      // would otherwise fail with no trace here.
      const auto* head = static_cast<const unsigned char*>(buffer.data().data());
      if (!tls_ && protocol::LooksLikeTlsRecord(head, buffer.size())) {
        peer_log_.Warning(service_.log(), "HTTP connection: the client speaks TLS but this coordinator serves plain HTTP",
                          PeerAddress(beast::get_lowest_layer(stream).socket()), "no --tls-cert");
      }
      break;
    }
    slot.Serving(true);  // speaking: shut down to make room only after the silent ones
    auto& request = parser.get();
    const RequestHead head{std::string(request.method_string()), std::string(request.target()),
                           std::string(request[http::field::authorization]), std::string(request[http::field::host]),
                           std::string(request[http::field::origin]),
                           parser.content_length() ? std::optional<std::uint64_t>(*parser.content_length())
                                                   : std::nullopt};
    bool keep_alive = request.keep_alive();
    HttpReply reply;
    if (std::optional<HttpReply> refused = Refusal(head, authenticated, slot)) {
      reply = std::move(*refused);
      keep_alive = false;  // the body, if any, is never read
    } else {
      parser.body_limit(body_limit);  // a chunked body is counted as it arrives
      co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::body_limit) {
        reply = Error(413, "request body over the limit of " + std::to_string(body_limit) + " bytes");
        keep_alive = false;
      } else if (ec) {
        break;
      } else {
        reply = co_await Answer(head.method, head.target, request.body());
      }
    }
    service_.metrics().ObserveHttpRequest(head.target, reply.status);
    BoundAnswerBytes(reply);
    std::shared_ptr<void> hold = std::move(reply.hold);  // until written
    const std::size_t counted = reply.body.size();
    response_bytes_in_flight_ += counted;
    auto response = ResponseFor(reply, request.version(), keep_alive);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
    response_bytes_in_flight_ -= counted;
    hold.reset();
    if (ec || !keep_alive) break;
    slot.Serving(false);  // waiting for its next request: silent again
  }
}

// POST /api/v1/query {"sql", "max_rows"?, "timeout_s"?}: the reply (work done on the
// pool) is RunReadOnlyQuery's result as {"columns", "rows", "truncated"}.
HttpReply HttpServer::QueryRoute(const RouteCall& call) {
  const std::string& body = call.body;
  if (Status deep = protocol::CheckJsonDepth(body); !deep.ok()) return Error(400, "request body: " + deep.message());
  json request = json::parse(body, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("sql") || !request["sql"].is_string()) {
    return Error(400, "the request body must be a JSON object {\"sql\": \"SELECT ...\"} "
                      "(optional \"max_rows\", \"timeout_s\")");
  }
  const CoordinatorConfig& config = service_.config();
  metrics::QueryLimits limits;
  limits.max_rows = config.query_max_rows;
  limits.timeout = config.query_timeout;
  if (request.contains("max_rows")) {
    if (!request["max_rows"].is_number_integer() || request["max_rows"].get<int64_t>() < 1) {
      return Error(400, "max_rows must be a positive integer");
    }
    limits.max_rows = std::min(limits.max_rows, request["max_rows"].get<int64_t>());
  }
  if (request.contains("timeout_s")) {
    if (!request["timeout_s"].is_number() || !(request["timeout_s"].get<double>() > 0)) {
      return Error(400, "timeout_s must be a positive number of seconds");
    }
    // Compare in seconds first: a huge request must not overflow the cast.
    const double asked_s = request["timeout_s"].get<double>();
    if (asked_s * 1000 < static_cast<double>(limits.timeout.count())) {
      limits.timeout = std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(asked_s * 1000)));
    }
  }
  JobSlots::Slot slot = query_slots_.TryTake();
  if (slot == nullptr) {
    return Error(503, "the coordinator is already running " + std::to_string(kMaxQueriesInFlight) +
                          " queries; retry in a few seconds");
  }
  HttpReply reply;
  limits.max_result_bytes = std::min(limits.max_result_bytes, kMaxQueryResponseBytes);
  reply.blocking_work = [slot, db_path = service_.store().path(), sql = request["sql"].get<std::string>(),
                         limits]() mutable {
    auto result = metrics::RunReadOnlyQuery(db_path, sql, limits);
    // The slot is held until the answer has been written, not only until it is built.
    HttpReply done;
    if (!result.ok()) {
      done = ErrorFrom(result.status());
    } else {
      json rows = json::array();
      for (auto& row : result->rows) rows.push_back(std::move(row));
      result->rows.clear();
      done = JsonReply(200, {{"columns", result->columns}, {"rows", std::move(rows)}, {"truncated", result->truncated}});
    }
    done.hold = std::move(slot);
    return done;
  };
  reply.query = true;
  return reply;
}

// ------------------------------------------------------------------ routing

namespace {

// A path's segments, each decoded: "/api/v1/sweeps/a%20b" -> {"api", "v1", "sweeps", "a b"}.
std::vector<std::string> PathSegments(const std::string& path) {
  std::vector<std::string> seg;
  std::size_t pos = 1;
  while (pos <= path.size()) {
    auto slash = path.find('/', pos);
    std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!part.empty()) seg.push_back(UrlDecode(part));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return seg;
}

// The pattern's captures when `segments` match it ("{sweep}" matches any one segment);
// `parts`: the pattern's segments.
std::optional<std::map<std::string, std::string>> MatchPattern(const std::vector<std::string>& parts,
                                                               const std::vector<std::string>& segments) {
  if (parts.size() != segments.size()) return std::nullopt;
  std::map<std::string, std::string> params;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].size() > 2 && parts[i].front() == '{' && parts[i].back() == '}') {
      params[parts[i].substr(1, parts[i].size() - 2)] = segments[i];
    } else if (parts[i] != segments[i]) {
      return std::nullopt;
    }
  }
  return params;
}

}  // namespace

const std::vector<HttpServer::Route>& HttpServer::Routes() {
  using R = ApiRole;
  static const std::vector<Route> routes = {
      {"GET", "/", R::kNone, &HttpServer::PageRoute, ""},
      {"GET", "/ui/{file}", R::kNone, &HttpServer::AssetRoute, ""},
      {"GET", "/healthz", R::kNone, &HttpServer::HealthRoute, ""},
      {"GET", "/metrics", R::kRead, &HttpServer::MetricsRoute, ""},
      {"GET", "/api/v1/openapi.json", R::kNone, &HttpServer::OpenApiRoute, ""},
      {"GET", "/api/v1/sd", R::kRead, &HttpServer::ServiceDiscoveryRoute, ""},
      {"POST", "/api/v1/query", R::kRead, &HttpServer::QueryRoute, " with {\"sql\": \"SELECT ...\"}"},
      {"GET", "/api/v1/workers", R::kRead, &HttpServer::WorkersRoute, ""},
      {"POST", "/api/v1/workers/{worker}/drain", R::kSubmit, &HttpServer::DrainRoute, ""},
      {"GET", "/api/v1/sweeps", R::kRead, &HttpServer::ListSweepsRoute, ""},
      {"POST", "/api/v1/sweeps", R::kSubmit, &HttpServer::SubmitRoute, " with the sweep's YAML"},
      {"GET", "/api/v1/sweeps/{sweep}", R::kRead, &HttpServer::SweepRoute, ""},
      {"POST", "/api/v1/sweeps/{sweep}/cancel", R::kSubmit, &HttpServer::CancelRoute, ""},
      {"GET", "/api/v1/sweeps/{sweep}/trials", R::kRead, &HttpServer::TrialsRoute, ""},
      {"GET", "/api/v1/sweeps/{sweep}/live", R::kRead, &HttpServer::LiveRoute, ""},
      {"GET", "/api/v1/sweeps/{sweep}/report", R::kRead, &HttpServer::ReportRoute, ""},
  };
  return routes;
}

HttpServer::Match HttpServer::Find(const std::string& method, const std::string& path) {
  Match match;
  // Each pattern split once, not per request.
  static const std::vector<std::vector<std::string>> patterns = [] {
    std::vector<std::vector<std::string>> split;
    for (const Route& route : Routes()) split.push_back(PathSegments(route.pattern));
    return split;
  }();
  const auto segments = PathSegments(path);
  for (std::size_t i = 0; i < Routes().size(); ++i) {
    const Route& route = Routes()[i];
    auto params = MatchPattern(patterns[i], segments);
    if (!params) continue;
    if (!match.allowed.empty()) match.allowed += " or ";
    match.allowed += route.method;
    match.lowest = std::min(match.lowest, route.role);
    if (route.method == method) {
      if (match.route == nullptr) {
        match.route = &route;
        match.params = std::move(*params);
      }
    } else if (match.hint.empty()) {
      match.hint = route.hint;
    }
  }
  return match;
}

std::optional<HttpReply> HttpServer::Authorize(const std::string& method, const std::string& target,
                                               const std::string& authorization) const {
  const std::string path = target.substr(0, target.find('?'));
  const Match match = Find(method, path);
  const CoordinatorConfig& config = service_.config();
  ApiRole needs;
  if (match.route != nullptr) {
    needs = match.route->role;
    if (path == "/metrics" && !config.metrics_require_token) needs = ApiRole::kNone;
  } else if (!match.allowed.empty() && match.lowest == ApiRole::kNone) {
    needs = ApiRole::kNone;  // e.g. POST /healthz: a 405 that tells nothing
  } else {
    // No such route: a read token learns that, anything else needs the submit role.
    needs = method == "GET" || method == "HEAD" ? ApiRole::kRead : ApiRole::kSubmit;
  }
  if (needs == ApiRole::kNone || (needs == ApiRole::kRead && config.open_reads)) return std::nullopt;
  if (config.submit_tokens.empty() && config.read_tokens.empty()) return std::nullopt;  // loopback, no token
  const std::string prefix = "Bearer ";
  const bool has_bearer = authorization.rfind(prefix, 0) == 0;
  const std::string given = has_bearer ? authorization.substr(prefix.size()) : std::string();
  // Every list is compared whatever matched, so that timing tells nothing.
  const bool submit = protocol::TokenInList(config.submit_tokens, given);
  const bool read = protocol::TokenInList(config.read_tokens, given);
  const bool worker = protocol::TokenInList(config.worker_tokens, given);
  if (!has_bearer || !(submit || read)) {
    HttpReply reply = Error(401, !has_bearer ? "missing bearer token"
                                 : worker    ? "invalid bearer token: this is the worker credential, which only "
                                               "registers workers; the API needs an API token"
                                             : "invalid bearer token");
    reply.bearer_challenge = true;
    return reply;
  }
  if (needs == ApiRole::kSubmit && !submit) {
    return Error(403, "this token has the read role; " + method + " " + path +
                          " needs a token with the submit role (the coordinator's --token-file)");
  }
  return std::nullopt;
}

bool HttpServer::TokenMatches(const std::string& authorization) const {
  const std::string prefix = "Bearer ";
  if (authorization.rfind(prefix, 0) != 0) return false;
  const std::string given = authorization.substr(prefix.size());
  const CoordinatorConfig& config = service_.config();
  // Both lists compared whatever matched, so that timing tells nothing.
  const bool submit = protocol::TokenInList(config.submit_tokens, given);
  const bool read = protocol::TokenInList(config.read_tokens, given);
  return submit || read;
}

HttpReply HttpServer::Handle(const std::string& method, const std::string& target,
                             const std::string& authorization, const std::string& body) {
  if (auto refused = Authorize(method, target, authorization)) return std::move(*refused);
  return Dispatch(method, target, body);
}

HttpReply HttpServer::Dispatch(const std::string& method, const std::string& target, const std::string& body) {
  RouteCall call{target, "", {}, body};
  if (auto q = target.find('?'); q != std::string::npos) {
    call.path = target.substr(0, q);
    call.query = target.substr(q + 1);
  }
  Match match = Find(method, call.path);
  if (match.route == nullptr) {
    if (match.allowed.empty()) return Error(404, "no route " + call.path);
    HttpReply refused = Error(405, "use " + match.allowed + " " + call.path + match.hint);
    refused.allow = match.allowed;
    return refused;
  }
  call.params = std::move(match.params);
  return (this->*(match.route->handle))(call);
}

// ------------------------------------------------------------------ routes

HttpReply HttpServer::PageRoute(const RouteCall&) {
  ++pages_served_;
  const EmbeddedFile* page = FindEmbeddedFile("index.html");
  HttpReply reply = Reply200("text/html; charset=utf-8", std::string(page->body));
  reply.page = true;
  return reply;
}

HttpReply HttpServer::AssetRoute(const RouteCall& call) {
  const std::string& name = call.params.at("file");
  const bool js = name == "app.js";
  if (!js && name != "app.css") return Error(404, "no route " + call.path);
  HttpReply reply = Reply200(js ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8",
                             std::string(FindEmbeddedFile(name)->body));
  reply.page = true;
  return reply;
}

HttpReply HttpServer::OpenApiRoute(const RouteCall&) {
  return Reply200("application/json", std::string(FindEmbeddedFile("openapi.json")->body));
}

HttpReply HttpServer::HealthRoute(const RouteCall&) {
  if (!service_.store().healthy()) {
    return JsonReply(503, {{"status", "unhealthy"}, {"error", service_.store().health().message()}});
  }
  return JsonReply(200, {{"status", "ok"}});
}

HttpReply HttpServer::MetricsRoute(const RouteCall&) { return MetricsReply(service_); }

HttpReply HttpServer::ServiceDiscoveryRoute(const RouteCall&) {
  return JsonReply(200, ServiceDiscoveryJson(service_.State()));
}

HttpReply HttpServer::WorkersRoute(const RouteCall&) { return JsonReply(200, WorkersJson(service_.State())); }

HttpReply HttpServer::DrainRoute(const RouteCall& call) {
  auto result = service_.DrainWorker(call.params.at("worker"));
  if (auto* error = std::get_if<ApiError>(&result)) return Error(error->http_status, error->message);
  return JsonReply(200, std::get<json>(result));
}

HttpReply HttpServer::ListSweepsRoute(const RouteCall&) {
  auto sweeps = service_.store().Reader()->ListSweeps();
  if (!sweeps.ok()) return ErrorFrom(sweeps.status());
  json out = json::array();
  for (const auto& s : *sweeps) out.push_back(WithLiveState(SweepJson(s), service_, s.id));
  return JsonReply(200, out);
}

HttpReply HttpServer::SubmitRoute(const RouteCall& call) {
  if (call.body.empty()) return Error(400, "the request body must be the sweep's YAML");
  // Parsed and expanded on the pool (a sweep at the caps takes a while), stored and
  // scheduled back on the executor.
  auto submission = service_.BeginSubmit();
  if (auto* error = std::get_if<ApiError>(&submission)) return Error(error->http_status, error->message);
  HttpReply reply;
  reply.in_order = true;
  reply.blocking_work = [&service = service_, prepare = sweep_preparer_,
                         submission = std::get<SweepSubmission>(std::move(submission)), yaml = call.body]() mutable {
    auto prepared = prepare(submission, std::move(yaml));
    if (auto* error = std::get_if<ApiError>(&prepared)) return Error(error->http_status, error->message);
    HttpReply stored;
    stored.then_on_executor = [&service, prepared = std::make_shared<PreparedSweep>(
                                             std::get<PreparedSweep>(std::move(prepared)))]() {
      auto result = service.CommitSweep(std::move(*prepared));
      if (auto* error = std::get_if<ApiError>(&result)) return Error(error->http_status, error->message);
      return JsonReply(201, std::get<json>(result));
    };
    return stored;
  };
  return reply;
}

HttpReply HttpServer::CancelRoute(const RouteCall& call) {
  auto result = service_.CancelSweep(call.params.at("sweep"));
  if (auto* error = std::get_if<ApiError>(&result)) return Error(error->http_status, error->message);
  return JsonReply(200, std::get<json>(result));
}

std::variant<metrics::SweepRecord, HttpReply> HttpServer::FindSweep(const std::string& name) {
  auto& store = service_.store();
  // A sweep this coordinator runs is counted from its trial table (after the read, which
  // commits the open group); the store counts the others.
  auto sweep = store.Reader()->FindSweep(name, metrics::ResultsStore::Counts::kSkip);
  if (sweep.ok()) {
    if (auto live = service_.State().table.LiveCounts(sweep->id)) {
      sweep->counts = *live;
    } else {
      sweep = store.Reader()->GetSweep(sweep->id);
    }
  }
  if (!sweep.ok()) {
    return sweep.status().code() == Status::Code::kNotFound ? Error(404, "no sweep with id or name '" + name + "'")
                                                             : ErrorFrom(sweep.status());
  }
  return std::move(sweep).value();
}

HttpReply HttpServer::OnSweep(const RouteCall& call, const std::function<HttpReply(const metrics::SweepRecord&)>& f) {
  auto found = FindSweep(call.params.at("sweep"));
  if (auto* reply = std::get_if<HttpReply>(&found)) return std::move(*reply);
  return f(std::get<metrics::SweepRecord>(found));
}

HttpReply HttpServer::SweepRoute(const RouteCall& call) {
  return OnSweep(call, [this](const metrics::SweepRecord& sweep) {
    return JsonReply(200, WithLiveState(SweepJson(sweep), service_, sweep.id));
  });
}

HttpReply HttpServer::TrialsRoute(const RouteCall& call) {
  return OnSweep(call, [this](const metrics::SweepRecord& sweep) {
    auto trials = service_.store().Reader()->ListTrialResults(sweep.id);
    return trials.ok() ? JsonReply(200, TrialsJson(*trials)) : ErrorFrom(trials.status());
  });
}

HttpReply HttpServer::LiveRoute(const RouteCall& call) {
  return OnSweep(call, [this](const metrics::SweepRecord& sweep) {
    // The figures are kept per attempt as steps are stored (attempt_live_sums, schema
    // version 8): a row per trial is read, never a step (A5). Still on the pool, on a
    // read-only connection of its own (the store's lock is never held for it, so writes
    // go on), at most kMaxLiveInFlight at once: a sweep may hold 10,000 trials.
    JobSlots::Slot slot = live_slots_.TryTake();
    if (slot == nullptr) {
      return Error(503, "the coordinator is already summing " + std::to_string(kMaxLiveInFlight) +
                            " sweeps' live figures; retry in a few seconds");
    }
    HttpReply reply;
    reply.blocking_work = [slot, db_path = service_.store().path(), sweep_id = sweep.id,
                           timeout = service_.config().query_timeout]() mutable {
      metrics::QueryLimits limits;
      limits.max_rows = std::numeric_limits<std::int64_t>::max();
      limits.timeout = timeout;
      limits.max_result_bytes = kMaxQueryResponseBytes;
      auto result = metrics::RunReadOnlyQuery(db_path, metrics::LiveFiguresSql(sweep_id), limits);
      HttpReply done;
      if (!result.ok()) {
        done = ErrorFrom(result.status());
      } else {
        std::vector<metrics::LiveTrialFigures> live;
        for (const auto& row : result->rows) {
          metrics::LiveTrialFigures f;
          f.trial_id = row.at(0).get<std::int64_t>();
          f.attempt = row.at(1).get<std::int64_t>();
          f.measured_steps = static_cast<std::int64_t>(row.at(2).get<double>());
          f.tokens = static_cast<std::int64_t>(row.at(3).get<double>());
          f.step_s = row.at(4).get<double>();
          if (row.at(5).is_number()) f.peak_mem_bytes = row.at(5).get<std::int64_t>();
          live.push_back(f);
        }
        done = result->truncated ? Error(503, "the sweep's live figures are over the answer's limit")
                                 : JsonReply(200, LiveJson(live));
      }
      done.hold = std::move(slot);
      return done;
    };
    return reply;
  });
}

HttpReply HttpServer::ReportRoute(const RouteCall& call) {
  return OnSweep(call, [this, &call](const metrics::SweepRecord& sweep) { return BuildReport(call, sweep); });
}

HttpReply HttpServer::BuildReport(const RouteCall& call, const metrics::SweepRecord& sweep) {
  // The report library parses its own options (a bad one is 400 before any work).
  auto options = metrics::ParseReportQuery(QueryParams(call.query));
  if (!options.ok()) return ErrorFrom(options.status());
  // Built on the pool (a big sweep's bootstrap takes seconds), never on the service's
  // executor; at most kMaxReportsInFlight at once, so that queued reports cannot pile up.
  JobSlots::Slot slot = report_slots_.TryTake();
  if (slot == nullptr) {
    return Error(503, "the coordinator is already building " + std::to_string(kMaxReportsInFlight) +
                          " reports; retry in a few seconds");
  }
  HttpReply reply;
  reply.blocking_work = [slot, db_path = service_.store().path(), sweep_id = std::to_string(sweep.id),
                         options = *options]() mutable {
    auto rendered = metrics::RenderSweepReport(db_path, sweep_id, options);
    // The slot is held until the report has been written, not only until it is built.
    HttpReply done;
    if (!rendered.ok()) {
      done = ErrorFrom(rendered.status());
    } else {
      done.content_type = metrics::ReportContentType(options.format);
      done.body = std::move(rendered).value();
    }
    done.hold = std::move(slot);
    return done;
  };
  return reply;
}

}  // namespace bakeoff::coordinator
