#include "cli/coordinator_client.h"

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "cli/exit_codes.h"
#include "protocol/frame_connection.h"
#include "protocol/tls.h"
#include "protocol/token.h"

namespace bakeoff::cli {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<CoordinatorClient> CoordinatorClient::Create(const std::string& url, std::string token,
                                                    std::chrono::milliseconds timeout, const std::string& tls_ca) {
  std::string rest = url;
  const bool https = rest.rfind("https://", 0) == 0;
  if (https) rest = rest.substr(8);
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  auto slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  auto split = protocol::SplitHostPort(rest, "coordinator URL");
  if (!split.ok()) return split.status();
  if (split->second == 0) return Status::InvalidArgument("coordinator URL '" + url + "': port 0");
  std::shared_ptr<asio::ssl::context> tls;
  if (https) {
    std::string ca = tls_ca;
    if (const char* env = std::getenv("BAKEOFF_TLS_CA"); ca.empty() && env != nullptr) ca = env;
    auto context = protocol::MakeClientTlsContext(ca);
    if (!context.ok()) return context.status();
    tls = std::move(context).value();
  }
  return CoordinatorClient(split->first, split->second, std::move(token), timeout, std::move(tls));
}

namespace {

// One request and its response over a connected stream (beast::tcp_stream or
// beast::ssl_stream<beast::tcp_stream>).
template <typename Stream>
asio::awaitable<void> WriteAndRead(Stream& stream, const std::string& where, http::request<http::string_body> request,
                                   std::chrono::milliseconds timeout, bool tls, Result<HttpResponse>* out) {
  boost::system::error_code ec;
  beast::get_lowest_layer(stream).expires_after(timeout);
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  if (!ec) {
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec) {
    const bool timed_out = ec == beast::error::timeout;
    // An HTTPS coordinator drops a plain request without a word: say what may be wrong.
    const std::string hint = tls ? "" : " (if the coordinator serves HTTPS, use an https:// URL)";
    *out = timed_out ? Status::Timeout("the coordinator at " + where + " did not answer within " +
                                       std::to_string(timeout.count()) + " ms")
                     : Status::Unavailable("HTTP exchange with " + where + " failed: " + ec.message() + hint);
    co_return;
  }
  auto& response = parser.get();
  HttpResponse result;
  result.status = static_cast<int>(response.result_int());
  result.content_type = std::string(response[http::field::content_type]);
  result.www_authenticate = std::string(response[http::field::www_authenticate]);
  result.body = std::move(response.body());
  // No close_notify over TLS: the response is complete (Content-Length) and we are done.
  beast::get_lowest_layer(stream).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  *out = std::move(result);
}

asio::awaitable<void> Exchange(const std::string& host, int port, asio::ssl::context* tls,
                               http::request<http::string_body> request,
                               std::chrono::milliseconds timeout,
                               Result<HttpResponse>* out) {
  auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  beast::tcp_stream stream(executor);
  boost::system::error_code ec;
  const std::string where = host + ":" + std::to_string(port);
  auto endpoints = co_await resolver.async_resolve(host, std::to_string(port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *out = Status::Unavailable("cannot resolve the coordinator " + where + ": " + ec.message());
    co_return;
  }
  stream.expires_after(timeout);
  co_await stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *out = Status::Unavailable("cannot connect to the coordinator at " + where + ": " +
                               ec.message() + "; is `bakeoff coordinator` running there?");
    co_return;
  }
  if (!tls) {
    co_await WriteAndRead(stream, where, std::move(request), timeout, false, out);
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *tls);
  if (Status s = protocol::SetTlsServerName(secure.native_handle(), host); !s.ok()) {
    *out = s;
    co_return;
  }
  beast::get_lowest_layer(secure).expires_after(timeout);
  co_await secure.async_handshake(asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *out = ec == beast::error::timeout
               ? Status::Timeout("no TLS handshake with the coordinator at " + where + " within " +
                                 std::to_string(timeout.count()) + " ms")
               : Status::Unavailable("TLS handshake with the coordinator at " + where + " failed: " +
                                     protocol::TlsErrorText(ec, secure.native_handle()));
    co_return;
  }
  co_await WriteAndRead(secure, where, std::move(request), timeout, true, out);
}

}  // namespace

Result<HttpResponse> CoordinatorClient::Send(const std::string& method, const std::string& target,
                                             const std::string& body,
                                             const std::string& content_type) const {
  http::request<http::string_body> request;
  request.method_string(method);
  request.target(target);
  request.version(11);
  request.set(http::field::host, host_ + ":" + std::to_string(port_));
  request.set(http::field::user_agent, "bakeoff");
  request.set(http::field::connection, "close");
  if (!token_.empty()) request.set(http::field::authorization, "Bearer " + token_);
  if (method == "POST") {
    request.set(http::field::content_type, content_type);
    request.body() = body;
    request.prepare_payload();
  }
  // A GET (idempotent) goes again once when no answer came (kUnavailable: the connection
  // could not be made or ended first), as HTTP clients retry idempotent requests: a
  // coordinator at its connection cap shuts the oldest silent connection down, which a
  // client preempted between its connect and its write can be (docs/security.md, hole 4).
  const int tries = method == "GET" ? 2 : 1;
  Result<HttpResponse> out = Status::Internal("HTTP exchange did not run");
  for (int attempt = 0; attempt < tries; ++attempt) {
    try {
      asio::io_context io;
      asio::co_spawn(io, Exchange(host_, port_, tls_.get(), request, timeout_, &out), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
      io.run();
    } catch (const std::exception& e) {
      out = Status::Unavailable(std::string("HTTP request to the coordinator failed: ") + e.what());
    }
    if (out.ok() || out.status().code() != Status::Code::kUnavailable) break;
  }
  return out;
}

Result<HttpResponse> CoordinatorClient::Get(const std::string& target) const {
  return Send("GET", target, "", "");
}

Result<HttpResponse> CoordinatorClient::Post(const std::string& target, const std::string& body,
                                             const std::string& content_type) const {
  return Send("POST", target, body, content_type);
}

Status StatusFromResponse(const HttpResponse& response, const std::string& what) {
  if (response.status >= 200 && response.status < 300) return Status::Ok();
  std::string message = EscapeControlCharacters(response.body);
  auto parsed = nlohmann::json::parse(response.body, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("error") &&
      parsed["error"].is_string()) {
    message = EscapeControlCharacters(parsed["error"].get<std::string>());
  }
  const std::string prefix = what + " (HTTP " + std::to_string(response.status) + "): ";
  switch (response.status) {
    case 400: return Status::InvalidArgument(prefix + message);
    case 401:
      return Status::InvalidArgument(prefix + message +
                                     "; give one of the coordinator's API tokens in BAKEOFF_TOKEN or --token-file");
    case 403:  // a valid token whose role does not allow this (docs/security.md)
      return Status::InvalidArgument(prefix + message);
    case 404: return Status::NotFound(prefix + message);
    case 413: return Status::ResourceExhausted(prefix + message);
    case 503: return Status::Unavailable(prefix + message);
    case 504: return Status::Timeout(prefix + message);
    default: return Status::Internal(prefix + message);
  }
}

Result<nlohmann::json> CoordinatorClient::GetJson(const std::string& target) const {
  auto response = Get(target);
  if (!response.ok()) return response.status();
  BAKEOFF_RETURN_IF_ERROR(StatusFromResponse(*response, "GET " + target));
  auto json = nlohmann::json::parse(response->body, nullptr, false);
  if (json.is_discarded()) return Status::Internal("GET " + target + ": the answer is not JSON");
  return json;
}

Result<nlohmann::json> CoordinatorClient::PostJson(const std::string& target, const std::string& body,
                                                   const std::string& content_type) const {
  auto response = Post(target, body, content_type);
  if (!response.ok()) return response.status();
  BAKEOFF_RETURN_IF_ERROR(StatusFromResponse(*response, "POST " + target));
  auto json = nlohmann::json::parse(response->body, nullptr, false);
  if (json.is_discarded()) return Status::Internal("POST " + target + ": the answer is not JSON");
  return json;
}

Result<std::string> CoordinatorClient::GetText(const std::string& target) const {
  auto response = Get(target);
  if (!response.ok()) return response.status();
  BAKEOFF_RETURN_IF_ERROR(StatusFromResponse(*response, "GET " + target));
  return std::move(response->body);
}

std::string UrlEncode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string DefaultCoordinatorUrl() {
  if (const char* env = std::getenv("BAKEOFF_COORDINATOR"); env && *env) return env;
  return "http://127.0.0.1:8080";
}

Result<CoordinatorClient> ConnectCoordinator(const std::string& url, const std::string& token_file,
                                             const std::string& tls_ca, std::chrono::milliseconds timeout) {
  auto token = protocol::LoadToken(token_file);
  // A token file that cannot be read is the caller's mistake (exit 2, docs/cli.md), not
  // an unreachable coordinator.
  if (!token.ok()) return Status::InvalidArgument(token.status().message());
  return CoordinatorClient::Create(url, std::move(token).value(), timeout, tls_ca);
}

Status WriteOutput(const std::string& output_path, const std::string& raw_text) {
  const std::string text = EscapeControlCharacters(raw_text);
  if (output_path.empty() || output_path == "-") {
    std::cout << text;
    if (!text.empty() && text.back() != '\n') std::cout << '\n';
    std::cout.flush();
    return Status::Ok();
  }
  std::ofstream out(output_path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!text.empty() && text.back() != '\n') out << '\n';
  out.close();
  if (!out) return Status::IoError("cannot write '" + output_path + "': check the directory and its permissions");
  return Status::Ok();
}

int WriteCommandOutput(std::string_view command, const std::string& output_path, const std::string& text) {
  if (Status written = WriteOutput(output_path, text); !written.ok()) {
    std::cerr << "bakeoff " << command << ": " << EscapeControlCharacters(written.message()) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

std::string RenderTextTable(const std::vector<std::string>& header,
                            const std::vector<std::vector<std::string>>& rows,
                            const std::vector<bool>& numeric) {
  std::vector<std::size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (std::size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      std::string pad(width[i] - std::min(width[i], cell.size()), ' ');
      const bool right = i < numeric.size() && numeric[i];
      out += right ? pad + cell : cell + (i + 1 < width.size() ? pad : "");
      if (i + 1 < width.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

}  // namespace bakeoff::cli
