#include "protocol/trainer_event.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "protocol/json_limits.h"

namespace bakeoff::protocol {
namespace {

using nlohmann::json;

// Reads the fields of one event's object, checking each once; the first mistyped field
// is kept as the error (later reads then return nullopt).
class FieldReader {
 public:
  FieldReader(const json& object, const char* kind) : object_(object), kind_(kind) {}

  const Status& status() const { return status_; }

  // A field that is absent or null.
  bool Missing(const char* field) const {
    auto it = object_.find(field);
    return it == object_.end() || it->is_null();
  }

  // An integer >= 0 that fits int64 (required: present and not null).
  std::optional<std::int64_t> Count(const char* field, bool required = false) {
    const json* v = Find(field, required, "an integer >= 0");
    if (v == nullptr) return std::nullopt;
    if (v->is_number_unsigned()) {
      if (v->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(v->get<std::uint64_t>());
      }
    } else if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
      return v->get<std::int64_t>();
    }
    Fail(field, "an integer >= 0");
    return std::nullopt;
  }

  // Any integer.
  std::optional<std::int64_t> Integer(const char* field) {
    const json* v = Find(field, false, "an integer");
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<std::int64_t>();
    if (v->is_number_unsigned() &&
        v->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(v->get<std::uint64_t>());
    }
    Fail(field, "an integer");
    return std::nullopt;
  }

  // A number; a non-finite one reads as nullopt.
  std::optional<double> Number(const char* field) {
    const json* v = Find(field, false, "a number");
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(field, "a number");
      return std::nullopt;
    }
    const double value = v->get<double>();
    if (!std::isfinite(value)) return std::nullopt;
    return value;
  }

  // A number read as a whole count: an integer as it is, a fractional one rounded;
  // nullopt when it does not fit int64.
  std::optional<std::int64_t> RoundedNumber(const char* field) {
    const json* v = Find(field, false, "a number");
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(field, "a number");
      return std::nullopt;
    }
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
      return static_cast<std::int64_t>(u);
    }
    if (v->is_number_integer()) return v->get<std::int64_t>();
    const double value = v->get<double>();
    if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) return std::nullopt;
    return static_cast<std::int64_t>(std::llround(value));
  }

  // A string; `fallback` when absent. Null is mistyped (a string field is never null).
  std::string String(const char* field, bool required = false, std::string fallback = std::string()) {
    auto it = object_.find(field);
    if (it == object_.end()) {
      if (required) Fail(field, "a string");
      return fallback;
    }
    if (!it->is_string()) {
      Fail(field, "a string");
      return fallback;
    }
    return it->get<std::string>();
  }

  // An object when present (null is mistyped).
  std::optional<json> Object(const char* field) {
    auto it = object_.find(field);
    if (it == object_.end()) return std::nullopt;
    if (!it->is_object()) {
      Fail(field, "an object");
      return std::nullopt;
    }
    return *it;
  }

  void Fail(const char* field, const std::string& expected) {
    if (!status_.ok()) return;
    status_ = Status::InvalidArgument(std::string("trainer event '") + kind_ + "': field \"" + field +
                                      "\" must be " + expected);
  }

 private:
  // The field's value, or nullptr when absent or null (then a required one fails).
  const json* Find(const char* field, bool required, const char* expected) {
    if (!status_.ok()) return nullptr;
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null()) {
      if (required) Fail(field, expected);
      return nullptr;
    }
    return &*it;
  }

  const json& object_;
  const char* kind_;
  Status status_ = Status::Ok();
};

