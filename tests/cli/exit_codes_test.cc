// One Status -> exit code mapping for every subcommand, as docs/cli.md's table says.
#include "cli/exit_codes.h"

#include <gtest/gtest.h>

namespace bakeoff::cli {
namespace {

TEST(ExitCodesTest, EachStatusMapsToTheCodeDocsCliMdGives) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), kExitOk);
  EXPECT_EQ(ExitCodeFor(Status::InvalidArgument("bad sweep")), kExitUsage);
  EXPECT_EQ(ExitCodeFor(Status::Unavailable("connection refused")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(Status::Timeout("no answer")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(Status::IoError("read failed")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(Status::NotFound("no sweep 99")), kExitFailure);
  EXPECT_EQ(ExitCodeFor(Status::Internal("bug")), kExitFailure);
  EXPECT_EQ(ExitCodeFor(Status::ResourceExhausted("too big")), kExitFailure);
  EXPECT_EQ(kExitUsage, 2);
  EXPECT_EQ(kExitUnavailable, 3);
  EXPECT_EQ(kExitIncomplete, 4);
}

}  // namespace
}  // namespace bakeoff::cli
