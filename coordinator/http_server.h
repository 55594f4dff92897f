// HttpServer: the coordinator's HTTP API (Boost.Beast, one coroutine per connection)
// documented in docs/cli.md; HTTPS when given a TLS context (the handshake within 10 s).
// Every route but /healthz (and /metrics unless metrics_require_token) needs
// `Authorization: Bearer TOKEN` of an API role (401 with `WWW-Authenticate: Bearer`
// otherwise; compared in constant time): a read token for GET and POST /api/v1/query,
// a submit token for every other method (403 with a read token). The headers are
// checked before the body is read: an unauthenticated or unauthorised request is
// answered without reading its body. A connection counts as authenticated (never shut
// down to make room, protocol/listener.h) only once a request carried a read or submit
// token that matched: any other Authorization header, the worker credential included,
// leaves it evictable (security review 2026-12-07, A1). Whatever they send, at most
// kMaxHttpConnectionsPerPeer connections of one address are served at once; one more
// is closed unanswered. Bodies are limited (413 past
// CoordinatorConfig::max_request_body_bytes, also checked before reading), and so are
// connections (max_http_connections, protocol/listener.h).
// Errors are JSON: {"error": "..."}. POST /api/v1/query runs read-only SQL (bounded
// rows and time) and GET .../report builds a report (bounded bootstrap work, at most
// kMaxReportsInFlight at once) on a small thread pool, never on the service's executor;
// POST /api/v1/sweeps parses and expands the sweep on a thread of its own (one at a
// time, in arrival order; no report or query waits ahead of it) and stores it back on
// the executor.
// Thread-safety: runs on the service's single-threaded executor.
#pragma once

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "coordinator/coordinator_service.h"
#include "protocol/listener.h"
#include "protocol/log_limiter.h"

namespace bakeoff::coordinator {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  bool bearer_challenge = false;  // add WWW-Authenticate: Bearer
  // Set by routes whose work may block (a user's SQL): the session runs it on the
  // server's worker pool and sends its reply instead, so the service's executor (and
  // with it heartbeats and scheduling) never waits on it.
  std::function<HttpReply()> blocking_work{};
  // With blocking_work: run it in arrival order, one at a time, with the other
  // in_order work (sweep submissions: their ids follow the order they arrived in, and
  // one expansion at a time is held in memory).
  bool in_order = false;
  // With blocking_work: a user's SQL (POST /api/v1/query), run one at a time on a
  // thread of its own, so that queries neither stall submissions and reports nor add
  // up their memory (docs/security.md, "Limits").
  bool query = false;
  // Set on blocking_work's reply when the rest of the work belongs on the service's
  // executor (a prepared sweep is stored and scheduled there): the session calls it
  // there and sends its reply instead.
  std::function<HttpReply()> then_on_executor{};
  std::string allow;  // a 405's methods, for its Allow header
  // The web page and its assets: sent with a Content-Security-Policy that lets the page
  // load only its own script and style and talk only to this coordinator.
  bool page = false;
  // Held until the reply has been written (or the write failed): a query's or report's
  // JobSlot, so that answers nobody reads count against their kind's cap while they
  // wait in memory (security review 2026-12-07, A3).
  std::shared_ptr<void> hold{};
};

// Who may call a route: anyone (the page's files, /healthz, the OpenAPI document: they
// hold no data), a read token, or a submit token.
enum class ApiRole { kNone = 0, kRead = 1, kSubmit = 2 };

// How a submitted sweep is prepared off the executor: CoordinatorService::PrepareSweep
// unless a test wraps it.
using SweepPreparer =
    std::function<std::variant<PreparedSweep, ApiError>(const SweepSubmission& submission, std::string yaml)>;

