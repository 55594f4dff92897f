#include "coordinator/worker_server.h"

#include <cstdio>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace bakeoff::coordinator {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::chrono::seconds kTlsHandshakeTimeout{10};
// A connection registers within this of its TLS handshake (or of its accept).
constexpr std::chrono::seconds kRegisterTimeout{3};

class ConnectionLink : public WorkerLink {
 public:
  explicit ConnectionLink(std::shared_ptr<protocol::FrameConnection> conn) : conn_(std::move(conn)) {}
  Status Send(const nlohmann::json& frame) override { return conn_->Send(frame); }
  void Close() override { conn_->Close(); }
  std::string peer_address() const override {
    const std::string& address = conn_->remote_address();  // "IP:port", IPv6 unbracketed
    return address.substr(0, address.rfind(':'));
  }

 private:
  std::shared_ptr<protocol::FrameConnection> conn_;
};

}  // namespace

WorkerServer::WorkerServer(asio::any_io_executor executor, CoordinatorService& service,
                           std::shared_ptr<protocol::TlsContext> tls)
    : executor_(executor),
      service_(service),
      listener_(executor, {"worker listen address", "cannot listen for workers on", ""},
                {.what = "worker",
                 .max_connections = service.config().max_worker_connections,
                 .max_pending_per_peer = service.config().max_pending_connections_per_peer}),
      tls_(std::move(tls)) {}

void WorkerServer::Start() {
  listener_.Start(
      [this](tcp::socket socket, protocol::ConnectionSlot slot) { return Serve(std::move(socket), std::move(slot)); });
}

asio::awaitable<std::shared_ptr<protocol::FrameConnection>> WorkerServer::Open(tcp::socket socket) {
  protocol::FrameConnectionOptions options;
  options.max_frame_bytes = service_.config().max_frame_bytes;
  if (!tls_) co_return std::make_shared<protocol::FrameConnection>(std::move(socket), options);
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? std::string("?") : remote.address().to_string() + ":" + std::to_string(remote.port());
  auto stream = co_await protocol::TlsServerHandshake(std::move(socket), *tls_, kTlsHandshakeTimeout);
  if (!stream.ok()) {
    peer_log_.Warning(service_.log(), "worker connection: TLS handshake failed", peer, stream.status().message());
    co_return nullptr;
  }
  co_return std::make_shared<protocol::FrameConnection>(std::move(stream).value(), options);
}

asio::awaitable<void> WorkerServer::Serve(tcp::socket socket, protocol::ConnectionSlot slot) {
  auto conn = co_await Open(std::move(socket));
  if (!conn) co_return;
  // Not authenticated yet: a small frame limit, so that announcing a large frame costs
  // the peer a token it does not have, not the coordinator memory.
  // A short deadline too: until it registers, the connection holds a place under the cap
  // (protocol/listener.h shuts the oldest such one down to make room).
  auto first = co_await conn->Read(kRegisterTimeout, protocol::kMaxPreAuthFrameBytes);
  if (!first.ok()) {
    peer_log_.Warning(service_.log(), "worker connection ended before registering", conn->remote_address(),
                      first.status().message());
    co_return;
  }
  auto reg = protocol::Parse<protocol::RegisterMessage>(*first);
  if (!reg.ok()) {
    conn->Send(protocol::ToJson(protocol::RejectedMessage{"the first frame must be 'register': " +
                                                          reg.status().message()}));
    co_await conn->Flush();
    conn->Close();
    co_return;
  }
  auto link = std::make_shared<ConnectionLink>(conn);
  nlohmann::json reply = service_.OnRegister(*reg, link);
  if (reply.value("type", "") != protocol::kTypeRegistered) {
    conn->Send(reply);  // a `registered` reply was sent by OnRegister, ahead of the rest
    co_await conn->Flush();
    conn->Close();
    co_return;
  }
  const std::string worker_id = reply["worker_id"];
  slot.Authenticated();  // a registered worker is never shut down to make room
  while (conn->is_open()) {
    // No read deadline here: liveness is the heartbeat TTL, whose expiry closes us.
    auto frame = co_await conn->Read();
    if (!frame.ok()) break;
    service_.OnFrame(worker_id, link.get(), *frame);
    // Over the events-per-second limit: read this worker later (backpressure, no loss).
    if (auto delay = service_.EventsReadDelay(worker_id, *frame); delay.count() > 0) {
      asio::steady_timer timer(executor_, delay);
      co_await timer.async_wait(asio::use_awaitable);
    }
  }
  service_.OnDisconnect(worker_id, link.get());
}

}  // namespace bakeoff::coordinator
