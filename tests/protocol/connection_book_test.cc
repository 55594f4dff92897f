// ConnectionBook's eviction order (protocol/listener.h): the oldest silent
// unauthenticated connection goes first; one with bytes waiting or a request being
// served goes only when no silent one is left; an authenticated one never goes.
// Real sockets (socketpairs): "shut down" is seen by the peer as end of file.
#include "protocol/listener.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace bakeoff::protocol {
namespace {

// One connection: `ours` is the book's side, `theirs` the peer's.
struct Pair {
  int ours = -1;
  int theirs = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours = fds[0];
    theirs = fds[1];
  }
  ~Pair() {
    ::close(ours);
    ::close(theirs);
  }
  // The book shut our side down: the peer reads end of file.
  bool ShutDown() const {
    char c;
    return ::recv(theirs, &c, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(ConnectionBookTest, TheOldestSilentConnectionGoesBeforeOneWhoseRequestIsWaiting) {
  auto book = std::make_shared<ConnectionBook>();
  Pair speaking, silent;
  ConnectionSlot first(book, speaking.ours, "10.0.0.1");
  ConnectionSlot second(book, silent.ours, "10.0.0.1");
  ASSERT_EQ(::send(speaking.theirs, "GET /", 5, 0), 5);  // its request is in our buffer
  ASSERT_TRUE(book->EvictOldest());
  EXPECT_FALSE(speaking.ShutDown()) << "the older connection had a request waiting";
  EXPECT_TRUE(silent.ShutDown());
  // Only the speaking one is left: it goes now rather than nothing.
  ASSERT_TRUE(book->EvictOldest());
  EXPECT_TRUE(speaking.ShutDown());
  EXPECT_FALSE(book->EvictOldest());
}

TEST(ConnectionBookTest, AConnectionBeingServedGoesOnlyAfterTheSilentOnesAndIsSilentAgainAfterItsAnswer) {
  auto book = std::make_shared<ConnectionBook>();
  Pair served, silent1, silent2;
  ConnectionSlot a(book, served.ours, "10.0.0.1");
  ConnectionSlot b(book, silent1.ours, "10.0.0.1");
  ConnectionSlot c(book, silent2.ours, "10.0.0.1");
  a.Serving(true);  // its header was read: nothing waits in the buffer any more
  ASSERT_TRUE(book->EvictOldest());
  EXPECT_TRUE(silent1.ShutDown());
  EXPECT_FALSE(served.ShutDown());
  a.Serving(false);  // answered; waiting for a next request that may never come
  ASSERT_TRUE(book->EvictOldest());
  EXPECT_TRUE(served.ShutDown()) << "idle again, it is the oldest silent connection";
  EXPECT_FALSE(silent2.ShutDown());
}

TEST(ConnectionBookTest, PerPeerEvictionTouchesOnlyThatPeerAndAuthenticatedConnectionsNeverGo) {
  auto book = std::make_shared<ConnectionBook>();
  Pair other, mine, authenticated;
  ConnectionSlot x(book, other.ours, "10.0.0.2");
  ConnectionSlot y(book, authenticated.ours, "10.0.0.1");
  ConnectionSlot z(book, mine.ours, "10.0.0.1");
  y.Authenticated();
  EXPECT_EQ(book->PendingFrom("10.0.0.1"), 1u);
  ASSERT_TRUE(book->EvictOldest("10.0.0.1"));
  EXPECT_TRUE(mine.ShutDown());
  EXPECT_FALSE(other.ShutDown()) << "another address's connection";
  EXPECT_FALSE(authenticated.ShutDown());
  EXPECT_FALSE(book->EvictOldest("10.0.0.1")) << "only an authenticated one is left there";
  EXPECT_EQ(book->open(), 2u) << "the evicted one is on its way out";
}

}  // namespace
}  // namespace bakeoff::protocol
