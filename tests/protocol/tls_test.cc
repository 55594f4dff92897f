// TLS contexts and the worker protocol's framing over TLS on loopback, with
// certificates the test makes (tests/protocol/test_certificates.h).
#include "protocol/tls.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "protocol/frame_connection.h"
#include "tests/protocol/run_until_done.h"
#include "tests/protocol/test_certificates.h"

namespace bakeoff::protocol {
namespace {
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using nlohmann::json;

// One set of certificates for the whole suite (openssl takes a moment per key).
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("bakeoff-tls-test-" + std::to_string(getpid())));
    std::filesystem::remove_all(*dir_);
    auto made = testing::MakeTestCertificates(*dir_);
    certs_ = made.ok() ? new testing::TestCertificates(*made) : nullptr;
    if (!made.ok()) error_ = new std::string(made.status().message());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete certs_;
    delete error_;
  }
  void SetUp() override { ASSERT_NE(certs_, nullptr) << *error_; }

  static std::shared_ptr<TlsContext> Server(const std::string& cert, const std::string& key) {
    auto context = MakeServerTlsContext(cert, key);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    return context.ok() ? *context : nullptr;
  }
  static std::shared_ptr<TlsContext> Client(const std::string& ca) {
    auto context = MakeClientTlsContext(ca);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    return context.ok() ? *context : nullptr;
  }

  static std::filesystem::path* dir_;
  static testing::TestCertificates* certs_;
  static std::string* error_;
};
std::filesystem::path* TlsTest::dir_ = nullptr;
testing::TestCertificates* TlsTest::certs_ = nullptr;
std::string* TlsTest::error_ = nullptr;

