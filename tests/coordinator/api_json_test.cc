// The API's one Status -> HTTP status mapping, used by the service and the server alike,
// and a trial's JSON.
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

TEST(ApiJsonTest, ATrialShowsRankZerosSummaryAndItsTypedTokensPerSecond) {
  metrics::TrialResult r;
  r.trial.id = 4;
  nlohmann::json j = TrialJson(r);
  EXPECT_TRUE(j["summary"].is_null());
  EXPECT_TRUE(j["tokens_per_s"].is_null()) << "no summary, no figure";

  metrics::SummaryRecord rank1{4, 1, 1, {}, {{"type", "summary"}, {"tokens_per_s", 90.0}}};
  rank1.figures.tokens_per_s = 90.0;
  r.summaries.push_back(rank1);
  EXPECT_EQ(TrialJson(r)["tokens_per_s"], 90.0) << "without rank 0's, the first rank's";
  metrics::SummaryRecord rank0{4, 1, 0, {}, {{"type", "summary"}, {"tokens_per_s", 100.0}, {"custom", 1}}};
  rank0.figures.tokens_per_s = 100.0;
  r.summaries.push_back(rank0);
  j = TrialJson(r);
  EXPECT_EQ(j["tokens_per_s"], 100.0);
  EXPECT_EQ(j["summary"]["custom"], 1) << "the body as written";
}

}  // namespace
}  // namespace bakeoff::coordinator
