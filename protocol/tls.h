// Optional TLS (Asio SSL over OpenSSL) for the worker protocol and the HTTP API:
// contexts built from PEM files and handshakes bounded by a deadline. A server presents
// its certificate chain and key (`--tls-cert`, `--tls-key`); a client verifies the
// server's chain against a CA file (`--tls-ca`) or the system's trust store, and the
// certificate's names against the host it dialed (a DNS name, or an IP address SAN).
// TLS 1.2 and newer only. See docs/protocol.md "TLS".
// Thread-safety: contexts are immutable after creation and may be shared between
// connections and threads; each stream belongs to one executor.
#pragma once

// GCC 12 warns about Asio's coroutine frame allocator (a false positive of
// -Wmismatched-new-delete); every coroutine user includes this header.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "protocol/status.h"

namespace bakeoff::protocol {

using TlsContext = boost::asio::ssl::context;
using TlsSocket = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

// A server's context: the certificate chain (leaf first) and its private key, both PEM.
// Fails with kInvalidArgument naming the file that cannot be read or parsed, or both
// when the key does not belong to the certificate.
Result<std::shared_ptr<TlsContext>> MakeServerTlsContext(const std::string& cert_path,
                                                         const std::string& key_path);

// A client's context, verifying the server: against the CA certificates (PEM, one or
// more) in `ca_path`, or the system's default trust store when it is empty. Fails with
// kInvalidArgument naming the file.
Result<std::shared_ptr<TlsContext>> MakeClientTlsContext(const std::string& ca_path);

// Makes a client connection check that the server's certificate is for `host` (a DNS
// name, or an IP address matched against IP SANs) and sends it as SNI (names only: RFC
// 6066 has no IP literals). Call on the stream's SSL handle before the handshake.
Status SetTlsServerName(SSL* ssl, const std::string& host);

// `ec` from a TLS operation as text; when certificate verification failed, with
// OpenSSL's reason (e.g. "self-signed certificate in certificate chain").
std::string TlsErrorText(const boost::system::error_code& ec, SSL* ssl);

// The client handshake on a connected socket, checking the server against `host` (see
// SetTlsServerName). Past `timeout` the socket is closed and kTimeout returned; a failed
// handshake is kUnavailable with the reason.
boost::asio::awaitable<Result<TlsSocket>> TlsClientHandshake(boost::asio::ip::tcp::socket socket,
                                                             TlsContext& context, std::string host,
                                                             std::chrono::milliseconds timeout);

// The server handshake on an accepted socket. The deadline keeps a client that never
// speaks TLS (or stalls mid-handshake) from holding the connection.
boost::asio::awaitable<Result<TlsSocket>> TlsServerHandshake(boost::asio::ip::tcp::socket socket,
                                                             TlsContext& context,
                                                             std::chrono::milliseconds timeout);

// True when `bytes` (at least 2) start like a TLS record (handshake or alert, version
// 3.x): a plain-protocol reader that sees one is talking to a TLS peer.
bool LooksLikeTlsRecord(const unsigned char* bytes, std::size_t size);

}  // namespace bakeoff::protocol
