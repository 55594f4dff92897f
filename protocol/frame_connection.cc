#include "protocol/frame_connection.h"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace bakeoff::protocol {
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using boost::system::error_code;

namespace {

// What one TLS read asks for at least: a whole TLS record (16 KiB of plaintext).
constexpr std::size_t kTlsReadBytes = 16 * 1024;
// What one plain read takes at most beyond the frame it completes: a batch of small
// frames, while a peer's backlog waits in the socket rather than in memory.
constexpr std::size_t kReadChunkBytes = 16 * 1024;

// Cancels the socket's pending operations when the deadline passes. The handler holds
// only a weak reference, so a connection that is gone is never touched.
class Deadline {
 public:
  Deadline(const std::shared_ptr<FrameConnection>& conn, asio::ip::tcp::socket& socket,
           std::optional<std::chrono::milliseconds> timeout)
      : timer_(socket.get_executor()), state_(std::make_shared<State>()) {
    if (!timeout) return;
    timer_.expires_after(*timeout);
    std::weak_ptr<FrameConnection> weak = conn;
    auto state = state_;
    timer_.async_wait([weak, state](const error_code& ec) {
      // `done`: the operation finished in the same tick the timer fired; leave it be.
      if (ec || state->done) return;
      if (auto strong = weak.lock()) {
        state->fired = true;
        strong->Close();
      }
    });
  }
  ~Deadline() {
    state_->done = true;
    timer_.cancel();
  }
  bool fired() const { return state_->fired; }

 private:
  struct State {
    bool fired = false;
    bool done = false;
  };
  asio::steady_timer timer_;
  std::shared_ptr<State> state_;
};

Status SocketError(const error_code& ec, const std::string& what) {
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated) {
    return Status::Unavailable(what + ": the peer closed the connection");
  }
  return Status::Unavailable(what + ": " + ec.message());
}

}  // namespace

FrameConnection::FrameConnection(Socket socket, FrameConnectionOptions options)
    : stream_(std::in_place_type<Socket>, std::move(socket)), options_(options) {
  Init();
}

FrameConnection::FrameConnection(TlsSocket stream, FrameConnectionOptions options)
    : stream_(std::in_place_type<TlsSocket>, std::move(stream)), options_(options) {
  Init();
}

void FrameConnection::Init() {
  error_code ec;
  auto endpoint = socket().remote_endpoint(ec);
  if (!ec) remote_address_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  socket().set_option(asio::ip::tcp::no_delay(true), ec);
  // For WriteNow: a synchronous write on a plain socket must never block the loop.
  // (Asio's own asynchronous operations work the same in either mode.)
  if (!tls()) socket().non_blocking(true, ec);
}

FrameConnection::Socket& FrameConnection::socket() {
  if (auto* tls = std::get_if<TlsSocket>(&stream_)) return tls->next_layer();
  return std::get<Socket>(stream_);
}

awaitable<std::size_t> FrameConnection::ReadMore(std::size_t need, error_code& ec) {
  const std::size_t old_size = read_buffer_.size();
  std::size_t n = 0;
  if (auto* tls = std::get_if<TlsSocket>(&stream_)) {
    // What TLS has decrypted is not visible before the read: one record's worth at least.
    read_buffer_.resize(old_size + std::max(need, kTlsReadBytes));
    n = co_await tls->async_read_some(asio::buffer(read_buffer_.data() + old_size, read_buffer_.size() - old_size),
                                      asio::redirect_error(use_awaitable, ec));
  } else {
    // Wait for readable without a buffer (a thousand idle connections hold none), then
    // take all the socket has: a batch of small frames is one completion, not one each.
    while (true) {
      co_await socket().async_wait(asio::socket_base::wait_read, asio::redirect_error(use_awaitable, ec));
      if (ec) break;
      const std::size_t available = socket().available(ec);
      if (ec) break;
      // At most a chunk beyond what the frame needs: a backlog stays in the socket, not here.
      read_buffer_.resize(old_size + std::clamp<std::size_t>(available, 1, std::max(need, kReadChunkBytes)));
      n = socket().read_some(asio::buffer(read_buffer_.data() + old_size, read_buffer_.size() - old_size), ec);
      if (ec != asio::error::would_block) break;  // data, the end, or an error; else a spurious wake
      ec = {};
    }
  }
  read_buffer_.resize(old_size + n);
  co_return n;
}

