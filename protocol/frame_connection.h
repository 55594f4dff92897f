// One worker-protocol connection over TCP, plain or TLS (Boost.Asio, C++20 coroutines):
// reads whole frames with a deadline and sends frames through an ordered queue, so that
// the heartbeat loop, the event forwarder and message handlers can all send without
// interleaving bytes. A read or write that passes its deadline closes the connection.
// Each completion of an asynchronous operation waits behind every handler already queued
// on the event loop, which under load is a whole pass of it (docs/scale.md), so the
// common cases skip it: Read reads what the socket has into a buffer and returns the
// frames already there without waiting, and Send on a plain connection with nothing
// queued writes at once (a non-blocking write); only what the socket does not take waits.
// The framing is the same on both transports; a TLS stream arrives handshaken
// (protocol/tls.h).
// Thread-safety: not thread-safe; every method runs on the connection's executor, which
// must be single-threaded (one thread per io_context, as main sets it up).
#pragma once

// GCC 12 warns about Asio's coroutine frame allocator (a false positive of
// -Wmismatched-new-delete); every coroutine user includes this header.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include "protocol/frame_codec.h"
#include "protocol/status.h"
#include "protocol/tls.h"

namespace bakeoff::protocol {

struct FrameConnectionOptions {
  std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
  std::chrono::milliseconds write_timeout{10000};
  // Frames queued but not yet written; past it Send fails (the peer is not reading).
  std::size_t max_queued_bytes = 64u << 20;
};

class FrameConnection : public std::enable_shared_from_this<FrameConnection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;

  explicit FrameConnection(Socket socket, FrameConnectionOptions options = {});
  // Over TLS: `stream` has completed its handshake (TlsServerHandshake/TlsClientHandshake).
  explicit FrameConnection(TlsSocket stream, FrameConnectionOptions options = {});
  ~FrameConnection();

  // Reads the next frame. nullopt timeout waits forever (liveness is then the peer's
  // heartbeat TTL). One Read at a time. Fails with kUnavailable when the peer closed,
  // kTimeout past the deadline, kInvalidArgument/kResourceExhausted for a bad frame
  // (the connection is closed in every failure case). `max_frame_bytes` lowers the
  // connection's limit for this read (a listener's pre-authentication first frame).
  boost::asio::awaitable<Result<nlohmann::json>> Read(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt,
      std::optional<std::size_t> max_frame_bytes = std::nullopt);

  // Sends a frame in order: written at once when nothing waits before it and the socket
  // takes it (plain TCP), else queued; returns at once either way. Fails when the frame
  // cannot be encoded, is over the size limit, the queue is full, or the connection is
  // closed.
  Status Send(const nlohmann::json& message);

  // Completes when every frame queued so far is written (or the connection closed).
  boost::asio::awaitable<Status> Flush();

  void Close();
  bool is_open() const { return open_; }
  bool tls() const { return std::holds_alternative<TlsSocket>(stream_); }
  std::string remote_address() const { return remote_address_; }

 private:
  void Init();
  Socket& socket();  // the TCP layer, under TLS or not
  // The only places that touch the transport: some bytes in, whole buffers out.
  // Appends what the transport has (at least one byte, up to `need` or more) to read_buffer_.
  boost::asio::awaitable<std::size_t> ReadMore(std::size_t need, boost::system::error_code& ec);
  boost::asio::awaitable<std::size_t> WriteAll(boost::asio::const_buffer buffer,
                                               boost::system::error_code& ec);
  boost::asio::awaitable<void> WriteLoop();
  // Writes what a plain socket takes now, without blocking; the rest of `frame` is left.
  void WriteNow(std::string& frame);

  std::variant<Socket, TlsSocket> stream_;
  FrameConnectionOptions options_;
  // Bytes read and not yet returned as frames: read_buffer_[read_pos_, size()).
  std::string read_buffer_;
  std::size_t read_pos_ = 0;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool open_ = true;
  std::string remote_address_;
};

// Connects to host:port within `timeout` (resolves names).
boost::asio::awaitable<Result<boost::asio::ip::tcp::socket>> ConnectTcp(
    std::string host, int port, std::chrono::milliseconds timeout);

// Splits "host:port" (IPv6 in brackets allowed); the error names `what`.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                  const std::string& what);

}  // namespace bakeoff::protocol
