#include "protocol/error_cause.h"

#include <gtest/gtest.h>

namespace bakeoff::protocol {
namespace {

TEST(ErrorCauseTest, LibTorchBacktraceIsCutToTheFirstLine) {
  const std::string message =
      "unavailable: gloo process group at 10.231.193.2:29500 (rank 1) failed: Cannot resolve 10.231.193.2 to a "
      "(local) address\n"
      "Exception raised from createDeviceForHostname at ./torch/csrc/distributed/c10d/ProcessGroupGloo.cpp:667 "
      "(most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9e (0x7fac8de619ae in libc10.so)\n"
      "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int) + 0xfc\n";
  EXPECT_EQ(ErrorCause(message),
            "unavailable: gloo process group at 10.231.193.2:29500 (rank 1) failed: Cannot resolve 10.231.193.2 to a "
            "(local) address");
}

TEST(ErrorCauseTest, BacktraceOnTheSameLineIsCutOff) {
  EXPECT_EQ(ErrorCause("Socket Timeout Exception raised from recvBytes at Utils.hpp:594 frame #0: x"),
            "Socket Timeout");
}

TEST(ErrorCauseTest, PythonTracebackGivesItsLastLine) {
  EXPECT_EQ(ErrorCause("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                       "    main()\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n\n"),
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB");
}

TEST(ErrorCauseTest, LeadingBlankLinesAndSpacesAreSkipped) {
  EXPECT_EQ(ErrorCause("\n\n   out of memory  \r\nmore"), "out of memory");
  EXPECT_EQ(ErrorCause("one line"), "one line");
  EXPECT_EQ(ErrorCause(""), "");
  EXPECT_EQ(ErrorCause(" \n\t\n"), "");
}

TEST(ErrorCauseTest, LongCauseIsTruncatedOnACharacterBoundary) {
  std::string long_line;
  for (int i = 0; i < 400; ++i) long_line += "é";  // two bytes each
  const std::string cause = ErrorCause(long_line);
  EXPECT_LE(cause.size(), kMaxErrorCauseBytes);
  EXPECT_EQ(cause.substr(cause.size() - 3), "...");
  EXPECT_EQ((cause.size() - 3) % 2, 0u) << "a character was split";
}

}  // namespace
}  // namespace bakeoff::protocol
