// CoordinatorClient: a small synchronous HTTP client (Boost.Beast) for the
// coordinator's API (docs/cli.md, /api/v1/...), used by `bakeoff submit`, `status`,
// `workers`, `cancel`, `query` and `report --coordinator`. Each call opens one
// connection (HTTPS for an https:// URL, verifying the coordinator's certificate and
// name), sends the bearer token, and fails with a Status (never throws) after `timeout`.
// Non-2xx answers become Statuses carrying the server's error message:
// 400 -> kInvalidArgument, 401 (no or unknown token) and 403 (a read token on a submit
// route) -> kInvalidArgument (exit code 2), 404 -> kNotFound,
// 503 -> kUnavailable, 504 -> kTimeout, other -> kInternal; no connection -> kUnavailable.
// Thread-safety: a client is immutable after Create; calls may run from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/terminal_escape.h"  // EscapeControlCharacters, for the commands that print
#include "protocol/status.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace bakeoff::cli {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string www_authenticate;  // the challenge of a 401
  std::string body;
};

class CoordinatorClient {
 public:
  // `url`: "http://HOST:PORT", "https://HOST:PORT" or "HOST:PORT" (plain HTTP; a path
  // suffix is ignored). `token` may be empty. For https, the server's certificate is
  // verified against the PEM CA file `tls_ca`, else $BAKEOFF_TLS_CA, else the system's
  // trust store, and must name HOST. Fails with kInvalidArgument naming the URL when it
  // cannot be parsed, or the CA file when it cannot be loaded.
  static Result<CoordinatorClient> Create(const std::string& url, std::string token,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                          const std::string& tls_ca = "");

  // Raw calls: any HTTP status is a successful Result; only transport failures fail. A
  // GET that got no answer (kUnavailable) is sent once more; a POST never is.
  Result<HttpResponse> Get(const std::string& target) const;
  Result<HttpResponse> Post(const std::string& target, const std::string& body,
                            const std::string& content_type = "application/json") const;

  // JSON calls: a non-2xx status or a body that is not JSON is an error (see above).
  Result<nlohmann::json> GetJson(const std::string& target) const;
  Result<nlohmann::json> PostJson(const std::string& target, const std::string& body,
                                  const std::string& content_type = "application/json") const;
  // GET whose body is returned as text (e.g. a rendered report); non-2xx is an error.
  Result<std::string> GetText(const std::string& target) const;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  bool tls() const { return tls_ != nullptr; }

 private:
  CoordinatorClient(std::string host, int port, std::string token, std::chrono::milliseconds timeout,
                    std::shared_ptr<boost::asio::ssl::context> tls)
      : host_(std::move(host)), port_(port), token_(std::move(token)), timeout_(timeout), tls_(std::move(tls)) {}

  Result<HttpResponse> Send(const std::string& method, const std::string& target,
                            const std::string& body, const std::string& content_type) const;

  std::string host_;
  int port_ = 0;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
};

// Turns a non-2xx response into a Status with the server's {"error": ...} message.
Status StatusFromResponse(const HttpResponse& response, const std::string& what);

// Percent-encodes a path segment or query value (a sweep name may hold any character).
std::string UrlEncode(const std::string& text);

// --- Helpers shared by the client commands (submit, status, workers, cancel, report) ---

// The default coordinator URL: $BAKEOFF_COORDINATOR, else http://127.0.0.1:8080.
std::string DefaultCoordinatorUrl();

// A client for `url` with the token from `token_file` or BAKEOFF_TOKEN, and for an
// https:// URL the CA file `tls_ca` (--tls-ca; see Create).
Result<CoordinatorClient> ConnectCoordinator(const std::string& url, const std::string& token_file,
                                             const std::string& tls_ca = "",
                                             std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The help text of the client commands' --tls-ca option.
inline constexpr const char* kTlsCaHelp =
    "PEM file of the CA that signed an https:// coordinator's certificate (else $BAKEOFF_TLS_CA, "
    "else the system's trust store)";

// Writes `text` to `output_path`, or to stdout when it is empty or "-", its control
// characters escaped (EscapeControlCharacters).
Status WriteOutput(const std::string& output_path, const std::string& text);
// How a command ends with its output: WriteOutput, then kExitOk, or "bakeoff COMMAND:
// cannot write ..." on stderr and kExitFailure (the operation ran and failed).
int WriteCommandOutput(std::string_view command, const std::string& output_path, const std::string& text);

// A plain-text table with a header row and aligned columns (numbers right-aligned
// when `numeric[i]`).
std::string RenderTextTable(const std::vector<std::string>& header,
                            const std::vector<std::vector<std::string>>& rows,
                            const std::vector<bool>& numeric = {});

}  // namespace bakeoff::cli
