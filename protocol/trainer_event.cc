#include "protocol/trainer_event.h"

#include <cmath>
#include <initializer_list>

#include "protocol/json_limits.h"

namespace bakeoff::protocol {
namespace {

using nlohmann::json;

Status Bad(const std::string& kind, const std::string& field, const std::string& expected) {
  return Status::InvalidArgument("trainer event '" + kind + "': field \"" + field + "\" must be " + expected);
}

bool IsNonNegativeInteger(const json& v) {
  return (v.is_number_unsigned()) || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

Status CheckStep(const json& e) {
  if (!e.contains("step") || !IsNonNegativeInteger(e["step"])) return Bad("step", "step", "an integer >= 0");
  if (!e.contains("step_s") || !e["step_s"].is_number() || !std::isfinite(e["step_s"].get<double>()) ||
      e["step_s"].get<double>() < 0) {
    return Bad("step", "step_s", "a finite number of seconds >= 0");
  }
  for (const char* f : {"tokens", "peak_mem_bytes", "rss_bytes", "comm_bytes"}) {
    if (e.contains(f) && !e[f].is_null() && !IsNonNegativeInteger(e[f])) return Bad("step", f, "an integer >= 0");
  }
  for (const char* f : {"loss", "lr", "grad_norm", "comm_s"}) {
    if (e.contains(f) && !e[f].is_null() && !e[f].is_number()) return Bad("step", f, "a number");
  }
  if (e.contains("phase") && !e["phase"].is_string()) return Bad("step", "phase", "a string");
  return Status::Ok();
}

Status CheckSummary(const json& e) {
  for (const char* f : {"startup_s", "first_step_s", "warmup_s", "step_s_median", "step_s_p10", "step_s_p90",
                        "tokens_per_s", "flops_per_s", "mfu", "peak_mem_bytes", "peak_reserved_bytes",
                        "peak_rss_bytes", "frozen_bytes", "trainable_bytes", "grad_bytes", "optimizer_bytes",
                        "comm_s_per_step", "comm_bytes_per_step", "tokens_per_step"}) {
    if (e.contains(f) && !e[f].is_null() && !e[f].is_number()) return Bad("summary", f, "a number");
  }
  if (e.contains("applied") && !e["applied"].is_object()) return Bad("summary", "applied", "an object");
  return Status::Ok();
}

Status CheckError(const json& e) {
  if (!e.contains("kind") || !e["kind"].is_string()) return Bad("error", "kind", "a string");
  if (e.contains("message") && !e["message"].is_string()) return Bad("error", "message", "a string");
  return Status::Ok();
}

}  // namespace

Result<TrainerEvent> ParseTrainerEvent(std::string_view line, std::size_t max_line_bytes) {
  if (line.size() > max_line_bytes) {
    return Status::InvalidArgument("trainer line of " + std::to_string(line.size()) + " bytes is over the limit of " +
                                   std::to_string(max_line_bytes));
  }
  if (Status deep = CheckJsonDepth(line, kMaxTrainerLineDepth); !deep.ok()) return deep.WithContext("trainer line");
  json parsed = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Status::InvalidArgument("trainer line is not a JSON object");
  }
  auto kind = parsed.find("event");
  if (kind == parsed.end() || !kind->is_string()) {
    return Status::InvalidArgument("trainer line has no string \"event\" field");
  }
  TrainerEvent event{kind->get<std::string>(), std::move(parsed)};
  Status checked = Status::Ok();
  if (event.kind == "step") {
    checked = CheckStep(event.body);
  } else if (event.kind == "summary") {
    checked = CheckSummary(event.body);
  } else if (event.kind == "error") {
    checked = CheckError(event.body);
  }
  if (!checked.ok()) return checked;
  return event;
}

}  // namespace bakeoff::protocol
