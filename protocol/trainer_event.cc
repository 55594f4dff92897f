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

// A count: an integer >= 0 that fits int64.
std::optional<std::int64_t> ReadCount(const json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
  } else if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    return v.get<std::int64_t>();
  }
  return std::nullopt;
}

// A step's seconds: a finite number >= 0.
bool IsStepSeconds(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0; }

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
    std::optional<std::int64_t> count = ReadCount(*v);
    if (!count) Fail(field, "an integer >= 0");
    return count;
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
  s.row.step = r.Count("step", /*required=*/true).value_or(0);
  if (!r.status().ok()) return r.status();
  auto step_s = e.find("step_s");
  if (step_s == e.end() || !IsStepSeconds(*step_s)) {
    r.Fail("step_s", "a finite number of seconds >= 0");
    return r.status();
  }
  s.row.step_s = step_s->get<double>();
  s.row.tokens = r.Count("tokens");
  s.row.peak_mem_bytes = r.Count("peak_mem_bytes");
  s.row.rss_bytes = r.Count("rss_bytes");
  s.row.comm_bytes = r.Count("comm_bytes");
  s.row.turn = r.Count("turn");
  s.row.loss = r.Number("loss");
  s.row.lr = r.Number("lr");
  s.grad_norm = r.Number("grad_norm");
  s.row.comm_s = r.Number("comm_s");
  s.phase = r.String("phase", false, "measure");
  if (r.status().ok() && s.phase != "warmup" && s.phase != "measure") r.Fail("phase", "\"warmup\" or \"measure\"");
  s.device_allocated_bytes = r.Number("device_allocated_bytes");
  s.device_reserved_peak_bytes = r.Number("device_reserved_peak_bytes");
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace

const std::vector<SummaryFigure>& SummaryFigures() {
  using E = SummaryEvent;
  static const std::vector<SummaryFigure> kFigures = {
      {"startup_s", &E::startup_s, "s", true},
      {"first_step_s", &E::first_step_s, "s", true},
      {"warmup_s", &E::warmup_s, "s", true},
      {"step_s_median", &E::step_s_median, "s", true},
      {"step_s_p10", &E::step_s_p10, "s", true},
      {"step_s_p90", &E::step_s_p90, "s", true},
      {"tokens_per_s", &E::tokens_per_s, "tokens/s", true},
      {"flops_per_s", &E::flops_per_s, "FLOP/s", true},
      {"mfu", &E::mfu, "1", true},
      {"peak_mem_bytes", &E::peak_mem_bytes, "bytes", true},
      {"peak_reserved_bytes", &E::peak_reserved_bytes, "bytes", false},
      {"peak_rss_bytes", &E::peak_rss_bytes, "bytes", false},
      {"frozen_bytes", &E::frozen_bytes, "bytes", true},
      {"trainable_bytes", &E::trainable_bytes, "bytes", true},
      {"grad_bytes", &E::grad_bytes, "bytes", true},
      {"optimizer_bytes", &E::optimizer_bytes, "bytes", true},
      {"comm_s_per_step", &E::comm_s_per_step, "s", true},
      {"comm_bytes_per_step", &E::comm_bytes_per_step, "bytes", true},
      {"tokens_per_step", &E::tokens_per_step, "tokens", false},
  };
  return kFigures;
}