Result<StepEvent> ReadStep(const json& e) {
  FieldReader r(e, "step");
  StepEvent s;
  s.step = r.Count("step", /*required=*/true).value_or(0);
  if (!r.status().ok()) return r.status();
  auto step_s = e.find("step_s");
  if (step_s == e.end() || !step_s->is_number() || !std::isfinite(step_s->get<double>()) ||
      step_s->get<double>() < 0) {
    r.Fail("step_s", "a finite number of seconds >= 0");
    return r.status();
  }
  s.step_s = step_s->get<double>();
  s.tokens = r.Count("tokens");
  s.peak_mem_bytes = r.Count("peak_mem_bytes");
  s.rss_bytes = r.Count("rss_bytes");
  s.comm_bytes = r.Count("comm_bytes");
  s.loss = r.Number("loss");
  s.lr = r.Number("lr");
  s.grad_norm = r.Number("grad_norm");
  s.comm_s = r.Number("comm_s");
  s.phase = r.String("phase", false, "measure");
  if (r.status().ok() && s.phase != "warmup" && s.phase != "measure") r.Fail("phase", "\"warmup\" or \"measure\"");
  s.device_allocated_bytes = r.Number("device_allocated_bytes");
  s.device_reserved_peak_bytes = r.Number("device_reserved_peak_bytes");
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace

Result<SummaryEvent> ReadSummaryEvent(const json& e) {
  if (!e.is_object()) return Status::InvalidArgument("trainer event 'summary' is not a JSON object");
  FieldReader r(e, "summary");
  SummaryEvent s;
  s.startup_s = r.Number("startup_s");
  s.first_step_s = r.Number("first_step_s");
  s.warmup_s = r.Number("warmup_s");
  s.step_s_median = r.Number("step_s_median");
  s.step_s_p10 = r.Number("step_s_p10");
  s.step_s_p90 = r.Number("step_s_p90");
  s.tokens_per_s = r.Number("tokens_per_s");
  s.flops_per_s = r.Number("flops_per_s");
  s.mfu = r.Number("mfu");
  s.peak_mem_bytes = r.RoundedNumber("peak_mem_bytes");
  s.peak_reserved_bytes = r.RoundedNumber("peak_reserved_bytes");
  s.peak_rss_bytes = r.RoundedNumber("peak_rss_bytes");
  s.frozen_bytes = r.RoundedNumber("frozen_bytes");
  s.trainable_bytes = r.RoundedNumber("trainable_bytes");
  s.grad_bytes = r.RoundedNumber("grad_bytes");
  s.optimizer_bytes = r.RoundedNumber("optimizer_bytes");
  s.comm_s_per_step = r.Number("comm_s_per_step");
  s.comm_bytes_per_step = r.RoundedNumber("comm_bytes_per_step");
  s.tokens_per_step = r.Number("tokens_per_step");
  s.applied = r.Object("applied");
  if (!r.status().ok()) return r.status();
  // Descriptive only, and never checked when stored: read when it is an object.
  if (auto it = e.find("environment"); it != e.end() && it->is_object()) s.environment = *it;
  return s;
}

namespace {

Result<ErrorEvent> ReadError(const json& e) {
  FieldReader r(e, "error");
  ErrorEvent s;
  s.kind = r.String("kind", /*required=*/true);
  s.message = r.String("message");
  if (!r.status().ok()) return r.status();
  return s;
}

Result<StartedEvent> ReadStarted(const json& e) {
  FieldReader r(e, "started");
  StartedEvent s;
  s.pid = r.Integer("pid");
  s.host = r.String("host");
  s.address = r.String("address");
  if (!r.status().ok()) return r.status();
  return s;
}

template <typename T>
Status Assign(Result<T> read, TrainerEvent& event) {
  if (!read.ok()) return read.status();
  event.fields = std::move(read).value();
  return Status::Ok();
}

}  // namespace

Result<TrainerEvent> TrainerEventFromJson(json object) {
  if (!object.is_object()) return Status::InvalidArgument("trainer line is not a JSON object");
  auto kind = object.find("event");
  if (kind == object.end() || !kind->is_string()) {
    return Status::InvalidArgument("trainer line has no string \"event\" field");
  }
  TrainerEvent event;
  event.kind = kind->get<std::string>();
  event.body = std::move(object);
  Status checked = Status::Ok();
  if (event.kind == "step") {
    checked = Assign(ReadStep(event.body), event);
  } else if (event.kind == "summary") {
    checked = Assign(ReadSummaryEvent(event.body), event);
  } else if (event.kind == "error") {
    checked = Assign(ReadError(event.body), event);
  } else if (event.kind == "started") {
    checked = Assign(ReadStarted(event.body), event);
  }
  if (!checked.ok()) return checked;
  if (auto at = event.body.find("at"); at != event.body.end() && at->is_number() && std::isfinite(at->get<double>())) {
    event.at = at->get<double>();
  }
  return event;
}

StepRow StepRowOf(const StepEvent& step) {
  return StepRow{step.step,           step.step_s,    step.tokens, step.loss,      step.lr,
                 step.peak_mem_bytes, step.rss_bytes, step.comm_s, step.comm_bytes};
}

namespace {

template <typename T>
json OptionalJson(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

void AppendInt(std::int64_t value, std::string& out) {
  char buffer[24];
  auto end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  out.append(buffer, end);
}

void AppendDouble(double value, std::string& out) {
  char buffer[32];
  auto end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  out.append(text);
  if (text.find_first_of(".e") == std::string_view::npos) out.append(".0");
}

template <typename T>
void AppendOptional(const std::optional<T>& value, std::string& out) {
  out.push_back(',');
  if (!value) {
    out.append("null");
  } else if constexpr (std::is_same_v<T, double>) {
    // Non-finite never reaches here (the readers make it nullopt); JSON has no NaN.
    if (std::isfinite(*value)) {
      AppendDouble(*value, out);
    } else {
      out.append("null");
    }
  } else {
    AppendInt(*value, out);
  }
}

// Column `i` of a step row: a count (integer >= 0 fitting int64) or null.
Status RowCount(const json& v, std::size_t i, std::optional<std::int64_t>& out) {
  if (v.is_null()) return Status::Ok();
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      out = static_cast<std::int64_t>(v.get<std::uint64_t>());
      return Status::Ok();
    }
  } else if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    out = v.get<std::int64_t>();
    return Status::Ok();
  }
  return Status::InvalidArgument(std::string("step row: column \"") + kStepRowColumns[i] +
                                 "\" must be an integer >= 0 or null");
}

