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
#include "metrics/store/read_only_query.h"
#include "metrics/report/report_renderer.h"
#include "metrics/report/report_service.h"
#include "protocol/json_limits.h"
#include "protocol/token.h"
#include "protocol/log.h"

namespace bakeoff::coordinator {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using nlohmann::json;

namespace {

// A sweep's JSON with "waiting": why its queued trials cannot start, when they cannot.
json WithWaiting(json sweep, const std::string& reason) {
  if (!reason.empty()) sweep["waiting"] = reason;
  return sweep;
}

constexpr std::chrono::seconds kTlsHandshakeTimeout{10};
// A connection that has not shown a valid token yet sends its request header within this.
constexpr std::chrono::seconds kPreAuthHeaderTimeout{10};

constexpr logging::Logger kLog("coordinator");

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
  return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", service.MetricsText(), false};
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
  query_pool_.join();
  blocking_pool_.join();
}

void HttpServer::Start() {
  listener_.Start(
      [this](tcp::socket socket, protocol::ConnectionSlot slot) { return Session(std::move(socket), std::move(slot)); });
}

asio::awaitable<void> HttpServer::Session(tcp::socket socket, protocol::ConnectionSlot slot) {
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
    kLog.Warning("HTTPS connection from " + peer + ": TLS handshake failed: " + protocol::TlsErrorText(ec, stream.native_handle()));
    co_return;
  }
  co_await ServeRequests(stream, slot);
  // close_notify, bounded: a client that has gone does not answer it.
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
}

template <typename Stream>
asio::awaitable<void> HttpServer::ServeRequests(Stream& stream, protocol::ConnectionSlot& slot) {
  beast::flat_buffer buffer;
  bool authenticated = false;
  const std::size_t body_limit = service_.config().max_request_body_bytes;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 * 1024);
    // The header first, with no body limit yet: the limit is checked below, after the
    // token, so that an unauthenticated client learns nothing but 401. (Not boost::none:
    // Boost 1.74 compares a Content-Length with an unset limit as over it.)
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
        kLog.Info("HTTP connection from " + PeerAddress(beast::get_lowest_layer(stream).socket()) +
            ": the client speaks TLS but this coordinator serves plain HTTP (no --tls-cert)");
      }
      break;
    }
    slot.Serving(true);  // speaking: shut down to make room only after the silent ones
    auto& request = parser.get();
    const std::string target(request.target());
    unsigned version = request.version();
    bool keep_alive = request.keep_alive();
    std::optional<HttpReply> refused =
        Authorize(std::string(request.method_string()), target, std::string(request[http::field::authorization]));
    if (!refused && !request[http::field::authorization].empty()) {
      slot.Authenticated();
      authenticated = true;
    }
    if (!refused && parser.content_length() && *parser.content_length() > body_limit) {
      refused = Error(413, "request body over the limit of " + std::to_string(body_limit) + " bytes");
    }
    HttpReply reply;
    if (refused) {
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
        reply = Route(std::string(request.method_string()), target, request.body());
        if (reply.blocking_work && reply.query) {
          reply = co_await RunOffExecutor(query_pool_.get_executor(), executor_, std::move(reply.blocking_work),
                                          asio::use_awaitable);
        } else if (reply.blocking_work && reply.in_order) {
          reply = co_await RunOffExecutor(in_order_, executor_, std::move(reply.blocking_work), asio::use_awaitable);
        } else if (reply.blocking_work) {
          reply = co_await RunOffExecutor(blocking_pool_.get_executor(), executor_, std::move(reply.blocking_work),
                                          asio::use_awaitable);
        }
        if (reply.then_on_executor) {
          auto then = std::move(reply.then_on_executor);
          reply = then();
        }
      }
    }
    service_.metrics().ObserveHttpRequest(target, reply.status);
    http::response<http::string_body> response{static_cast<http::status>(reply.status), version};
    response.set(http::field::server, "bakeoff");
    response.set(http::field::content_type, reply.content_type);
    if (reply.bearer_challenge) response.set(http::field::www_authenticate, "Bearer realm=\"bakeoff\"");
    response.keep_alive(keep_alive);
    response.body() = std::move(reply.body);
    response.prepare_payload();
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    co_await http::async_write(stream, response, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !keep_alive) break;
    slot.Serving(false);  // waiting for its next request: silent again
  }
}

