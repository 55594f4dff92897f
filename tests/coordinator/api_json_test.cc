// The API's one Status -> HTTP status mapping, used by the service and the server alike.
#include "coordinator/api_json.h"

#include <gtest/gtest.h>

namespace bakeoff::coordinator {
namespace {

TEST(ApiJsonTest, EachStatusHasOneHttpStatus) {
  EXPECT_EQ(HttpStatusFor(Status::InvalidArgument("bad sweep")), 400);
  EXPECT_EQ(HttpStatusFor(Status::NotFound("no sweep")), 404);
  EXPECT_EQ(HttpStatusFor(Status::ResourceExhausted("too many trials")), 413);
  EXPECT_EQ(HttpStatusFor(Status::Unavailable("store not writable")), 503);
  EXPECT_EQ(HttpStatusFor(Status::IoError("disk")), 503);
  EXPECT_EQ(HttpStatusFor(Status::Timeout("query ran too long")), 504);
  EXPECT_EQ(HttpStatusFor(Status::Internal("bug")), 500);
}

}  // namespace
}  // namespace bakeoff::coordinator