// Column `i`: a number or null; a non-finite one reads as null.
Status RowNumber(const json& v, std::size_t i, std::optional<double>& out) {
  if (v.is_null()) return Status::Ok();
  if (!v.is_number()) {
    return Status::InvalidArgument(std::string("step row: column \"") + kStepRowColumns[i] +
                                   "\" must be a number or null");
  }
  const double value = v.get<double>();
  if (std::isfinite(value)) out = value;
  return Status::Ok();
}

}  // namespace

json StepRowToJson(const StepRow& row) {
  return json::array({row.step, row.step_s, OptionalJson(row.tokens), OptionalJson(row.loss),
                      OptionalJson(row.lr), OptionalJson(row.peak_mem_bytes), OptionalJson(row.rss_bytes),
                      OptionalJson(row.comm_s), OptionalJson(row.comm_bytes)});
}

void AppendStepRowJson(const StepRow& row, std::string& out) {
  out.push_back('[');
  AppendInt(row.step, out);
  out.push_back(',');
  AppendDouble(std::isfinite(row.step_s) ? row.step_s : 0.0, out);
  AppendOptional(row.tokens, out);
  AppendOptional(row.loss, out);
  AppendOptional(row.lr, out);
  AppendOptional(row.peak_mem_bytes, out);
  AppendOptional(row.rss_bytes, out);
  AppendOptional(row.comm_s, out);
  AppendOptional(row.comm_bytes, out);
  out.push_back(']');
}

Result<StepRow> ReadStepRow(const json& row) {
  if (!row.is_array() || row.size() != kStepRowColumnCount) {
    return Status::InvalidArgument("step row: not an array of " + std::to_string(kStepRowColumnCount) + " values");
  }
  StepRow r;
  std::optional<std::int64_t> step;
  BAKEOFF_RETURN_IF_ERROR(RowCount(row[0], 0, step));
  if (!step) return Status::InvalidArgument("step row: column \"step\" must be an integer >= 0");
  r.step = *step;
  const json& step_s = row[1];
  if (!step_s.is_number() || !std::isfinite(step_s.get<double>()) || step_s.get<double>() < 0) {
    return Status::InvalidArgument("step row: column \"step_s\" must be a finite number of seconds >= 0");
  }
  r.step_s = step_s.get<double>();
  BAKEOFF_RETURN_IF_ERROR(RowCount(row[2], 2, r.tokens));
  BAKEOFF_RETURN_IF_ERROR(RowNumber(row[3], 3, r.loss));
  BAKEOFF_RETURN_IF_ERROR(RowNumber(row[4], 4, r.lr));
  BAKEOFF_RETURN_IF_ERROR(RowCount(row[5], 5, r.peak_mem_bytes));
  BAKEOFF_RETURN_IF_ERROR(RowCount(row[6], 6, r.rss_bytes));
  BAKEOFF_RETURN_IF_ERROR(RowNumber(row[7], 7, r.comm_s));
  BAKEOFF_RETURN_IF_ERROR(RowCount(row[8], 8, r.comm_bytes));
  return r;
}

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
  return TrainerEventFromJson(std::move(parsed));
}

}  // namespace bakeoff::protocol