// POST /api/v1/query {"sql", "max_rows"?, "timeout_s"?}: the reply (work done on the
// pool) is RunReadOnlyQuery's result as {"columns", "rows", "truncated"}.
HttpReply HttpServer::QueryRoute(const std::string& body) const {
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
  if (queries_in_flight_->load() >= kMaxQueriesInFlight) {
    return Error(503, "the coordinator is already running " + std::to_string(kMaxQueriesInFlight) +
                          " queries; retry in a few seconds");
  }
  queries_in_flight_->fetch_add(1);
  HttpReply reply;
  reply.blocking_work = [in_flight = queries_in_flight_, db_path = service_.store().path(),
                         sql = request["sql"].get<std::string>(), limits]() {
    auto result = metrics::RunReadOnlyQuery(db_path, sql, limits);
    in_flight->fetch_sub(1);
    if (!result.ok()) return ErrorFrom(result.status());
    json rows = json::array();
    for (auto& row : result->rows) rows.push_back(std::move(row));
    return JsonReply(200, {{"columns", result->columns}, {"rows", std::move(rows)}, {"truncated", result->truncated}});
  };
  reply.query = true;
  return reply;
}

std::optional<HttpReply> HttpServer::Authorize(const std::string& method, const std::string& target,
                                               const std::string& authorization) const {
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/healthz") return std::nullopt;
  const CoordinatorConfig& config = service_.config();
  if (path == "/metrics" && !config.metrics_require_token) return std::nullopt;
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
  // Reading: GET (and HEAD), and the query route, which only reads. Anything else
  // (submit, cancel, drain, and any route added later) needs the submit role.
  const bool reads = method == "GET" || method == "HEAD" || (method == "POST" && path == "/api/v1/query");
  if (!reads && !submit) {
    return Error(403, "this token has the read role; " + method + " " + path +
                          " needs a token with the submit role (the coordinator's --token-file)");
  }
  return std::nullopt;
}

HttpReply HttpServer::Handle(const std::string& method, const std::string& target,
                             const std::string& authorization, const std::string& body) {
  if (auto refused = Authorize(method, target, authorization)) return std::move(*refused);
  return Route(method, target, body);
}