// Reports built at once (queued or running on the pool); one more is answered 503.
inline constexpr int kMaxReportsInFlight = 4;
// Read-only queries queued or running on their own one-thread pool; one more is
// answered 503 at once, so that slow queries cannot pile up behind each other.
inline constexpr int kMaxQueriesInFlight = 2;
// GET .../live sums queued or running on the pool; one more is answered 503 at once.
inline constexpr int kMaxLiveInFlight = 2;
// Connections of one address served at once, whatever they send (authenticated or
// not); one more is closed as soon as it is accepted (security review 2026-12-07, A1).
inline constexpr std::size_t kMaxHttpConnectionsPerPeer = 64;
// Bytes of response bodies being written at once, over all connections. A reply that
// would pass it is answered 503 instead (its body dropped at once), unless it is small
// (kSmallReplyBytes: /healthz, errors), so that clients which ask and never read hold
// at most this much of the coordinator's memory (A3).
inline constexpr std::size_t kMaxResponseBytesInFlight = 64u << 20;
inline constexpr std::size_t kSmallReplyBytes = 64u << 10;
// A query's answer, as encoded JSON: the query's result bound (metrics::QueryLimits::
// max_result_bytes counts encoded bytes, escapes and layout included).
inline constexpr std::size_t kMaxQueryResponseBytes = 16u << 20;

// At most `max` blocking jobs of one kind (reports, queries) queued or running at once.
// A job holds its Slot while it runs; the slot is free again when the job lets it go or
// when the job is dropped unrun (a copy of the slot may outlive the request's coroutine).
class JobSlots {
 public:
  using Slot = std::shared_ptr<void>;
  explicit JobSlots(int max) : max_(max) {}
  // A slot, or nullptr when `max` jobs hold one.
  Slot TryTake() {
    if (held_->load() >= max_) return nullptr;
    held_->fetch_add(1);
    return Slot(held_.get(), [held = held_](void*) { held->fetch_sub(1); });
  }

 private:
  int max_;
  std::shared_ptr<std::atomic<int>> held_ = std::make_shared<std::atomic<int>>(0);
};

class HttpServer {
 public:
  // `tls` null: plain HTTP.
  HttpServer(boost::asio::any_io_executor executor, CoordinatorService& service,
             std::shared_ptr<protocol::TlsContext> tls = nullptr);
  ~HttpServer();  // waits for queries in flight (each bounded by query_timeout)

  Status Listen(const std::string& address) { return listener_.Listen(address); }
  void Start();
  void Stop() { listener_.Stop(); }
  int port() const { return listener_.port(); }
  int pages_served() const { return pages_served_; }

  // The refusal (401, 403) of a request with these headers, or nullopt when it may go on
  // to have its body read and be handled. Transport-free, like Handle.
  std::optional<HttpReply> Authorize(const std::string& method, const std::string& target,
                                     const std::string& authorization) const;

  // The routing and handling of one request, transport-free (unit-testable); checks
  // Authorize first. A reply with blocking_work is completed by calling it (Session
  // does so off the executor), then its reply's then_on_executor, if any (Session does
  // so back on the executor).
  HttpReply Handle(const std::string& method, const std::string& target,
                   const std::string& authorization, const std::string& body);

  // One request's route and what it carries.
  struct RouteCall {
    std::string path;  // without the query string
    std::string query;
    std::map<std::string, std::string> params;  // "{sweep}" -> its decoded segment
    const std::string& body;
  };
  // The coordinator's routes, one table: Authorize reads each one's role, Dispatch its
  // handler, and the tests check /api/v1/openapi.json against it.
  struct Route {
    const char* method;
    const char* pattern;  // e.g. "/api/v1/sweeps/{sweep}/trials"; "{x}" is one segment
    ApiRole role;
    HttpReply (HttpServer::*handle)(const RouteCall&);
    const char* hint;  // appended to a 405's message
  };
  static const std::vector<Route>& Routes();

  // Whether `authorization` is `Bearer T` with T one of the read or submit tokens: only
  // then is a connection authenticated. Compared in constant time.
  bool TokenMatches(const std::string& authorization) const;

  // Replaces how submitted sweeps are prepared (tests hold one mid-preparation).
  // REQUIRES: called before Start.
  void set_sweep_preparer(SweepPreparer preparer) { sweep_preparer_ = std::move(preparer); }

 private:
  // What a (method, path) finds in Routes(): the route, or the methods the path takes.
  struct Match {
    const Route* route = nullptr;
    std::map<std::string, std::string> params;
    std::string allowed;  // "GET or POST": every method of the routes the path matches
    std::string hint;
    ApiRole lowest = ApiRole::kSubmit;  // the lowest role of those routes
  };
  static Match Find(const std::string& method, const std::string& path);
  HttpReply Dispatch(const std::string& method, const std::string& target, const std::string& body);
  // The sweep a route names, counted live when this coordinator runs it; else its error reply.
  std::variant<metrics::SweepRecord, HttpReply> FindSweep(const std::string& name);
  // `f` of the sweep the call's {sweep} names, or FindSweep's error reply.
  HttpReply OnSweep(const RouteCall& call, const std::function<HttpReply(const metrics::SweepRecord&)>& f);
  // GET .../report once its sweep is found: options checked, then built on the pool.
  HttpReply BuildReport(const RouteCall& call, const metrics::SweepRecord& sweep);

