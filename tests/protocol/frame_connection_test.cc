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

// `b` reads frames {"i": 0} to {"i": count - 1}, in that order.
void ExpectNumberedFrames(SocketPair& pair, FrameConnection& b, int count) {
  for (int i = 0; i < count; ++i) {
    auto frame = RunUntilDone(pair.io, b.Read(5000ms));
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ((*frame)["i"], i);
  }
}

TEST(FrameConnectionTest, SendsAndReadsFramesInOrder) {
  SocketPair pair;
  auto a = std::make_shared<FrameConnection>(std::move(pair.client));
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(a->Send({{"type", "x"}, {"i", i}}).ok());
  ExpectNumberedFrames(pair, *b, 50);
}

// Send writes at once on an idle plain connection: the frame is on the wire before the
// event loop runs a single handler (it used to wait for the writer's turn of the loop).
TEST(FrameConnectionTest, ASendOnAnIdleConnectionIsWrittenBeforeTheEventLoopRuns) {
  SocketPair pair;
  auto a = std::make_shared<FrameConnection>(std::move(pair.client));
  ASSERT_TRUE(a->Send({{"type", "now"}}).ok());
  pair.server.non_blocking(true);
  std::string expected = *EncodeFrame({{"type", "now"}});
  std::string got(expected.size(), '\0');
  boost::system::error_code ec;
  const std::size_t n = pair.server.read_some(asio::buffer(got), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(got.substr(0, n), expected);
}

// A frame larger than the socket takes at once is written partly at once and the rest
// by the asynchronous writer; frames sent after it keep their order.
TEST(FrameConnectionTest, AFrameTheSocketTakesOnlyInPartKeepsItsOrder) {
  SocketPair pair;
  auto a = std::make_shared<FrameConnection>(std::move(pair.client));
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  ASSERT_TRUE(a->Send({{"type", "big"}, {"payload", std::string(3 << 20, 'z')}}).ok());
  ASSERT_TRUE(a->Send({{"type", "after"}}).ok());
  auto big = RunUntilDone(pair.io, b->Read(5000ms));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ((*big)["payload"].get<std::string>().size(), 3u << 20);
  auto after = RunUntilDone(pair.io, b->Read(5000ms));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)["type"], "after");
}

// Frames read ahead into the buffer: pieces that cut through headers and payloads of
// consecutive frames.
TEST(FrameConnectionTest, ReadsConsecutiveFramesCutAcrossTheirHeaders) {
  SocketPair pair;
  auto b = std::make_shared<FrameConnection>(std::move(pair.server));
  std::string bytes;
  for (int i = 0; i < 20; ++i) bytes += *EncodeFrame({{"type", "x"}, {"i", i}});
  for (std::size_t off = 0; off < bytes.size(); off += 3) {
    asio::write(pair.client, asio::buffer(bytes.data() + off, std::min<std::size_t>(3, bytes.size() - off)));
  }
  ExpectNumberedFrames(pair, *b, 20);
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
