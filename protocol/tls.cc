#include "protocol/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace bakeoff::protocol {
namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::use_awaitable;
using boost::system::error_code;

namespace {

// Checked before OpenSSL sees the file: its own errors ("no start line") do not say
// whether the file is missing or merely not PEM.
Status CheckReadable(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::InvalidArgument(what + ": no file given");
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument(what + " '" + path + "': cannot read it: " + std::strerror(errno));
  return Status::Ok();
}

// TLS 1.0 and 1.1 are deprecated (RFC 8996); SSLv2/3 are broken.
void RestrictProtocols(TlsContext& context) {
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
}

awaitable<Result<TlsSocket>> Handshake(TlsSocket stream, ssl::stream_base::handshake_type type,
                                       std::chrono::milliseconds timeout, std::string what) {
  asio::steady_timer timer(stream.get_executor());
  struct State {
    bool fired = false;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  timer.expires_after(timeout);
  // `stream` outlives the handler's use of it: `done` is set before it goes away.
  timer.async_wait([&stream, state](const error_code& ec) {
    if (ec || state->done) return;
    state->fired = true;
    error_code ignored;
    stream.lowest_layer().close(ignored);
  });
  error_code ec;
  co_await stream.async_handshake(type, asio::redirect_error(use_awaitable, ec));
  state->done = true;
  timer.cancel();
  if (state->fired) {
    co_return Status::Timeout(what + ": no TLS handshake within " + std::to_string(timeout.count()) + " ms");
  }
  if (ec) {
    std::string reason = TlsErrorText(ec, stream.native_handle());
    error_code ignored;
    stream.lowest_layer().close(ignored);
    co_return Status::Unavailable(what + ": TLS handshake failed: " + reason);
  }
  co_return std::move(stream);
}

std::string PeerAddress(const asio::ip::tcp::socket& socket) {
  error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "an unknown peer";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

}  // namespace

Result<std::shared_ptr<TlsContext>> MakeServerTlsContext(const std::string& cert_path,
                                                         const std::string& key_path) {
  BAKEOFF_RETURN_IF_ERROR(CheckReadable(cert_path, "TLS certificate file"));
  BAKEOFF_RETURN_IF_ERROR(CheckReadable(key_path, "TLS key file"));
  auto context = std::make_shared<TlsContext>(ssl::context::tls_server);
  RestrictProtocols(*context);
  error_code ec;
  context->use_certificate_chain_file(cert_path, ec);
  if (ec) {
    return Status::InvalidArgument("TLS certificate file '" + cert_path +
                                   "': not a PEM certificate chain (" + ec.message() + ")");
  }
  context->use_private_key_file(key_path, ssl::context::pem, ec);
  if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    return Status::InvalidArgument("TLS key file '" + key_path + "' does not belong to the certificate in '" +
                                   cert_path + "'");
  }
  if (ec) {
    return Status::InvalidArgument("TLS key file '" + key_path + "': not an unencrypted PEM private key (" +
                                   ec.message() + ")");
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return Status::InvalidArgument("TLS key file '" + key_path + "' does not belong to the certificate in '" +
                                   cert_path + "'");
  }
  return context;
}

Result<std::shared_ptr<TlsContext>> MakeClientTlsContext(const std::string& ca_path) {
  auto context = std::make_shared<TlsContext>(ssl::context::tls_client);
  RestrictProtocols(*context);
  context->set_verify_mode(ssl::verify_peer);
  error_code ec;
  if (ca_path.empty()) {
    context->set_default_verify_paths(ec);
    if (ec) return Status::InvalidArgument("cannot load the system's TLS trust store: " + ec.message());
    return context;
  }
  BAKEOFF_RETURN_IF_ERROR(CheckReadable(ca_path, "TLS CA file"));
  context->load_verify_file(ca_path, ec);
  if (ec) {
    return Status::InvalidArgument("TLS CA file '" + ca_path + "': no PEM CA certificate in it (" +
                                   ec.message() + ")");
  }
  return context;
}

Status SetTlsServerName(SSL* ssl, const std::string& host) {
  // OpenSSL's own name checks rather than ssl::host_name_verification (which calls the
  // same X509_check_host/X509_check_ip_asc): a mismatch then shows in the verify result
  // as "hostname mismatch" instead of a bare "certificate verify failed".
  error_code ec;
  asio::ip::make_address(host, ec);
  const bool is_ip = !ec;
  if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1) {
      return Status::InvalidArgument("cannot verify TLS against the address '" + host + "'");
    }
    return Status::Ok();
  }
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, host.c_str()) != 1 || SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return Status::InvalidArgument("cannot verify TLS against the host name '" + host + "'");
  }
  return Status::Ok();
}

std::string TlsErrorText(const error_code& ec, SSL* ssl) {
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated || ec == asio::error::connection_reset) {
    return "the peer closed the connection (does it speak TLS on this port?)";
  }
  std::string text = ec.message();
  if (ssl != nullptr) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) text += ": " + std::string(X509_verify_cert_error_string(verify));
  }
  if (ec.category() == asio::error::get_ssl_category()) {
    // The reasons OpenSSL gives for a peer that speaks something else than TLS.
    const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_HTTP_REQUEST) text += " (a plain HTTP client on a TLS port?)";
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNKNOWN_PROTOCOL) text += " (the peer does not speak TLS?)";
  }
  return text;
}

awaitable<Result<TlsSocket>> TlsClientHandshake(asio::ip::tcp::socket socket, TlsContext& context,
                                                std::string host, std::chrono::milliseconds timeout) {
  const std::string what = "TLS to " + PeerAddress(socket);
  TlsSocket stream(std::move(socket), context);
  if (Status s = SetTlsServerName(stream.native_handle(), host); !s.ok()) co_return s;
  co_return co_await Handshake(std::move(stream), ssl::stream_base::client, timeout, what);
}

awaitable<Result<TlsSocket>> TlsServerHandshake(asio::ip::tcp::socket socket, TlsContext& context,
                                                std::chrono::milliseconds timeout) {
  const std::string what = "connection from " + PeerAddress(socket);
  co_return co_await Handshake(TlsSocket(std::move(socket), context), ssl::stream_base::server, timeout, what);
}

bool LooksLikeTlsRecord(const unsigned char* bytes, std::size_t size) {
  // Content type 21 (alert) or 22 (handshake), then the major version 3.
  return size >= 2 && (bytes[0] == 21 || bytes[0] == 22) && bytes[1] == 3;
}

}  // namespace bakeoff::protocol
