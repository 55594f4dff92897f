// KillStrayChildren on real processes (security review 2026-12-07, A7): what a rank
// leaves behind dies with its whole tree, however it forks. This test process is made a
// child subreaper, as the worker is, so that orphans become its children.
#include "worker/rank_process.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace bakeoff::worker {
namespace {
using namespace std::chrono_literals;

// Processes of session `sid` still alive (zombies do not count).
int AliveInSession(pid_t sid) {
  int alive = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid <= 0) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    char state = stat[close + 2];
    long ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(stat.c_str() + close + 4, "%ld %ld %ld", &ppid, &pgrp, &session) != 3) continue;
    if (session == sid && state != 'Z' && state != 'X') ++alive;
  }
  return alive;
}

// Waits until `done` or the deadline, reaping meanwhile what was killed.
template <typename F>
bool WaitReaping(F done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

class RankProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
  void TearDown() override {
    if (sid_ > 0) {
      KillStrayChildren();  // whatever the test left
      WaitReaping([&] { return AliveInSession(sid_) == 0; }, 5s);
    }
  }
  // Forks a stray in a session of its own running `body`; returns its session.
  template <typename Body>
  pid_t Stray(Body body) {
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      body();
      _exit(0);
    }
    sid_ = child;
    return child;
  }
  pid_t sid_ = -1;
};

// The review's pid hopping: each process sleeps 50 ms, forks its successor and exits
// 50 ms later, so a grandchild always exists when its parent is killed. Killing only
// direct children let the chain outlive its attempt (230 kills, then its own 25 s
// limit); the tree is stopped and killed whole in one sweep.
TEST_F(RankProcessTest, AChainThatKeepsForkingASuccessorEndsInOneSweep) {
  const pid_t sid = Stray([] {
    for (int i = 0; i < 400; ++i) {  // at most 40 s, should the test fail
      std::this_thread::sleep_for(50ms);
      const pid_t next = fork();
      if (next != 0) {
        std::this_thread::sleep_for(50ms);
        _exit(0);
      }
    }
  });
  ASSERT_TRUE(WaitReaping([&] { return AliveInSession(sid) >= 2; }, 5s)) << "the chain did not start";
  std::this_thread::sleep_for(300ms);  // several links have hopped
  KillStrayChildren();
  // 5 s is for a loaded machine; an unswept chain lives on for 40 s.
  EXPECT_TRUE(WaitReaping([&] { return AliveInSession(sid) == 0; }, 5s))
      << AliveInSession(sid) << " process(es) of the chain outlived one sweep";
}

// From the other direction: a deep tree of quiet processes (each spawning one more
// below it and sleeping) and a wide one (ten children), all ended by one sweep.
TEST_F(RankProcessTest, ADeepAndWideTreeEndsInOneSweep) {
  const pid_t sid = Stray([] {
    for (int i = 0; i < 10; ++i) {
      if (fork() == 0) {
        for (int depth = 0; depth < 5; ++depth) {
          if (fork() != 0) break;
        }
        std::this_thread::sleep_for(60s);
        _exit(0);
      }
    }
    std::this_thread::sleep_for(60s);
  });
  ASSERT_TRUE(WaitReaping([&] { return AliveInSession(sid) >= 61; }, 5s)) << AliveInSession(sid);
  const auto killed = KillStrayChildren();
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_EQ(killed[0].descendants, 60u);
  EXPECT_TRUE(WaitReaping([&] { return AliveInSession(sid) == 0; }, 5s)) << AliveInSession(sid);
}

}  // namespace
}  // namespace bakeoff::worker