// A loopback listener that echoes every frame back, over TLS when given a context
// (each connection handshakes first) or plain otherwise. It records how connections
// ended so that tests can check what the server saw.
class EchoServer {
 public:
  EchoServer(asio::io_context& io, std::shared_ptr<TlsContext> tls,
             std::chrono::milliseconds handshake_timeout = 5s)
      : io_(io),
        acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)),
        tls_(std::move(tls)),
        handshake_timeout_(handshake_timeout) {
    asio::co_spawn(io_, Accept(), asio::detached);
  }
  ~EchoServer() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }
  asio::io_context& io() { return io_; }
  int port() const { return acceptor_.local_endpoint().port(); }
  const std::vector<Status>& failures() const { return failures_; }
  int echoed() const { return echoed_; }

 private:
  asio::awaitable<void> Accept() {
    while (acceptor_.is_open()) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      asio::co_spawn(io_, Serve(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> Serve(tcp::socket socket) {
    std::shared_ptr<FrameConnection> conn;
    if (tls_) {
      auto stream = co_await TlsServerHandshake(std::move(socket), *tls_, handshake_timeout_);
      if (!stream.ok()) {
        failures_.push_back(stream.status());
        co_return;
      }
      conn = std::make_shared<FrameConnection>(std::move(stream).value());
    } else {
      conn = std::make_shared<FrameConnection>(std::move(socket));
    }
    while (true) {
      auto frame = co_await conn->Read(5000ms);
      if (!frame.ok()) {
        if (frame.status().code() != Status::Code::kUnavailable ||
            frame.status().message().find("closed") == std::string::npos) {
          failures_.push_back(frame.status());
        }
        co_return;
      }
      ++echoed_;
      conn->Send(*frame);
    }
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  std::shared_ptr<TlsContext> tls_;
  std::chrono::milliseconds handshake_timeout_;
  std::vector<Status> failures_;
  int echoed_ = 0;
};

// Connects (over TLS when `tls` is set, checking the server against `host`), sends
// `count` frames and reads them back; the last echo, or the first failure.
asio::awaitable<Result<json>> RoundTrip(int port, TlsContext* tls, std::string host, int count,
                                        std::size_t payload_bytes = 16) {
  auto socket = co_await ConnectTcp("127.0.0.1", port, 5000ms);
  if (!socket.ok()) co_return socket.status();
  std::shared_ptr<FrameConnection> conn;
  if (tls) {
    auto stream = co_await TlsClientHandshake(std::move(socket).value(), *tls, host, 5000ms);
    if (!stream.ok()) co_return stream.status();
    conn = std::make_shared<FrameConnection>(std::move(stream).value());
    EXPECT_TRUE(conn->tls());
  } else {
    conn = std::make_shared<FrameConnection>(std::move(socket).value());
  }
  for (int i = 0; i < count; ++i) {
    Status sent = conn->Send({{"type", "echo"}, {"i", i}, {"payload", std::string(payload_bytes, 'p')}});
    if (!sent.ok()) co_return sent;
  }
  Result<json> last = Status::Internal("nothing read");
  for (int i = 0; i < count; ++i) {
    last = co_await conn->Read(5000ms);
    if (!last.ok()) co_return last;
    if ((*last)["i"] != i) co_return Status::Internal("echo out of order: " + last->dump());
  }
  co_return last;
}

// Runs `op` on `io` (with the servers on it) until it finishes or 15 s pass.
template <typename T>
T RunUntilDone(asio::io_context& io, asio::awaitable<T> op) {
  return bakeoff::testing::RunUntilDone(io, std::move(op), std::chrono::milliseconds(15000));
}

// A one-frame RoundTrip that must fail: its Status (Ok, after a test failure, when it
// did not fail).
Status FailedRoundTrip(EchoServer& server, std::shared_ptr<TlsContext> tls, const std::string& host) {
  auto result = RunUntilDone(server.io(), RoundTrip(server.port(), tls.get(), host, 1));
  EXPECT_FALSE(result.ok()) << "the round trip to " << host << " succeeded";
  return result.ok() ? Status::Ok() : result.status();
}

// Lets the server side finish what it was doing (log a failure, close).
void RunFor(asio::io_context& io, std::chrono::milliseconds duration) {
  auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) io.run_one_for(10ms);
}

// Runs the server's side until it has recorded `count` failures, or 15 s pass: a fixed
// 100 ms is too short for a machine under load.
void RunUntilFailures(EchoServer& server, std::size_t count) {
  auto deadline = std::chrono::steady_clock::now() + 15s;
  while (server.failures().size() < count && std::chrono::steady_clock::now() < deadline) {
    server.io().run_one_for(10ms);
  }
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(TlsTest, FramesRoundTripOverTls) {
  asio::io_context io;
  EchoServer server(io, Server(certs_->server_cert, certs_->server_key));
  auto client = Client(certs_->ca_cert);
  auto last = RunUntilDone(io, RoundTrip(server.port(), client.get(), "127.0.0.1", 50));
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ((*last)["i"], 49);
  // Frames larger than one TLS record (16 KiB) are split and reassembled.
  auto big = RunUntilDone(io, RoundTrip(server.port(), client.get(), "localhost", 3, 1u << 20));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ((*big)["payload"].get<std::string>().size(), 1u << 20);
  EXPECT_EQ(server.echoed(), 53);
}

TEST_F(TlsTest, PlainClientIsRefusedAndTheServerKeepsServing) {
  asio::io_context io;
  EchoServer server(io, Server(certs_->server_cert, certs_->server_key));
  Status plain = FailedRoundTrip(server, nullptr, "");
  EXPECT_EQ(plain.code(), Status::Code::kUnavailable) << plain.ToString();
  RunUntilFailures(server, 1);
  ASSERT_EQ(server.failures().size(), 1u);
  EXPECT_TRUE(Contains(server.failures()[0].message(), "TLS handshake failed"))
      << server.failures()[0].ToString();
  EXPECT_EQ(server.echoed(), 0);

  auto client = Client(certs_->ca_cert);
  auto tls = RunUntilDone(io, RoundTrip(server.port(), client.get(), "127.0.0.1", 2));
  EXPECT_TRUE(tls.ok()) << tls.status().ToString();
}

TEST_F(TlsTest, TlsClientAgainstAPlainServerFailsOnBothSides) {
  asio::io_context io;
  EchoServer server(io, nullptr);
  Status result = FailedRoundTrip(server, Client(certs_->ca_cert), "127.0.0.1");
  EXPECT_TRUE(Contains(result.message(), "TLS handshake failed")) << result.ToString();
  RunUntilFailures(server, 1);
  // The plain side names the problem instead of reporting an oversized frame.
  ASSERT_EQ(server.failures().size(), 1u);
  EXPECT_TRUE(Contains(server.failures()[0].message(), "speaks TLS")) << server.failures()[0].ToString();
  EXPECT_EQ(server.echoed(), 0);
}

TEST_F(TlsTest, ClientWithAnotherCaFailsVerification) {
  asio::io_context io;
  EchoServer server(io, Server(certs_->server_cert, certs_->server_key));
  Status result = FailedRoundTrip(server, Client(certs_->other_ca_cert), "127.0.0.1");
  EXPECT_TRUE(Contains(result.message(), "certificate verify failed")) << result.ToString();
  EXPECT_TRUE(Contains(result.message(), "local issuer")) << result.ToString();
  RunFor(io, 100ms);
  EXPECT_EQ(server.echoed(), 0);
}

TEST_F(TlsTest, CertificateForAnotherHostIsRefused) {
  asio::io_context io;
  EchoServer server(io, Server(certs_->elsewhere_cert, certs_->elsewhere_key));
  auto client = Client(certs_->ca_cert);
  Status by_ip = FailedRoundTrip(server, client, "127.0.0.1");
  EXPECT_TRUE(Contains(by_ip.message(), "IP address mismatch")) << by_ip.ToString();
  Status by_name = FailedRoundTrip(server, client, "localhost");
  EXPECT_TRUE(Contains(by_name.message(), "hostname mismatch")) << by_name.ToString();
  EXPECT_EQ(server.echoed(), 0);
}

TEST_F(TlsTest, SilentClientTimesOutTheServerHandshake) {
  asio::io_context io;
  EchoServer server(io, Server(certs_->server_cert, certs_->server_key), 200ms);
  tcp::socket silent(io);
  silent.connect(tcp::endpoint(asio::ip::address_v4::loopback(), server.port()));
  RunUntilFailures(server, 1);  // the 200 ms handshake timeout, not the 15 s of the wait
  ASSERT_EQ(server.failures().size(), 1u);
  EXPECT_EQ(server.failures()[0].code(), Status::Code::kTimeout) << server.failures()[0].ToString();
  // The server closed its end: the silent client reads end of file.
  char byte = 0;
  boost::system::error_code ec;
  silent.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(TlsTest, BadFilesAreNamedInTheError) {
  const std::string missing = (*dir_ / "missing.pem").string();
  auto no_cert = MakeServerTlsContext(missing, certs_->server_key);
  ASSERT_FALSE(no_cert.ok());
  EXPECT_EQ(no_cert.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(no_cert.status().message(), missing)) << no_cert.status().ToString();

  const std::string not_pem = (*dir_ / "not.pem").string();
  std::ofstream(not_pem) << "hello\n";
  auto bad_cert = MakeServerTlsContext(not_pem, certs_->server_key);
  ASSERT_FALSE(bad_cert.ok());
  EXPECT_TRUE(Contains(bad_cert.status().message(), not_pem)) << bad_cert.status().ToString();
  auto bad_key = MakeServerTlsContext(certs_->server_cert, not_pem);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_TRUE(Contains(bad_key.status().message(), not_pem)) << bad_key.status().ToString();
  auto mismatch = MakeServerTlsContext(certs_->server_cert, certs_->elsewhere_key);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_TRUE(Contains(mismatch.status().message(), "does not belong")) << mismatch.status().ToString();

  auto no_ca = MakeClientTlsContext(missing);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_TRUE(Contains(no_ca.status().message(), missing)) << no_ca.status().ToString();
  auto bad_ca = MakeClientTlsContext(not_pem);
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_TRUE(Contains(bad_ca.status().message(), not_pem)) << bad_ca.status().ToString();
}

}  // namespace
}  // namespace bakeoff::protocol