HttpReply HttpServer::Route(const std::string& method, const std::string& target, const std::string& body) {
  std::string path = target;
  std::string query;
  if (auto q = target.find('?'); q != std::string::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  if (path == "/healthz") {
    if (!service_.store().healthy()) {
      return JsonReply(503, {{"status", "unhealthy"}, {"error", service_.store().health().message()}});
    }
    return JsonReply(200, {{"status", "ok"}});
  }
  if (path == "/metrics") return MetricsReply(service_);
  if (path == "/api/v1/sd") {
    if (method != "GET") return Error(405, "use GET " + path);
    return JsonReply(200, service_.ServiceDiscoveryJson());
  }
  // Split /api/v1/... into segments.
  std::vector<std::string> seg;
  {
    std::size_t pos = 1;
    while (pos <= path.size()) {
      auto slash = path.find('/', pos);
      std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      if (!part.empty()) seg.push_back(UrlDecode(part));
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
  }
  if (seg.size() < 3 || seg[0] != "api" || seg[1] != "v1") return Error(404, "no route " + path);
  auto& store = service_.store();
  if (seg[2] == "query" && seg.size() == 3) {
    if (method != "POST") return Error(405, "use POST " + path + " with {\"sql\": \"SELECT ...\"}");
    return QueryRoute(body);
  }
  if (seg[2] == "workers" && seg.size() == 5 && seg[4] == "drain") {
    if (method != "POST") return Error(405, "use POST " + path);
    auto result = service_.DrainWorker(seg[3]);
    if (auto* error = std::get_if<ApiError>(&result)) return Error(error->http_status, error->message);
    return JsonReply(200, std::get<json>(result));
  }
  if (seg[2] == "workers" && seg.size() == 3) {
    if (method != "GET") return Error(405, "use GET " + path);
    return JsonReply(200, service_.WorkersJson());
  }
  if (seg[2] != "sweeps") return Error(404, "no route " + path);
  if (seg.size() == 3) {
    if (method == "POST") {
      if (body.empty()) return Error(400, "the request body must be the sweep's YAML");
      // Parsed and expanded on the pool (a sweep at the caps takes a while), stored and
      // scheduled back on the executor.
      auto submission = service_.BeginSubmit();
      if (auto* error = std::get_if<ApiError>(&submission)) return Error(error->http_status, error->message);
      HttpReply reply;
      reply.in_order = true;
      reply.blocking_work = [&service = service_, prepare = sweep_preparer_,
                             submission = std::get<SweepSubmission>(std::move(submission)), yaml = body]() mutable {
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
    if (method != "GET") return Error(405, "use GET or POST " + path);
    auto sweeps = store.ListSweeps();
    if (!sweeps.ok()) return ErrorFrom(sweeps.status());
    json out = json::array();
    for (const auto& s : *sweeps) out.push_back(WithWaiting(SweepJson(s), service_.WaitingReason(s.id)));
    return JsonReply(200, out);
  }
  const std::string& sweep_name = seg[3];
  if (seg.size() == 5 && seg[4] == "cancel") {
    if (method != "POST") return Error(405, "use POST " + path);
    auto result = service_.CancelSweep(sweep_name);
    if (auto* error = std::get_if<ApiError>(&result)) return Error(error->http_status, error->message);
    return JsonReply(200, std::get<json>(result));
  }
  if (method != "GET") return Error(405, "use GET " + path);
  // A sweep this coordinator runs is counted from its trial table (after the read, which
  // commits the open group); the store counts the others.
  auto sweep = store.FindSweep(sweep_name, metrics::ResultsStore::Counts::kSkip);
  if (sweep.ok()) {
    if (auto live = service_.LiveTrialCounts(sweep->id)) {
      sweep->counts = *live;
    } else {
      sweep = store.GetSweep(sweep->id);
    }
  }
  if (!sweep.ok()) {
    return sweep.status().code() == Status::Code::kNotFound
               ? Error(404, "no sweep with id or name '" + sweep_name + "'")
               : ErrorFrom(sweep.status());
  }
  if (seg.size() == 4) return JsonReply(200, WithWaiting(SweepJson(*sweep), service_.WaitingReason(sweep->id)));
  if (seg.size() == 5 && seg[4] == "trials") {
    auto trials = store.ListTrialResults(sweep->id);
    if (!trials.ok()) return ErrorFrom(trials.status());
    return JsonReply(200, TrialsJson(*trials));
  }
  if (seg.size() == 5 && seg[4] == "report") {
    // The report library parses its own options (a bad one is 400 before any work).
    auto options = metrics::ParseReportQuery(QueryParams(query));
    if (!options.ok()) return ErrorFrom(options.status());
    // Built on the pool (a big sweep's bootstrap takes seconds), never on the service's
    // executor; at most kMaxReportsInFlight at once, so that queued reports cannot pile up.
    if (reports_in_flight_->load() >= kMaxReportsInFlight) {
      return Error(503, "the coordinator is already building " + std::to_string(kMaxReportsInFlight) +
                            " reports; retry in a few seconds");
    }
    reports_in_flight_->fetch_add(1);
    HttpReply reply;
    reply.blocking_work = [in_flight = reports_in_flight_, db_path = store.path(),
                           sweep_id = std::to_string(sweep->id), options = *options]() {
      auto rendered = metrics::RenderSweepReport(db_path, sweep_id, options);
      in_flight->fetch_sub(1);
      if (!rendered.ok()) return ErrorFrom(rendered.status());
      HttpReply done;
      done.content_type = metrics::ReportContentType(options.format);
      done.body = std::move(rendered).value();
      return done;
    };
    return reply;
  }
  return Error(404, "no route " + path);
}

}  // namespace bakeoff::coordinator