awaitable<std::size_t> FrameConnection::WriteAll(asio::const_buffer buffer, error_code& ec) {
  return std::visit(
      [&](auto& stream) { return asio::async_write(stream, buffer, asio::redirect_error(use_awaitable, ec)); },
      stream_);
}

FrameConnection::~FrameConnection() { Close(); }

void FrameConnection::Close() {
  if (!open_) return;
  open_ = false;
  error_code ec;
  // Under TLS no close_notify is sent: the peer sees a truncated stream, which it
  // treats as a close (the framing, not TLS, marks where messages end).
  socket().shutdown(Socket::shutdown_both, ec);
  socket().close(ec);
  queue_.clear();
  queued_bytes_ = 0;
}

awaitable<Result<nlohmann::json>> FrameConnection::Read(
    std::optional<std::chrono::milliseconds> timeout, std::optional<std::size_t> max_frame_bytes) {
  auto self = shared_from_this();
  if (!open_) co_return Status::Unavailable("read: connection closed");
  const std::size_t limit = std::min(options_.max_frame_bytes, max_frame_bytes.value_or(options_.max_frame_bytes));
  // Created on the first wait: a frame already in the buffer costs no timer.
  std::optional<Deadline> deadline;
  std::optional<std::size_t> frame_bytes;  // header and payload, once the header is read
  while (true) {
    const std::size_t buffered = read_buffer_.size() - read_pos_;
    if (!frame_bytes && buffered >= kFrameHeaderBytes) {
      // The length is checked before anything is allocated for the payload.
      const auto* header = reinterpret_cast<const unsigned char*>(read_buffer_.data() + read_pos_);
      auto length = DecodeFrameHeader(header, limit);
      if (!length.ok()) {
        const bool tls_record = !tls() && LooksLikeTlsRecord(header, kFrameHeaderBytes);
        Close();
        if (tls_record) {
          // Unavailable, not a bad frame: a worker keeps retrying while its flags are fixed.
          co_return Status::Unavailable("the peer speaks TLS and this side does not (a worker with --tls and "
                                        "a coordinator without --tls-cert, or the other way round)");
        }
        co_return length.status();
      }
      frame_bytes = kFrameHeaderBytes + *length;
    }
    if (frame_bytes && buffered >= *frame_bytes) {
      auto message = DecodeFramePayload(
          std::string_view(read_buffer_).substr(read_pos_ + kFrameHeaderBytes, *frame_bytes - kFrameHeaderBytes));
      read_pos_ += *frame_bytes;
      if (read_pos_ == read_buffer_.size()) {
        // Nothing is kept between batches: an idle connection holds no buffer.
        std::string().swap(read_buffer_);
        read_pos_ = 0;
      }
      if (!message.ok()) Close();
      co_return message;
    }
    // Not a whole frame yet: read what the socket has, at least what the frame needs.
    if (read_pos_ > 0) {
      read_buffer_.erase(0, read_pos_);
      read_pos_ = 0;
    }
    if (!deadline) deadline.emplace(self, socket(), timeout);
    error_code ec;
    co_await ReadMore(frame_bytes.value_or(kFrameHeaderBytes) - buffered, ec);
    if (ec) {
      Close();
      if (deadline->fired()) {
        co_return Status::Timeout(frame_bytes ? "frame body not received within the deadline"
                                              : "no frame within the read deadline");
      }
      co_return SocketError(ec, "read");
    }
  }
}

void FrameConnection::WriteNow(std::string& frame) {
  error_code ec;
  const std::size_t n = socket().write_some(asio::buffer(frame), ec);
  // would_block (the socket's buffer is full) and real errors alike leave the rest to
  // the asynchronous writer, which reports errors and closes.
  if (!ec) frame.erase(0, n);
}

