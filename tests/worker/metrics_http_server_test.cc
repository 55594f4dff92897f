// The worker's /metrics endpoint over real loopback sockets: a free port, the
// exposition and content type Prometheus expects, keep-alive scrapes, 404/405, a busy
// address as an error, and a prompt stop.
#include "worker/metrics_http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

namespace bakeoff::worker {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_shared<MetricsHttpServer>(io_.get_executor(), [this]() {
      ++renders_;
      return std::string("# HELP bakeoff_test_value a test\n# TYPE bakeoff_test_value gauge\nbakeoff_test_value 42\n");
    });
    ASSERT_TRUE(server_->Listen("127.0.0.1:0").ok());
    server_->Start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_->Stop(); });
    work_.reset();
    io_.stop();
    thread_.join();
  }
  // One request over a fresh connection; returns the whole response.
  std::string Request(const std::string& request) {
    asio::ip::tcp::iostream http("127.0.0.1", std::to_string(server_->port()));
    http.expires_after(10s);
    http << request << std::flush;
    return std::string((std::istreambuf_iterator<char>(http)), std::istreambuf_iterator<char>());
  }

  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{io_.get_executor()};
  std::shared_ptr<MetricsHttpServer> server_;
  std::thread thread_;
  std::atomic<int> renders_{0};
};

TEST_F(MetricsHttpServerTest, ServesTheExpositionOnAFreePort) {
  ASSERT_GT(server_->port(), 0);
  const std::string response = Request("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << response;
  EXPECT_NE(response.find("\r\n\r\n# HELP bakeoff_test_value"), std::string::npos);
  EXPECT_NE(response.find("bakeoff_test_value 42\n"), std::string::npos);
}

TEST_F(MetricsHttpServerTest, KeepAliveServesSeveralScrapesOnOneConnection) {
  const std::string scrape = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string response = Request(scrape + scrape + "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::size_t count = 0;
  for (std::size_t pos = 0; (pos = response.find("HTTP/1.1 200", pos)) != std::string::npos; ++pos) ++count;
  EXPECT_EQ(count, 3u) << response;
  EXPECT_EQ(renders_.load(), 3);
}

TEST_F(MetricsHttpServerTest, OtherPathsAndMethodsAreRefused) {
  EXPECT_EQ(Request("GET /api/v1/sweeps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").rfind("HTTP/1.1 404", 0),
            0u);
  const std::string post = Request("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  EXPECT_EQ(renders_.load(), 0) << "nothing rendered for a refused request";
}

TEST_F(MetricsHttpServerTest, BusyAddressIsAnErrorNamingTheFlag) {
  auto other = std::make_shared<MetricsHttpServer>(io_.get_executor(), [] { return std::string(); });
  Status s = other->Listen("127.0.0.1:" + std::to_string(server_->port()));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("--metrics-listen"), std::string::npos) << s.message();
  EXPECT_EQ(other->Listen("not-an-address:0").code(), Status::Code::kInvalidArgument);
}

TEST_F(MetricsHttpServerTest, StopClosesTheListener) {
  std::promise<void> stopped;
  asio::post(io_, [&] {
    server_->Stop();
    stopped.set_value();
  });
  stopped.get_future().wait();
  asio::io_context client;
  asio::ip::tcp::socket socket(client);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_->port())}, ec);
  EXPECT_TRUE(ec) << "still accepting after Stop";
}

}  // namespace
}  // namespace bakeoff::worker