  HttpReply PageRoute(const RouteCall& call);
  HttpReply AssetRoute(const RouteCall& call);
  HttpReply OpenApiRoute(const RouteCall& call);
  HttpReply HealthRoute(const RouteCall& call);
  HttpReply MetricsRoute(const RouteCall& call);
  HttpReply ServiceDiscoveryRoute(const RouteCall& call);
  HttpReply QueryRoute(const RouteCall& call);
  HttpReply WorkersRoute(const RouteCall& call);
  HttpReply DrainRoute(const RouteCall& call);
  HttpReply ListSweepsRoute(const RouteCall& call);
  HttpReply SubmitRoute(const RouteCall& call);
  HttpReply SweepRoute(const RouteCall& call);
  HttpReply CancelRoute(const RouteCall& call);
  HttpReply TrialsRoute(const RouteCall& call);
  HttpReply LiveRoute(const RouteCall& call);
  HttpReply ReportRoute(const RouteCall& call);
  boost::asio::awaitable<void> Session(boost::asio::ip::tcp::socket socket, protocol::ConnectionSlot slot);
  // What ServeRequests reads of a request's header before its body.
  struct RequestHead {
    std::string method, target, authorization, host, origin;
    std::optional<std::uint64_t> content_length;
  };
  // The steps of ServeRequests. The reply that refuses a request before its body is read
  // (no or a wrong token, a foreign Host or Origin under open reads, a body over the
  // limit), or nullopt; marks the connection authenticated once a token matched.
  std::optional<HttpReply> Refusal(const RequestHead& head, bool& authenticated, protocol::ConnectionSlot& slot);
  // The route's reply, its blocking work done on its pool.
  boost::asio::awaitable<HttpReply> Answer(const std::string& method, const std::string& target,
                                           const std::string& body);
  // Replaces a large reply by a 503 when the answers being written would pass their bound.
  void BoundAnswerBytes(HttpReply& reply) const;
  // Requests and replies until the client is done; Stream: beast::tcp_stream or
  // beast::ssl_stream<beast::tcp_stream>.
  template <typename Stream>
  // `slot` is marked authenticated once a request carries a valid token.
  boost::asio::awaitable<void> ServeRequests(Stream& stream, protocol::ConnectionSlot& slot);

  boost::asio::any_io_executor executor_;
  CoordinatorService& service_;
  protocol::Listener listener_;
  std::shared_ptr<protocol::TlsContext> tls_;
  // Reports queued or being built on blocking_pool_; queries on query_pool_.
  JobSlots report_slots_{kMaxReportsInFlight};
  JobSlots query_slots_{kMaxQueriesInFlight};
  JobSlots live_slots_{kMaxLiveInFlight};
  boost::asio::thread_pool blocking_pool_{2};
  // HttpReply::query work runs here, one at a time.
  boost::asio::thread_pool query_pool_{1};
  // HttpReply::in_order work (sweep submissions) runs here, one at a time in arrival
  // order, on a thread of its own: reports on blocking_pool_ never hold a submission
  // back (security review 2026-12-07, A9).
  boost::asio::thread_pool submit_pool_{1};
  SweepPreparer sweep_preparer_ = &CoordinatorService::PrepareSweep;
  int pages_served_ = 0;  // GET / (on the executor)
  // On the executor: connections served per peer address, and response bytes being
  // written (kMaxResponseBytesInFlight).
  std::shared_ptr<std::map<std::string, std::size_t>> open_by_peer_ =
      std::make_shared<std::map<std::string, std::size_t>>();
  std::size_t response_bytes_in_flight_ = 0;
  // Peer-triggered log lines (over the per-peer cap, TLS failures): at most one per
  // 10 s, with how many were left out (protocol/log_limiter.h).
  logging::LogLimiter peer_log_;
};

}  // namespace bakeoff::coordinator
