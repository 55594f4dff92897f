#include "protocol/frame_connection.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "tests/protocol/run_until_done.h"

namespace bakeoff::protocol {
namespace {
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

// A connected loopback socket pair; the listener binds port 0.
struct SocketPair {
  asio::io_context io;
  tcp::socket server{io};
  tcp::socket client{io};
  SocketPair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

// Bounded by 10 s, as every operation of these tests.
template <typename T>
T RunUntilDone(asio::io_context& io, asio::awaitable<T> op) {
  return bakeoff::testing::RunUntilDone(io, std::move(op), std::chrono::milliseconds(10000));
}

TEST(FrameConnectionTest, SendsAndReadsFramesInOrder) {
  SocketPair pair;
  auto a = std::make_shared<FrameConnection>(std::move(pair.client));
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(a->Send({{"type", "x"}, {"i", i}}).ok());
  for (int i = 0; i < 50; ++i) {
    auto frame = RunUntilDone(pair.io, b->Read(5000ms));
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ((*frame)["i"], i);
  }
}

TEST(FrameConnectionTest, ReadsAFrameWrittenInSmallPieces) {
  SocketPair pair;
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  std::string frame = *EncodeFrame({{"type", "split"}, {"payload", std::string(3000, 'z')}});
  for (std::size_t off = 0; off < frame.size(); off += 7) {
    asio::write(pair.client, asio::buffer(frame.data() + off, std::min<std::size_t>(7, frame.size() - off)));
  }
  auto read = RunUntilDone(pair.io, b->Read(5000ms));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["type"], "split");
}

TEST(FrameConnectionTest, OversizedFrameClosesTheConnection) {
  SocketPair pair;
  FrameConnectionOptions options;
  options.max_frame_bytes = 100;
  auto b = std::make_shared<FrameConnection>(std::move(pair.server), options);
  asio::write(pair.client, asio::buffer(std::string("\x00\x00\x10\x00", 4)));
  auto read = RunUntilDone(pair.io, b->Read(5000ms));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kResourceExhausted);
  EXPECT_FALSE(b->is_open());
}

// The pre-authentication read: a lower limit for one read, the connection's own after.
TEST(FrameConnectionTest, AReadsLowerLimitRefusesALargerFrameThatTheConnectionsWouldTake) {
  SocketPair pair;
  auto a = std::make_shared<FrameConnection>(std::move(pair.client));
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  ASSERT_TRUE(a->Send({{"type", "small"}}).ok());
  auto small = RunUntilDone(pair.io, b->Read(5000ms, 64));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  ASSERT_TRUE(a->Send({{"type", "big"}, {"payload", std::string(100, 'z')}}).ok());
  auto big = RunUntilDone(pair.io, b->Read(5000ms, 64));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(big.status().message().find("over the limit of 64 bytes"), std::string::npos) << big.status().message();
  EXPECT_FALSE(b->is_open());
}

TEST(FrameConnectionTest, ReadTimesOutWhenPeerIsSilent) {
  SocketPair pair;
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  auto read = RunUntilDone(pair.io, b->Read(50ms));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kTimeout);
}

TEST(FrameConnectionTest, PeerCloseIsUnavailable) {
  SocketPair pair;
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  pair.client.close();
  auto read = RunUntilDone(pair.io, b->Read(5000ms));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kUnavailable);
}

TEST(FrameConnectionTest, ConnectToClosedPortFails) {
  asio::io_context io;
  int port;
  {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    port = acceptor.local_endpoint().port();
  }
  auto socket = RunUntilDone(io, ConnectTcp("127.0.0.1", port, 2000ms));
  EXPECT_FALSE(socket.ok());
}

TEST(FrameConnectionTest, SplitHostPortValidates) {
  EXPECT_EQ(SplitHostPort("127.0.0.1:80", "x")->second, 80);
  EXPECT_EQ(SplitHostPort("[::1]:9", "x")->first, "::1");
  EXPECT_FALSE(SplitHostPort("nohost", "coordinator").ok());
  EXPECT_FALSE(SplitHostPort("h:99999", "x").ok());
  EXPECT_NE(SplitHostPort("h:abc", "coordinator address").status().message().find("coordinator address"),
            std::string::npos);
}

}  // namespace
}  // namespace bakeoff::protocol