Result<SummaryEvent> ReadSummaryEvent(const json& e) {
  if (!e.is_object()) return Status::InvalidArgument("trainer event 'summary' is not a JSON object");
  FieldReader r(e, "summary");
  SummaryEvent s;
  for (const SummaryFigure& figure : SummaryFigures()) {
    if (auto real = std::get_if<std::optional<double> SummaryEvent::*>(&figure.member)) {
      s.**real = r.Number(figure.name);
    } else {
      s.*std::get<std::optional<std::int64_t> SummaryEvent::*>(figure.member) = r.RoundedNumber(figure.name);
    }
  }
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

namespace {

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

void AppendValue(const std::optional<std::int64_t>& value, std::string& out) {
  if (value) {
    AppendInt(*value, out);
  } else {
    out.append("null");
  }
}

void AppendValue(const std::optional<double>& value, std::string& out) {
  // JSON has no NaN: a non-finite value (never read from JSON) is null.
  if (value && std::isfinite(*value)) {
    AppendDouble(*value, out);
  } else {
    out.append("null");
  }
}

template <typename T>
bool HasValue(const std::optional<T>& value) {
  if constexpr (std::is_same_v<T, double>) return value && std::isfinite(*value);
  return value.has_value();
}

// The optional columns, in stored order (kStepRowColumns from index 2).
struct OptionalColumns {
  static constexpr std::size_t kLast = 9;
  static_assert(kLast + 1 == kStepRowColumnCount, "every column of kStepRowColumns has a member here");
  template <typename F>
  static void Each(F f) {
    f(2, &StepRow::tokens);
    f(3, &StepRow::loss);
    f(4, &StepRow::lr);
    f(5, &StepRow::peak_mem_bytes);
    f(6, &StepRow::rss_bytes);
    f(7, &StepRow::comm_s);
    f(8, &StepRow::comm_bytes);
    f(9, &StepRow::turn);
  }
};

Status ColumnError(std::size_t column, const char* expected) {
  return Status::InvalidArgument(std::string("step block: column \"") + kStepRowColumns[column] + "\" must be " +
                                 expected);
}

// Element `v` of column `column` into `out`; false when it has the wrong type.
bool ReadElement(const json& v, std::optional<std::int64_t>& out) {
  if (v.is_null()) return true;
  out = ReadCount(v);
  return out.has_value();
}

bool ReadElement(const json& v, std::optional<double>& out) {
  if (v.is_null()) return true;
  if (!v.is_number()) return false;
  const double value = v.get<double>();
  if (std::isfinite(value)) out = value;
  return true;
}

// Column `column` of `block` as an array of `n` values, or nullptr when absent (all null).
Result<const json*> Column(const json& block, std::size_t column, std::size_t n, bool required) {
  auto it = block.find(kStepRowColumns[column]);
  if (it == block.end() || (!required && it->is_null())) {
    if (required) return ColumnError(column, "an array, one value per step");
    return static_cast<const json*>(nullptr);
  }
  if (!it->is_array() || (n != 0 && it->size() != n)) {
    return ColumnError(column, ("an array of " + std::to_string(n) + " values, one per step").c_str());
  }
  return &*it;
}

}  // namespace

json StepRowsToColumns(const std::vector<StepRow>& rows) {
  json block = json::object();
  json steps = json::array();
  json times = json::array();
  for (const StepRow& row : rows) {
    steps.push_back(row.step);
    times.push_back(std::isfinite(row.step_s) ? row.step_s : 0.0);
  }
  block["step"] = std::move(steps);
  block["step_s"] = std::move(times);
  OptionalColumns::Each([&](std::size_t column, auto member) {
    bool any = false;
    for (const StepRow& row : rows) any = any || HasValue(row.*member);
    if (!any) return;
    json values = json::array();
    for (const StepRow& row : rows) {
      values.push_back(HasValue(row.*member) ? json(*(row.*member)) : json(nullptr));
    }
    block[kStepRowColumns[column]] = std::move(values);
  });
  return block;
}

Status ReadStepColumns(const json& block, std::vector<StepRow>& rows) {
  if (!block.is_object()) return Status::InvalidArgument("step block: not a JSON object");
  Result<const json*> steps = Column(block, 0, 0, /*required=*/true);
  if (!steps.ok()) return steps.status();
  const std::size_t n = (*steps)->size();
  Result<const json*> times = Column(block, 1, n, /*required=*/true);
  if (!times.ok()) return times.status();
  rows.assign(n, StepRow{});
  for (std::size_t i = 0; i < n; ++i) {
    std::optional<std::int64_t> step = ReadCount((**steps)[i]);
    if (!step) return ColumnError(0, "integers >= 0");
    rows[i].step = *step;
    const json& t = (**times)[i];
    if (!IsStepSeconds(t)) {
      return ColumnError(1, "finite numbers of seconds >= 0");
    }
    rows[i].step_s = t.get<double>();
  }
  Status status = Status::Ok();
  OptionalColumns::Each([&](std::size_t column, auto member) {
    if (!status.ok()) return;
    Result<const json*> values = Column(block, column, n, /*required=*/false);
    if (!values.ok()) {
      status = values.status();
      return;
    }
    if (*values == nullptr) return;
    for (std::size_t i = 0; i < n; ++i) {
      if (!ReadElement((**values)[i], rows[i].*member)) {
        using T = typename std::remove_reference_t<decltype(rows[i].*member)>::value_type;
        status = ColumnError(column, std::is_same_v<T, double> ? "numbers or null" : "integers >= 0 or null");
        return;
      }
    }
  });
  return status;
}

void AppendStepRowJson(const StepRow& row, std::string& out) {
  out.push_back('[');
  AppendInt(row.step, out);
  out.push_back(',');
  AppendDouble(std::isfinite(row.step_s) ? row.step_s : 0.0, out);
  // Up to the last column with a value: a shorter row reads the rest as NULL.
  std::size_t last = 1;
  OptionalColumns::Each([&](std::size_t column, auto member) {
    if (HasValue(row.*member)) last = column;
  });
  OptionalColumns::Each([&](std::size_t column, auto member) {
    if (column > last) return;
    out.push_back(',');
    AppendValue(row.*member, out);
  });
  out.push_back(']');
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