Status FrameConnection::Send(const nlohmann::json& message) {
  if (!open_) return Status::Unavailable("send: connection closed");
  auto frame = EncodeFrame(message, options_.max_frame_bytes);
  if (!frame.ok()) return frame.status();
  if (queued_bytes_ + frame->size() > options_.max_queued_bytes) {
    return Status::ResourceExhausted("send queue over " + std::to_string(options_.max_queued_bytes) +
                                     " bytes: the peer is not reading");
  }
  if (!writing_ && queue_.empty() && !tls()) {
    WriteNow(*frame);
    if (frame->empty()) return Status::Ok();
  }
  queued_bytes_ += frame->size();
  queue_.push_back(std::move(frame).value());
  if (!writing_) {
    writing_ = true;
    auto self = shared_from_this();
    asio::co_spawn(socket().get_executor(), [self]() { return self->WriteLoop(); }, asio::detached);
  }
  return Status::Ok();
}

awaitable<void> FrameConnection::WriteLoop() {
  // `self` keeps the connection alive while frames are in flight.
  auto self = shared_from_this();
  while (open_ && !queue_.empty()) {
    // Everything queued leaves in one write.
    std::string frame = std::move(queue_.front());
    queue_.pop_front();
    while (!queue_.empty()) {
      frame += queue_.front();
      queue_.pop_front();
    }
    queued_bytes_ = 0;
    Deadline deadline(self, socket(), options_.write_timeout);
    error_code ec;
    co_await WriteAll(asio::buffer(frame), ec);
    if (ec) {
      Close();
      break;
    }
  }
  writing_ = false;
}

awaitable<Status> FrameConnection::Flush() {
  auto self = shared_from_this();
  asio::steady_timer timer(socket().get_executor());
  // Polling keeps the writer free of waiter bookkeeping; flushes are rare (shutdown).
  while (open_ && writing_) {
    timer.expires_after(std::chrono::milliseconds(5));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  co_return open_ ? Status::Ok() : Status::Unavailable("flush: connection closed");
}

awaitable<Result<asio::ip::tcp::socket>> ConnectTcp(std::string host, int port,
                                                    std::chrono::milliseconds timeout) {
  auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  asio::ip::tcp::socket socket(executor);
  asio::steady_timer timer(executor);
  struct State {
    bool fired = false;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  timer.expires_after(timeout);
  // The locals outlive the handler's use of them: `done` is set before they go away.
  timer.async_wait([&socket, &resolver, state](const error_code& ec) {
    if (ec || state->done) return;
    state->fired = true;
    resolver.cancel();
    error_code ignored;
    socket.close(ignored);
  });
  error_code ec;
  auto endpoints = co_await resolver.async_resolve(host, std::to_string(port),
                                                   asio::redirect_error(use_awaitable, ec));
  if (!ec) {
    co_await asio::async_connect(socket, endpoints, asio::redirect_error(use_awaitable, ec));
  }
  state->done = true;
  timer.cancel();
  const std::string where = host + ":" + std::to_string(port);
  if (state->fired) co_return Status::Timeout("connecting to " + where + " took longer than " +
                                        std::to_string(timeout.count()) + " ms");
  if (ec) co_return Status::Unavailable("cannot connect to " + where + ": " + ec.message());
  co_return std::move(socket);
}

Result<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                  const std::string& what) {
  std::string host;
  std::string port_text;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return Status::InvalidArgument(what + " '" + address + "': expected [IPv6]:PORT");
    }
    host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) {
      return Status::InvalidArgument(what + " '" + address + "': expected HOST:PORT");
    }
    host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  int port = -1;
  try {
    std::size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (host.empty() || port < 0 || port > 65535) {
    return Status::InvalidArgument(what + " '" + address +
                                   "': expected HOST:PORT with a port from 0 to 65535");
  }
  return std::make_pair(host, port);
}

}  // namespace bakeoff::protocol
