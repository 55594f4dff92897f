// The JSON shapes of the HTTP API's read routes (docs/cli.md), built from results-store
// records, so that `bakeoff status --db FILE` prints exactly what
// `GET /api/v1/sweeps/...` returns. Pure functions. Thread-safety: reentrant.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/store/store_records.h"
#include "protocol/status.h"

namespace bakeoff::coordinator {

// The one mapping from a failed Status to the API's HTTP status (docs/cli.md, "HTTP
// API"): InvalidArgument 400, NotFound 404, ResourceExhausted 413, Unavailable and
// IoError 503, Timeout 504, anything else 500.
int HttpStatusFor(const Status& status);

// An API call's failure, with the HTTP status it maps to.
struct ApiError {
  int http_status = 500;
  std::string message;
};
// A failed Status as the API reports it (HttpStatusFor).
ApiError ApiErrorFrom(const Status& status);

// {"id","name","question","state","created_at","finished_at","variant_count",
//  "trial_count","counts":{queued,assigned,running,finished,succeeded,unsuccessful,cancelled}}
nlohmann::json SweepJson(const metrics::SweepRecord& sweep);

// {"id","variant_key","repeat","order_index","state","outcome","reason","attempts_used",
//  "max_attempts","worker_id","host","simulated","ranks":[...],"summary":{rank 0's}}
nlohmann::json TrialJson(const metrics::TrialResult& trial);
nlohmann::json TrialsJson(const std::vector<metrics::TrialResult>& trials);

// GET .../live: {"trials": [{"trial_id","attempt","measured_steps","tokens_per_s",
// "peak_mem_bytes"}]} for the trials with stored steps; tokens_per_s is null before the
// first measured step, peak_mem_bytes when no rank reported one.
nlohmann::json LiveJson(const std::vector<metrics::LiveTrialFigures>& live);

}  // namespace bakeoff::coordinator
