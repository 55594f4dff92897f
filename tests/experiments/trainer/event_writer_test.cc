// EventWriter's lines stay whole when several ranks share one pipe, as under torchrun,
// where every rank inherits the launcher's stdout.
#include "experiments/trainer/event_writer.h"

#include <ext/stdio_filebuf.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ostream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bakeoff::trainer {
namespace {

// Writes `count` events of about 2 KB (a summary's size) to `fd` through a buffered
// filebuf, the trainer's stdout after sync_with_stdio(false).
void WriteEvents(int fd, int rank, int count) {
  __gnu_cxx::stdio_filebuf<char> buffer(fd, std::ios::out, BUFSIZ);
  std::ostream out(&buffer);
  EventWriter events(out);
  for (int i = 0; i < count; ++i) events.Write("summary", {{"rank", rank}, {"i", i}, {"padding", std::string(2000, 'x')}});
}

TEST(EventWriterTest, EventsFromTwoProcessesOnOnePipeArriveAsWholeLines) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  constexpr int kEvents = 300;
  pid_t children[2];
  for (int rank = 0; rank < 2; ++rank) {
    children[rank] = fork();
    ASSERT_GE(children[rank], 0);
    if (children[rank] == 0) {
      close(fds[0]);
      WriteEvents(fds[1], rank, kEvents);
      _exit(0);
    }
  }
  close(fds[1]);
  std::string text;
  char chunk[65536];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 60000), 0) << "the writers stalled";
    const ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int whole[2] = {0, 0};
  int broken = 0;
  size_t start = 0;
  for (size_t newline; (newline = text.find('\n', start)) != std::string::npos; start = newline + 1) {
    auto line = nlohmann::json::parse(text.substr(start, newline - start), nullptr, false);
    if (line.is_discarded() || !line.contains("rank")) {
      ++broken;
    } else {
      ++whole[line["rank"].get<int>()];
    }
  }
  EXPECT_EQ(broken, 0);
  EXPECT_EQ(whole[0], kEvents);
  EXPECT_EQ(whole[1], kEvents);
}

}  // namespace
}  // namespace bakeoff::trainer
