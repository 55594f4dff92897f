#include "coordinator/api_json.h"

namespace bakeoff::coordinator {

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kResourceExhausted: return 413;
    case Status::Code::kUnavailable:
    case Status::Code::kIoError: return 503;
    case Status::Code::kTimeout: return 504;
    default: return 500;
  }
}

ApiError ApiErrorFrom(const Status& status) { return ApiError{HttpStatusFor(status), status.message()}; }

using nlohmann::json;

json SweepJson(const metrics::SweepRecord& s) {
  json j = {{"id", s.id},
            {"name", s.name},
            {"question", s.question},
            {"state", metrics::SweepStateName(s.state)},
            {"created_at", s.created_at},
            {"finished_at", s.finished_at ? json(*s.finished_at) : json(nullptr)},
            {"variant_count", s.variant_count},
            {"trial_count", s.trial_count},
            {"counts",
             {{"queued", s.counts.queued},
              {"assigned", s.counts.assigned},
              {"running", s.counts.running},
              {"finished", s.counts.finished},
              {"succeeded", s.counts.succeeded},
              {"unsuccessful", s.counts.unsuccessful},
              {"cancelled", s.counts.cancelled}}}};
  return j;
}

json TrialJson(const metrics::TrialResult& r) {
  const auto& t = r.trial;
  json j = {{"id", t.id},
            {"sweep_id", t.sweep_id},
            {"variant_key", t.variant_key},
            {"repeat", t.repeat},
            {"order_index", t.order_index},
            {"state", metrics::TrialStateName(t.state)},
            {"outcome", t.outcome ? json(metrics::OutcomeName(*t.outcome)) : json(nullptr)},
            {"reason", t.reason},
            {"attempts_used", t.attempts_used},
            {"max_attempts", t.max_attempts},
            {"worker_id", nullptr},
            {"host", nullptr},
            {"simulated", false},
            {"summary", nullptr},
            {"tokens_per_s", nullptr}};
  if (r.attempt) {
    j["worker_id"] = r.attempt->worker_id;
    j["host"] = r.attempt->host;
    j["simulated"] = r.attempt->simulated;
    json ranks = json::array();
    for (const auto& p : r.attempt->ranks) {
      ranks.push_back({{"rank", p.rank}, {"worker_id", p.worker_id}, {"host", p.host}, {"device", p.device}});
    }
    j["ranks"] = ranks;
    j["started_at"] = r.attempt->started_at ? json(*r.attempt->started_at) : json(nullptr);
    j["ended_at"] = r.attempt->ended_at ? json(*r.attempt->ended_at) : json(nullptr);
  }
  // Rank 0's summary, else the first rank's that has one: its body as written, and its
  // tokens/s as the store typed it (a client reads the figure, not the body).
  const metrics::SummaryRecord* shown = r.summaries.empty() ? nullptr : &r.summaries.front();
  for (const auto& s : r.summaries) {
    if (s.rank == 0) shown = &s;
  }
  if (shown != nullptr) {
    j["summary"] = shown->body;
    if (shown->figures.tokens_per_s) j["tokens_per_s"] = *shown->figures.tokens_per_s;
  }
  return j;
}

json TrialsJson(const std::vector<metrics::TrialResult>& trials) {
  json out = json::array();
  for (const auto& t : trials) out.push_back(TrialJson(t));
  return out;
}

json LiveJson(const std::vector<metrics::LiveTrialFigures>& live) {
  json trials = json::array();
  for (const auto& f : live) {
    trials.push_back({{"trial_id", f.trial_id},
                      {"attempt", f.attempt},
                      {"measured_steps", f.measured_steps},
                      {"tokens_per_s", f.step_s > 0 ? json(static_cast<double>(f.tokens) / f.step_s) : json(nullptr)},
                      {"peak_mem_bytes", f.peak_mem_bytes ? json(*f.peak_mem_bytes) : json(nullptr)}});
  }
  return {{"trials", std::move(trials)}};
}

}  // namespace bakeoff::coordinator
