#include "experiments/sweep/sweep_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "experiments/sweep/axis_rules.h"
#include "experiments/sweep/duration.h"
#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/trainer_fields.h"
#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::spec {
namespace {

using trainer::JoinNames;

using nlohmann::json;

const std::vector<std::string> kTopLevelFields = {
    "name",   "question", "workload", "method",  "count",  "seed",      "parameters",
    "exclude", "baseline", "repeats", "order",   "resources", "limits"};
const std::vector<std::string> kLoraFields = {"alpha", "dropout", "targets", "rank"};
const std::vector<std::string> kAxisFields = {"values", "value", "distribution", "min", "max"};
const std::vector<std::string> kCommandFields = {"template", "args", "argv", "env", "turns", "flags"};
const std::vector<std::string> kResourceFields = {"device", "gpu_type"};
const std::vector<std::string> kLimitFields = {"trial_timeout", "max_attempts", "turn_timeout"};
const std::vector<std::string> kAdaptiveFields = {"min", "max", "until"};
const std::vector<std::string> kUntilFields = {"ci_half_width"};

constexpr int kMaxRepeats = 1000;
constexpr int kMaxAttempts = 100;
constexpr size_t kMaxNameLength = 100;

std::string JoinPath(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string IndexPath(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}


// A command template's name as a sweep may write it: letters, digits, '.', '_', '-'.
bool IsTemplateName(const std::string& name) {
  static const std::regex kTemplate("[A-Za-z0-9_.-]+");
  return std::regex_match(name, kTemplate);
}

std::vector<std::string> TrainerFieldNames() {
  std::vector<std::string> names;
  for (const auto& field : TrainerFields()) names.push_back(field.name);
  return names;
}

// What the user wrote, for "got ..." in messages.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: {
      std::string s = node.Scalar();
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return "'" + s + "'";
    }
    default: return "an undefined value";
  }
}

bool MatchesInt(const std::string& s) {
  static const std::regex kInt("[-+]?[0-9]+");
  return std::regex_match(s, kInt);
}

bool MatchesFloat(const std::string& s) {
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  return std::regex_match(s, kFloat);
}

// Flow collections ([ and {) nest without indentation, so a small file can be deeply
// nested; this scan bounds that before yaml-cpp recurses into it. Block nesting is
// bounded by the tree walk after parsing (it costs indentation, hence bytes).
std::optional<std::pair<int, int>> FlowDepthExceeded(const std::string& text, int max_depth) {
  int depth = 0, line = 1, column = 1;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      column = 1;
      comment = false;
      continue;
    }
    ++column;
    if (comment) continue;
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      comment = true;
    } else if ((c == '"' || c == '\'') && depth > 0) {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return std::make_pair(line, column - 1);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

// The first place (1-based line, column) where the text is not YAML's character set:
// bytes that are not valid UTF-8, or a character outside YAML 1.2's c-printable (a control
// character other than tab, line feed and carriage return; U+FFFE, U+FFFF). JSON output
// (nlohmann) throws on invalid UTF-8, and yaml-cpp turns a NUL inside a scalar into bytes
// that are not UTF-8, so both stop here.
struct TextFault {
  int line = 1;
  int column = 1;
  std::string what;  // "not UTF-8 text" or "control character U+0000"
};
std::optional<TextFault> FirstTextFault(const std::string& text) {
  int line = 1, column = 1;
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return TextFault{line, column, "not UTF-8 text"};
    uint32_t code = length == 1 ? c : c & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next >> 6) != 0x2) return TextFault{line, column, "not UTF-8 text"};
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr uint32_t kMinCode[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinCode[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return TextFault{line, column, "not UTF-8 text"};
    }
    const bool printable = code == 0x9 || code == 0xA || code == 0xD || (code >= 0x20 && code <= 0x7E) ||
                           code == 0x85 || (code >= 0xA0 && code != 0xFFFE && code != 0xFFFF);
    if (!printable) {
      char name[16];
      snprintf(name, sizeof(name), "U+%04X", static_cast<unsigned>(code));
      return TextFault{line, column, std::string("control character ") + name + ", which YAML does not allow"};
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += length;
  }
  return std::nullopt;
}

struct Entry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
};

class SweepParser {
 public:
  // `forced_executor`: parse as if every variant ran this executor ("lora" or a template
  // name); ParseSweepText runs one such pass per value of an `executor` axis.
  SweepParser(std::string source, const ParseLimits& limits, const ExecutorCatalog* executors,
              std::optional<std::string> forced_executor = std::nullopt)
      : source_(std::move(source)), limits_(limits), executors_(executors),
        forced_executor_(std::move(forced_executor)) {
    spec_.source_name = source_;
  }

  // The values of the sweep's `executor` axis as read by Parse (empty without one).
  const std::vector<std::string>& executor_axis() const { return executor_axis_; }

  Result<SweepSpec> Parse(const std::string& text) {
    if (text.size() > limits_.max_yaml_bytes) {
      return Status::ResourceExhausted(
          source_ + ": " + std::to_string(text.size()) + " bytes is over the limit of " +
          std::to_string(limits_.max_yaml_bytes) +
          " bytes for a sweep file; split the sweep into several");
    }
    if (auto fault = FirstTextFault(text)) {
      return Status::InvalidArgument(source_ + ":" + std::to_string(fault->line) + ":" +
                                     std::to_string(fault->column) + ": " + fault->what +
                                     "; save the sweep file as UTF-8 text");
    }
    if (auto at = FlowDepthExceeded(text, limits_.max_depth)) {
      return Status::ResourceExhausted(source_ + ":" + std::to_string(at->first) + ":" +
                                       std::to_string(at->second) + ": nesting deeper than " +
                                       std::to_string(limits_.max_depth) +
                                       " levels (the limit for a sweep file)");
    }
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(source_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                     std::to_string(e.mark.column + 1) +
                                     ": not valid YAML: " + e.msg);
    }
    try {
      Status structure = CheckStructure(root, 1);
      if (!structure.ok()) return structure;
      ParseTop(root);
    } catch (const YAML::Exception& e) {
      // Not expected after a successful load; reported with context rather than thrown.
      AddAt(e.mark, "", std::string("unexpected YAML error: ") + e.msg);
    }
    if (!errors_.empty()) {
      // Sections are checked in dependency order; users read problems in file order.
      std::stable_sort(errors_.begin(), errors_.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string message;
      for (const auto& error : errors_) message += (message.empty() ? "" : "\n") + error.second;
      if (gave_up_) {
        message += "\n" + source_ + ": stopped after " + std::to_string(limits_.max_errors) +
                   " problems; fix these and validate again";
      }
      return Status::InvalidArgument(message);
    }
    return std::move(spec_);
  }

 private:
  // ---- errors and locations ----

  void AddAt(const YAML::Mark& mark, const std::string& path, const std::string& message) {
    if (errors_.size() >= limits_.max_errors) {
      gave_up_ = true;
      return;
    }
    std::string where = source_;
    if (!mark.is_null()) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    std::pair<int, int> position = mark.is_null() ? std::make_pair(0, 0)
                                                  : std::make_pair(mark.line, mark.column);
    errors_.emplace_back(position, where + ": " + (path.empty() ? "" : path + ": ") + message);
  }

  void Add(const YAML::Node& node, const std::string& path, const std::string& message) {
    AddAt(node.Mark(), path, message);
  }

  SourceLocation Location(const YAML::Node& node) const {
    SourceLocation location{source_, 0, 0};
    YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      location.line = mark.line + 1;
      location.column = mark.column + 1;
    }
    return location;
  }

  Status CheckStructure(const YAML::Node& node, int depth) {
    if (++nodes_seen_ > limits_.max_nodes) {
      return Status::ResourceExhausted(
          source_ + ": more than " + std::to_string(limits_.max_nodes) +
          " YAML nodes (aliases counted each time they are used), the limit for a sweep file");
    }
    if (node.IsMap() || node.IsSequence()) {
      if (depth > limits_.max_depth) {
        YAML::Mark mark = node.Mark();
        return Status::ResourceExhausted(source_ + ":" + std::to_string(mark.line + 1) + ":" +
                                         std::to_string(mark.column + 1) +
                                         ": nesting deeper than " +
                                         std::to_string(limits_.max_depth) +
                                         " levels (the limit for a sweep file)");
      }
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (node.IsMap()) {
          BAKEOFF_RETURN_IF_ERROR(CheckStructure(it->first, depth + 1));
          BAKEOFF_RETURN_IF_ERROR(CheckStructure(it->second, depth + 1));
        } else {
          BAKEOFF_RETURN_IF_ERROR(CheckStructure(*it, depth + 1));
        }
      }
    }
    return Status::Ok();
  }

  // ---- generic readers ----

  // A mapping's entries in the order written; reports non-scalar and repeated keys.
  std::optional<std::vector<Entry>> Entries(const YAML::Node& node, const std::string& path,
                                            const std::string& expected) {
    if (!node.IsMap()) {
      Add(node, path, "expected " + expected + ", got " + Describe(node));
      return std::nullopt;
    }
    std::vector<Entry> entries;
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        Add(it->first, path, "keys must be plain names, got " + Describe(it->first));
        continue;
      }
      std::string key = it->first.Scalar();
      if (!seen.insert(key).second) {
        Add(it->first, JoinPath(path, key), "written twice; keep one");
        continue;
      }
      entries.push_back({key, it->first, it->second});
    }
    return entries;
  }

  void Unknown(const Entry& entry, const std::string& path,
               const std::vector<std::string>& known) {
    std::string hint = ClosestName(entry.key, known);
    Add(entry.key_node, JoinPath(path, entry.key),
        "unknown field" + (hint.empty() ? "" : "; did you mean " + hint + "?") +
            " (known: " + JoinNames(known) + ")");
  }

  // Scalars typed as YAML 1.2's core schema does: null, booleans, integers, floats;
  // quoted scalars are always strings.
  std::optional<json> ToJsonValue(const YAML::Node& node, const std::string& path) {
    switch (node.Type()) {
      case YAML::NodeType::Null:
        return json(nullptr);
      case YAML::NodeType::Scalar: {
        const std::string& s = node.Scalar();
        bool quoted = node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
        if (quoted) return json(s);
        if (s == "~" || s == "null" || s == "Null" || s == "NULL") return json(nullptr);
        if (s == "true" || s == "True" || s == "TRUE") return json(true);
        if (s == "false" || s == "False" || s == "FALSE") return json(false);
        if (MatchesInt(s)) {
          errno = 0;
          long long v = std::strtoll(s.c_str(), nullptr, 10);
          if (errno == ERANGE) {
            Add(node, path, "integer " + s + " is out of range");
            return std::nullopt;
          }
          return json(static_cast<int64_t>(v));
        }
        if (MatchesFloat(s)) {
          double v = std::strtod(s.c_str(), nullptr);
          if (!std::isfinite(v)) {
            Add(node, path, "number " + s + " is out of range");
            return std::nullopt;
          }
          return json(v);
        }
        return json(s);
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        size_t i = 0;
        for (const auto& item : node) {
          auto v = ToJsonValue(item, IndexPath(path, i++));
          if (!v) return std::nullopt;
          out.push_back(std::move(*v));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        auto entries = Entries(node, path, "a mapping");
        if (!entries) return std::nullopt;
        json out = json::object();
        for (const auto& entry : *entries) {
          auto v = ToJsonValue(entry.value, JoinPath(path, entry.key));
          if (!v) return std::nullopt;
          out[entry.key] = std::move(*v);
        }
        return out;
      }
      default:
        Add(node, path, "expected a value");
        return std::nullopt;
    }
  }

  std::optional<std::string> ReadString(const YAML::Node& node, const std::string& path,
                                        const std::string& expected) {
    if (!node.IsScalar() || node.Scalar().empty()) {
      Add(node, path, "expected " + expected + ", got " + Describe(node));
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<std::string> ReadChoice(const YAML::Node& node, const std::string& path,
                                        const std::vector<std::string>& choices) {
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
    }
    std::string hint = node.IsScalar() ? ClosestName(node.Scalar(), choices) : "";
    Add(node, path,
        "expected one of " + JoinNames(choices) + ", got " + Describe(node) +
            (hint.empty() ? "" : "; did you mean " + hint + "?"));
    return std::nullopt;
  }

  std::optional<int64_t> ReadInt(const YAML::Node& node, const std::string& path, int64_t min,
                                 int64_t max) {
    if (node.IsScalar() && node.Tag() != "!" && MatchesInt(node.Scalar())) {
      errno = 0;
      long long v = std::strtoll(node.Scalar().c_str(), nullptr, 10);
      if (errno != ERANGE && v >= min && v <= max) return v;
    }
    Add(node, path,
        "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
            ", got " + Describe(node));
    return std::nullopt;
  }

  // A value for field `name`: checked against the trainer's table when the name is a
  // trainer field (always, for the lora executor), else any YAML value as JSON.
  std::optional<json> FieldValue(const std::string& name, const YAML::Node& node,
                                 const std::string& path) {
    auto raw = ToJsonValue(node, path);
    if (!raw) return std::nullopt;
    if (name == kExecutorAxis && !executor_axis_.empty()) {
      // Baselines and exclude rules name an executor of the axis.
      if (!raw->is_string()) {
        Add(node, path, "expected an executor name (lora or a command template), got " + Describe(node));
        return std::nullopt;
      }
      return raw;
    }
    if (const ExecutorTemplate* tmpl = Template()) {
      auto checked = tmpl->CheckField(name, *raw);
      if (!checked.ok()) {
        Add(node, path, checked.status().message());
        return std::nullopt;
      }
      return std::move(checked).value();
    }
    const TrainerField* field = TrainerFieldFor(name);
    if (field == nullptr) {
      if (raw->is_null()) {
        Add(node, path, "expected a value, got nothing");
        return std::nullopt;
      }
      return raw;
    }
    auto normalized = NormalizeTrainerValue(*field, *raw);
    if (!normalized.ok()) {
      Add(node, path, normalized.status().message());
      return std::nullopt;
    }
    return std::move(normalized).value();
  }

  bool IsLora() const { return spec_.workload.executor == Executor::kLora; }

  // The allowlisted template a command sweep names, when the parser was given the
  // allowlist and the template is in it; its fields then replace the trainer's table.
  const ExecutorTemplate* Template() const {
    if (IsLora() || executors_ == nullptr) return nullptr;
    return executors_->Find(spec_.workload.command_template);
  }

  // The trainer field `name` means in this sweep: nullptr when it is no trainer field or
  // the command template gives it its own values (e.g. torch.compile's modes).
  // A command sweep whose template is unknown here has free-form fields: the template
  // may give a trainer field's name other values (compile_mode: default).
  const TrainerField* TrainerFieldFor(const std::string& name) const {
    if (IsLora()) return FindTrainerField(name);
    const ExecutorTemplate* tmpl = Template();
    if (tmpl == nullptr || tmpl->fields.count(name) || !tmpl->AcceptsField(name)) return nullptr;
    return FindTrainerField(name);
  }

  // Whether `name` may be a parameter axis or a workload field.
  bool CheckFieldName(const Entry& entry, const std::string& path) {
    if (entry.key == "device") {
      Add(entry.key_node, JoinPath(path, entry.key),
          "the device comes from resources.device (cpu or cuda); set it there");
      return false;
    }
    if (entry.key == "rank" || entry.key == "local_rank" || entry.key == "store" ||
        entry.key == "rank_address" || entry.key == "rank_interface") {
      Add(entry.key_node, JoinPath(path, entry.key),
          "set by the worker for each rank process, not by a sweep (world_size sets the ranks)");
      return false;
    }
    if (const ExecutorTemplate* tmpl = Template()) {
      if (!tmpl->AcceptsField(entry.key)) {
        std::string hint = ClosestName(entry.key, tmpl->FieldNames());
        Add(entry.key_node, JoinPath(path, entry.key),
            "not a field of command template " + tmpl->name +
                (hint.empty() ? "" : "; did you mean " + hint + "?") + " (its fields: " +
                JoinNames(tmpl->FieldNames()) + "; " + executors_->source + ")");
        return false;
      }
      return true;
    }
    if (IsLora()) {
      if (FindTrainerField(entry.key) == nullptr) {
        std::string hint = ClosestName(entry.key, TrainerFieldNames());
        Add(entry.key_node, JoinPath(path, entry.key),
            "not a field of the native trainer" +
                (hint.empty() ? "" : "; did you mean " + hint + "?") +
                " (the fields are listed in docs/trainer.md)");
        return false;
      }
      return true;
    }
    static const std::regex kIdentifier("[A-Za-z_][A-Za-z0-9_]*");
    if (!std::regex_match(entry.key, kIdentifier)) {
      Add(entry.key_node, JoinPath(path, entry.key),
          "expected a name of letters, digits and underscores");
      return false;
    }
    return true;
  }

  // ---- sections ----

  // The top-level entries by key.
  using TopEntries = std::map<std::string, Entry>;
  static const Entry* FindTop(const TopEntries& top, const std::string& key) {
    auto it = top.find(key);
    return it == top.end() ? nullptr : &it->second;
  }

  void ParseTop(const YAML::Node& root) {
    auto entries = Entries(root, "", "a mapping with name, workload, parameters, ...");
    if (!entries) return;
    TopEntries top;
    for (const auto& entry : *entries) {
      if (std::find(kTopLevelFields.begin(), kTopLevelFields.end(), entry.key) ==
          kTopLevelFields.end()) {
        Unknown(entry, "", kTopLevelFields);
        continue;
      }
      top.emplace(entry.key, entry);
    }
    ParseNameAndQuestion(root, top);
    ParseMethod(top);
    ParseRepeatsAndOrder(top);
    if (const Entry* e = FindTop(top, "resources")) ParseResources(e->value);
    if (const Entry* e = FindTop(top, "limits")) ParseLimitsSection(e->value);
    // An executor axis decides how every field is checked; read it before the workload.
    if (const Entry* e = FindTop(top, "parameters")) PreScanExecutorAxis(e->value);
    if (const Entry* e = FindTop(top, "workload")) {
      ParseWorkload(e->value);
    } else {
      Add(root, "workload", "missing; every sweep needs a workload (executor, model, steps, ...)");
    }
    if (const Entry* e = FindTop(top, "parameters")) ParseParameters(e->value);
    if (const Entry* e = FindTop(top, "exclude")) ParseExclude(e->value);
    ParseBaselineOrSayWhy(top);
    CheckOwnCommandPlaceholders();
    FillDefaults();
    if (const Entry* e = FindTop(top, "order")) CheckLockstepTakesTurns(e->value);
    AddWarnings();
  }

  void ParseNameAndQuestion(const YAML::Node& root, const TopEntries& top) {
    if (const Entry* e = FindTop(top, "name")) {
      if (auto name = ReadString(e->value, "name", "a sweep name")) {
        // Starting with a letter keeps names apart from sweep ids wherever a command
        // accepts either.
        static const std::regex kName("[A-Za-z][A-Za-z0-9._-]*");
        if (!std::regex_match(*name, kName) || name->size() > kMaxNameLength) {
          Add(e->value, "name",
              "expected letters, digits, '.', '_' and '-', starting with a letter (at most " +
                  std::to_string(kMaxNameLength) + " characters), got " + Describe(e->value));
        } else {
          spec_.name = *name;
        }
      }
    } else {
      Add(root, "name", "missing; every sweep needs a name (e.g. name: compile-vs-eager)");
    }
    if (const Entry* e = FindTop(top, "question")) {
      if (auto q = ReadString(e->value, "question", "the question this sweep answers")) {
        spec_.question = *q;
      }
    }
  }

  // method, and what it needs (count) and allows (seed). The method decides what
  // parameters may contain: it is read before them.
  void ParseMethod(const TopEntries& top) {
    if (const Entry* e = FindTop(top, "method")) {
      if (auto m = ReadChoice(e->value, "method", {"grid", "random"})) {
        spec_.method = *m == "grid" ? Method::kGrid : Method::kRandom;
      }
    }
    if (const Entry* e = FindTop(top, "count")) {
      if (spec_.method != Method::kRandom) {
        Add(e->key_node, "count", "applies to method: random only (a grid runs every point)");
      } else if (auto c = ReadInt(e->value, "count", 1, 1000000)) {
        spec_.count = *c;
      }
    } else if (spec_.method == Method::kRandom) {
      Add(FindTop(top, "method")->value, "count", "missing; method: random needs count (how many variants to draw)");
    }
    if (const Entry* e = FindTop(top, "seed")) {
      if (auto s = ReadInt(e->value, "seed", 0, INT64_MAX)) spec_.seed = static_cast<uint64_t>(*s);
    }
  }

  void ParseRepeatsAndOrder(const TopEntries& top) {
    if (const Entry* e = FindTop(top, "repeats")) {
      if (e->value.IsMap()) {
        ParseAdaptiveRepeats(e->value);
      } else if (auto r = ReadInt(e->value, "repeats", 1, kMaxRepeats)) {
        spec_.repeats = static_cast<int>(*r);
      }
    }
    const Entry* e = FindTop(top, "order");
    if (e == nullptr) return;
    if (auto o = ReadChoice(e->value, "order", {"interleaved", "sequential", "random", "lockstep"})) {
      spec_.order = *o == "interleaved"  ? Order::kInterleaved
                    : *o == "sequential" ? Order::kSequential
                    : *o == "lockstep"   ? Order::kLockstep
                                         : Order::kRandom;
      if (spec_.adaptive && spec_.order != Order::kInterleaved && spec_.order != Order::kLockstep) {
        Add(e->value, "order",
            "adaptive repeats need order: interleaved or lockstep (the sequential rule looks at "
            "pairs of a variant and its counterpart that ran side by side), got " + *o);
      }
    }
  }

  // The baseline; without one, adaptive repeats are refused and a sweep with axes warned.
  void ParseBaselineOrSayWhy(const TopEntries& top) {
    if (const Entry* e = FindTop(top, "baseline")) {
      ParseBaseline(e->value);
    } else if (spec_.adaptive) {
      Add(FindTop(top, "repeats")->value, "repeats",
          "adaptive repeats need a baseline: they stop a variant by its interval against its "
          "baseline counterpart; add e.g. baseline: {" +
              (spec_.parameters.empty() ? std::string("axis: value") : spec_.parameters.front().name + ": ...") +
              "}");
    } else if (!spec_.parameters.empty()) {
      spec_.warnings.push_back(
          "no baseline: variants will not be paired, so the report cannot compare them; "
          "add e.g. baseline: {" +
          spec_.parameters.front().name + ": ...}");
    }
  }

  // repeats: {min: 3, max: 20, until: {ci_half_width: 0.02}} (docs/sweep.md).
  void ParseAdaptiveRepeats(const YAML::Node& node) {
    auto entries = Entries(node, "repeats",
                           "a number of repeats or {min: 3, max: 20, until: {ci_half_width: 0.02}}");
    if (!entries) return;
    AdaptiveRepeats adaptive;
    adaptive.location = Location(node);
    const Entry* min_entry = nullptr;
    bool ok = true, saw_min = false, saw_max = false, saw_until = false;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("repeats", entry.key);
      if (entry.key == "min" || entry.key == "max") {
        const bool is_min = entry.key == "min";
        (is_min ? saw_min : saw_max) = true;
        if (is_min) min_entry = &entry;
        if (auto v = ReadInt(entry.value, path, 2, kMaxRepeats)) {
          (is_min ? adaptive.min : adaptive.max) = static_cast<int>(*v);
        } else {
          ok = false;
        }
      } else if (entry.key == "until") {
        saw_until = true;
        auto until = Entries(entry.value, path, "a mapping {ci_half_width: 0.02}");
        if (!until) {
          ok = false;
          continue;
        }
        bool saw_width = false;
        for (const auto& u : *until) {
          std::string upath = JoinPath(path, u.key);
          if (u.key != "ci_half_width") {
            Unknown(u, path, kUntilFields);
            ok = false;
            continue;
          }
          saw_width = true;
          const YAML::Node& v = u.value;
          bool number = v.IsScalar() && v.Tag() != "!" &&
                        (MatchesFloat(v.Scalar()) || MatchesInt(v.Scalar()));
          double width = number ? std::strtod(v.Scalar().c_str(), nullptr) : 0;
          if (!number || !(width > 0 && width < 1)) {
            Add(v, upath,
                "expected a number between 0 and 1 (exclusive; 0.02 stops once the speedup's "
                "interval is +-0.02 wide), got " + Describe(v));
            ok = false;
          } else {
            adaptive.ci_half_width = width;
          }
        }
        if (!saw_width) {
          Add(entry.value, path, "missing ci_half_width (e.g. until: {ci_half_width: 0.02})");
          ok = false;
        }
      } else {
        Unknown(entry, "repeats", kAdaptiveFields);
        ok = false;
      }
    }
    for (const auto& [seen, field] : {std::make_pair(saw_min, "min"), std::make_pair(saw_max, "max"),
                                      std::make_pair(saw_until, "until")}) {
      if (!seen) {
        Add(node, JoinPath("repeats", field),
            "missing; adaptive repeats need min, max and until (e.g. repeats: {min: 3, max: 20, "
            "until: {ci_half_width: 0.02}})");
        ok = false;
      }
    }
    if (!ok) return;
    if (adaptive.max < adaptive.min) {
      Add(min_entry->value, "repeats.min",
          "must not exceed max (" + std::to_string(adaptive.max) + "), got " +
              std::to_string(adaptive.min));
      return;
    }
    spec_.adaptive = adaptive;
    spec_.repeats = adaptive.max;
  }

  void ParseResources(const YAML::Node& node) {
    auto entries = Entries(node, "resources", "a mapping {device: cpu|cuda, gpu_type: ...}");
    if (!entries) return;
    const YAML::Node* gpu_type_node = nullptr;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("resources", entry.key);
      if (entry.key == "device") {
        if (auto d = ReadChoice(entry.value, path, {"cpu", "cuda"})) spec_.resources.device = *d;
      } else if (entry.key == "gpu_type") {
        if (auto g = ReadString(entry.value, path, "a GPU model name such as A100")) {
          spec_.resources.gpu_type = *g;
          gpu_type_node = &entry.value;
        }
      } else {
        Unknown(entry, "resources", kResourceFields);
      }
    }
    if (gpu_type_node != nullptr && spec_.resources.device != "cuda") {
      Add(*gpu_type_node, "resources.gpu_type", "needs device: cuda");
    }
  }

  void ParseLimitsSection(const YAML::Node& node) {
    auto entries = Entries(node, "limits", "a mapping {trial_timeout: 10m, max_attempts: 3}");
    if (!entries) return;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("limits", entry.key);
      if (entry.key == "trial_timeout") {
        if (!entry.value.IsScalar()) {
          Add(entry.value, path, "expected a duration such as 10m, got " + Describe(entry.value));
          continue;
        }
        auto d = ParseDuration(entry.value.Scalar());
        if (!d.ok()) {
          Add(entry.value, path, d.status().message());
        } else {
          spec_.limits.trial_timeout = *d;
        }
      } else if (entry.key == "turn_timeout") {
        auto d = entry.value.IsScalar() ? ParseDuration(entry.value.Scalar())
                                        : Result<std::chrono::seconds>(Status::InvalidArgument(
                                              "expected a duration such as 5m, got " + Describe(entry.value)));
        if (!d.ok()) {
          Add(entry.value, path, d.status().message());
        } else {
          spec_.limits.turn_timeout = *d;  // positive: ParseDuration refuses 0
        }
      } else if (entry.key == "max_attempts") {
        if (auto a = ReadInt(entry.value, path, 1, kMaxAttempts)) {
          spec_.limits.max_attempts = static_cast<int>(*a);
        }
      } else {
        Unknown(entry, "limits", kLimitFields);
      }
    }
  }

  void ParseWorkload(const YAML::Node& node) {
    auto entries = Entries(node, "workload", "a mapping (executor, model, steps, ...)");
    if (!entries) return;
    if (forced_executor_) {
      // An executor axis: this pass checks the workload for one of its values.
      const bool lora = *forced_executor_ == "lora";
      spec_.workload.executor = lora ? Executor::kLora : Executor::kCommand;
      spec_.workload.command_template = lora ? "" : *forced_executor_;
      for (const auto& entry : *entries) {
        if (entry.key == "executor" || entry.key == "command") {
          Add(entry.key_node, JoinPath("workload", entry.key),
              "parameters.executor chooses each variant's executor; remove workload." + entry.key);
        }
      }
    }
    for (const auto& entry : *entries) {
      if (forced_executor_) break;
      if (entry.key == "executor") {
        // A template's name where the executor goes: say how a template is named.
        if (entry.value.IsScalar() && entry.value.Scalar() != "lora" && entry.value.Scalar() != "command" &&
            executors_ != nullptr && executors_->Find(entry.value.Scalar()) != nullptr) {
          const std::string& name = entry.value.Scalar();
          Add(entry.value, "workload.executor",
              "expected one of lora, command, got " + Describe(entry.value) + "; " + name +
                  " is a command template: write `executor: command` and `command: {template: " + name + "}`");
          continue;
        }
        if (auto x = ReadChoice(entry.value, "workload.executor", {"lora", "command"})) {
          spec_.workload.executor = *x == "lora" ? Executor::kLora : Executor::kCommand;
        }
      }
    }
    // The template first: its fields decide how the other workload fields are checked.
    for (const auto& entry : *entries) {
      if (forced_executor_ || entry.key != "command" || IsLora() || !entry.value.IsMap()) continue;
      const YAML::Node t = entry.value["template"];
      if (t && t.IsScalar()) spec_.workload.command_template = t.Scalar();
      if (entry.value["argv"] && !t) spec_.workload.command_template = kSweepCommandName;
    }
    json& defaults = spec_.workload.defaults;
    bool saw_command = false;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("workload", entry.key);
      if (entry.key == "executor") continue;
      if (entry.key == "command" && forced_executor_) continue;
      if (entry.key == "command") {
        saw_command = true;
        if (IsLora()) {
          Add(entry.key_node, path, "applies to executor: command only");
        } else {
          ParseCommand(entry.value);
        }
        continue;
      }
      if (entry.key == "lora") {
        auto lora = Entries(entry.value, path, "a mapping {alpha, dropout, targets, rank}");
        if (!lora) continue;
        for (const auto& item : *lora) {
          if (std::find(kLoraFields.begin(), kLoraFields.end(), item.key) == kLoraFields.end()) {
            Unknown(item, path, kLoraFields);
            continue;
          }
          std::string flat = "lora_" + item.key;
          std::string item_path = JoinPath(path, item.key);
          if (defaults.contains(flat)) {
            Add(item.key_node, item_path, "also set as workload." + flat + "; keep one");
            continue;
          }
          if (auto v = FieldValue(flat, item.value, item_path)) defaults[flat] = std::move(*v);
        }
        continue;
      }
      if (!CheckFieldName(entry, "workload")) continue;
      if (defaults.contains(entry.key)) {
        Add(entry.key_node, path, "also set in workload.lora; keep one");
        continue;
      }
      if (auto v = FieldValue(entry.key, entry.value, path)) defaults[entry.key] = std::move(*v);
    }
    if (!IsLora() && !saw_command && !forced_executor_) {
      Add(node, "workload.command",
          "missing; executor: command needs command: {template: NAME, args: {...}} naming a "
          "template allowlisted in the worker's configuration, or, with `bakeoff local` on your own "
          "machine, command: {argv: [python3, train.py]} (docs/your-script.md)");
    }
  }

  void ParseCommand(const YAML::Node& node) {
    auto entries = Entries(node, "workload.command",
                           "a mapping {template: NAME, args: {...}} or, with bakeoff local, {argv: [...]}");
    if (!entries) return;
    const Entry* template_entry = nullptr;
    const Entry* argv_entry = nullptr;
    for (const auto& entry : *entries) {
      if (entry.key == "template") template_entry = &entry;
      if (entry.key == "argv") argv_entry = &entry;
    }
    if (template_entry != nullptr && argv_entry != nullptr) {
      Add(argv_entry->key_node, "workload.command.argv",
          "give either template (an allowlisted command) or argv (your own command), not both");
      return;
    }
    if (argv_entry != nullptr) {
      ParseOwnCommand(*entries);
      return;
    }
    bool saw_template = false;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("workload.command", entry.key);
      if (entry.key == "template") {
        saw_template = true;
        if (auto t = ReadString(entry.value, path, "the name of an allowlisted template")) {
          if (!IsTemplateName(*t)) {
            Add(entry.value, path, "expected a template name of letters, digits, '.', '_', '-'");
            spec_.workload.command_template.clear();
          } else if (*t == kSweepCommandName) {
            Add(entry.value, path,
                std::string(kSweepCommandName) + " is reserved; give your own command as command: {argv: [...]}");
            spec_.workload.command_template.clear();
          } else if (executors_ != nullptr && !executors_->Knows(*t)) {
            Add(entry.value, path, "\"" + *t + "\" is not an allowlisted command template; allowed: " +
                                       executors_->NameList() + " (" + executors_->source + ")" +
                                       (executors_->own_commands == ExecutorCatalog::OwnCommands::kRefuse
                                            ? std::string()
                                            : "; to run your own script with bakeoff local, write command: "
                                              "{argv: [python3, train.py]} instead"));
            spec_.workload.command_template.clear();
          } else {
            spec_.workload.command_template = *t;
          }
        }
      } else if (entry.key == "args") {
        auto args = ToJsonValue(entry.value, path);
        if (args && !args->is_object()) {
          Add(entry.value, path, "expected a mapping of argument names to values, got " +
                                     Describe(entry.value));
        } else if (args) {
          if (const ExecutorTemplate* tmpl = Template()) {
            for (const auto& [name, value] : args->items()) {
              auto spec = tmpl->args.find(name);
              if (spec == tmpl->args.end()) {
                std::vector<std::string> names;
                for (const auto& [n, _] : tmpl->args) names.push_back(n);
                Add(entry.value, JoinPath(path, name), "not an arg of command template " + tmpl->name +
                                                           " (its args: " + JoinNames(names) + ")");
              } else if (auto checked = spec->second.Check(value); !checked.ok()) {
                Add(entry.value, JoinPath(path, name), checked.status().message());
              }
            }
          }
          spec_.workload.command_args = std::move(*args);
        }
      } else if (entry.key == "flags") {
        if (auto f = ReadChoice(entry.value, path, {"true", "false"})) spec_.workload.command_flags = *f == "true";
      } else if (entry.key == "env" || entry.key == "turns") {
        Add(entry.key_node, path,
            "applies to your own command (command: {argv: [...]}) only; an allowlisted template's " +
                std::string(entry.key == "env" ? "environment (env.set, where {field} placeholders map a field to a "
                                                 "variable)"
                                               : "`turns: true`") +
                " is its operator's, in the executors file (docs/executors.md)");
      } else {
        Unknown(entry, "workload.command", kCommandFields);
      }
    }
    if (!saw_template) {
      Add(node, "workload.command.template",
          "missing; name an allowlisted template, or give your own command as argv (bakeoff local only)");
    }
  }

  // `command: {argv: [...], env: {NAME: value}, turns: bool, flags: bool}`: the sweep's
  // own command. Only the operator's own run (`bakeoff local`) runs it; a coordinator
  // refuses it here, with what to do instead.
  void ParseOwnCommand(const std::vector<Entry>& entries) {
    if (executors_ != nullptr && executors_->own_commands == ExecutorCatalog::OwnCommands::kRefuse) {
      const Entry& argv = *std::find_if(entries.begin(), entries.end(), [](const Entry& e) { return e.key == "argv"; });
      Add(argv.key_node, "workload.command.argv",
          "a coordinator runs only the command templates its workers' operators allowlisted (" +
              executors_->NameList() +
              "), never a command written in a sweep; run this sweep with `bakeoff local` on your own "
              "machine, or ask the operator to add the command to the executors file and name it with "
              "command: {template: NAME} (docs/executors.md)");
      return;
    }
    ExecutorTemplate own;
    own.name = kSweepCommandName;
    own.description = "the sweep's own command";
    own.from_sweep = true;
    own.flags = true;
    own.location = source_;
    for (const auto& entry : entries) {
      std::string path = JoinPath("workload.command", entry.key);
      if (entry.key == "argv") {
        own.location = Location(entry.key_node).ToString();
        if (!entry.value.IsSequence() || entry.value.size() == 0 || entry.value.size() > kMaxArgv) {
          Add(entry.value, path,
              "expected a list of 1 to " + std::to_string(kMaxArgv) +
                  " strings, the program first (e.g. [python3, train.py]), got " + Describe(entry.value));
          continue;
        }
        size_t i = 0;
        for (const auto& item : entry.value) {
          std::string item_path = IndexPath(path, i++);
          if (!item.IsScalar() || (i == 1 && item.Scalar().empty())) {
            Add(item, item_path, "expected a string, got " + Describe(item));
            continue;
          }
          own.argv.push_back(item.Scalar());
          own_command_nodes_.emplace_back(item, item_path);
        }
      } else if (entry.key == "env") {
        auto env = Entries(entry.value, path, "a mapping of environment variable names to values");
        if (!env) continue;
        static const std::regex kEnvName("[A-Za-z_][A-Za-z0-9_]*");
        for (const auto& e : *env) {
          std::string e_path = JoinPath(path, e.key);
          if (!std::regex_match(e.key, kEnvName)) {
            Add(e.key_node, e_path, "expected an environment variable name (letters, digits and '_')");
          } else if (!e.value.IsScalar()) {
            Add(e.value, e_path, "expected a string such as \"{compile}\", got " + Describe(e.value));
          } else {
            own.env_set[e.key] = e.value.Scalar();
            own_command_nodes_.emplace_back(e.value, e_path);
          }
        }
      } else if (entry.key == "turns") {
        if (auto t = ReadChoice(entry.value, path, {"true", "false"})) own.turns = *t == "true";
      } else if (entry.key == "flags") {
        if (auto f = ReadChoice(entry.value, path, {"true", "false"})) spec_.workload.command_flags = *f == "true";
      } else if (entry.key == "args") {
        Add(entry.key_node, path, "args fill a template's placeholders; in your own argv, write {field} instead");
      } else {
        Unknown(entry, "workload.command", kCommandFields);
      }
    }
    spec_.workload.command_template = kSweepCommandName;
    spec_.workload.own_command = std::move(own);
    if (executors_ == nullptr || executors_->own_commands == ExecutorCatalog::OwnCommands::kCheck) {
      // bakeoff validate: where it can run, before someone submits it to a coordinator.
      spec_.warnings.push_back(
          "workload.command.argv is your own command: `bakeoff local` runs it on this machine; a coordinator "
          "refuses it (it runs allowlisted templates only; docs/your-script.md)");
    }
  }

  // Each {name} in the own command's argv and env is a built-in placeholder, a parameter
  // axis or a workload field: checked once the parameters are read.
  void CheckOwnCommandPlaceholders() {
    if (!spec_.workload.own_command) return;
    const auto& builtins = BuiltinPlaceholders();
    static const std::regex kPlaceholder("\\{([^{}]*)\\}");
    for (const auto& [node, path] : own_command_nodes_) {
      const std::string text = node.Scalar();
      for (auto it = std::sregex_iterator(text.begin(), text.end(), kPlaceholder); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        if (std::find(builtins.begin(), builtins.end(), name) != builtins.end()) continue;
        if (spec_.FindAxis(name) != nullptr || spec_.workload.defaults.contains(name) || failed_axes_.count(name)) {
          continue;
        }
        std::vector<std::string> names(builtins.begin(), builtins.end());
        for (const auto& a : spec_.parameters) names.push_back(a.name);
        for (const auto& [k, _] : spec_.workload.defaults.items()) names.push_back(k);
        std::string hint = ClosestName(name, names);
        Add(node, path,
            "placeholder {" + name + "} is neither built in (" + JoinNames(builtins) +
                ") nor a parameter or workload field of this sweep" + (hint.empty() ? "" : "; did you mean " + hint + "?"));
      }
    }
  }

  // The configuration a command's script reads (run.config) holds every field it may
  // ask for, not only those the sweep wrote: a catalog template's own defaults and its
  // trainer fields' defaults, and for the sweep's own command the loop's steps and
  // warmup_steps. Not with an executor axis: its variants share the workload.
  void FillDefaults() {
    if (IsLora() || !executor_axis_.empty()) return;
    json& defaults = spec_.workload.defaults;
    auto fill = [&](const std::string& name, const json& value) {
      if (value.is_null() || defaults.contains(name) || spec_.FindAxis(name) != nullptr) return;
      defaults[name] = value;
    };
    auto trainer_default = [](const std::string& name) -> json {
      const TrainerField* field = FindTrainerField(name);
      if (field == nullptr) return nullptr;
      auto v = NormalizeTrainerValue(*field, field->default_value);
      return v.ok() ? *v : json(nullptr);
    };
    if (const ExecutorTemplate* tmpl = Template()) {
      for (const auto& [name, value_spec] : tmpl->fields) fill(name, value_spec.default_value);
      for (const auto& name : tmpl->trainer_fields) {
        if (!tmpl->fields.count(name)) fill(name, trainer_default(name));
      }
    } else if (spec_.workload.own_command) {
      for (const char* name : {"steps", "warmup_steps"}) fill(name, trainer_default(name));
    }
  }

  // `parameters: {executor: {values: [lora, torch-reference, ...]}}`: one sweep compares
  // the native trainer ("lora") and allowlisted command templates. Each value must be
  // one of them; every other field is then checked once per executor (ParseSweepText).
  void PreScanExecutorAxis(const YAML::Node& parameters) {
    if (!parameters.IsMap()) return;
    for (auto it = parameters.begin(); it != parameters.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != kExecutorAxis) continue;
      const std::string path = "parameters.executor";
      const YAML::Node axis = it->second;  // a copy: it->second is a temporary
      const char* expected = "a list of executors such as {values: [lora, torch-reference]}";
      std::vector<YAML::Node> items;
      if (axis.IsMap() && axis["values"] && axis["values"].IsSequence() && axis.size() == 1) {
        for (const auto& item : axis["values"]) items.push_back(item);
      } else if (axis.IsMap() && axis["value"] && axis.size() == 1) {
        items.push_back(axis["value"]);
        executor_axis_fixed_ = true;
      } else {
        Add(axis, path, std::string("expected ") + expected + ", got " + Describe(axis));
        return;
      }
      if (items.empty()) {
        Add(axis, path, std::string("expected ") + expected + ", got an empty list");
        return;
      }
      std::vector<std::string> values;
      bool ok = true;
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string item_path = executor_axis_fixed_ ? path + ".value" : IndexPath(path + ".values", i);
        auto name = ReadString(items[i], item_path, "lora (the native trainer) or a command template's name");
        if (!name) {
          ok = false;
        } else if (*name == "command" || *name == kSweepCommandName) {
          Add(items[i], item_path, "name the command template itself (e.g. torch-reference), not \"" + *name + "\"");
          ok = false;
        } else if (*name != "lora" && (!IsTemplateName(*name) ||
                                       (executors_ != nullptr && !executors_->Knows(*name)))) {
          Add(items[i], item_path,
              "\"" + *name + "\" is neither lora (the native trainer) nor an allowlisted command template" +
                  (executors_ != nullptr ? "; allowed: " + executors_->NameList() + " (" + executors_->source + ")"
                                         : std::string()));
          ok = false;
        } else if (std::find(values.begin(), values.end(), *name) != values.end()) {
          Add(items[i], item_path, *name + " is listed twice; list each executor once");
          ok = false;
        } else {
          values.push_back(*name);
        }
      }
      if (!ok) return;
      executor_axis_ = std::move(values);
      if (!forced_executor_) forced_executor_ = executor_axis_.front();
      return;
    }
  }

  void ParseParameters(const YAML::Node& node) {
    if (node.IsNull()) return;
    auto entries = Entries(node, "parameters", "a mapping of axis names to {values: [...]}");
    if (!entries) return;
    for (const auto& entry : *entries) {
      std::string path = JoinPath("parameters", entry.key);
      if (entry.key == kExecutorAxis) {
        // Read (and reported on) by PreScanExecutorAxis.
        if (executor_axis_.empty()) continue;
        ParameterAxis axis;
        axis.name = entry.key;
        axis.location = Location(entry.key_node);
        for (const auto& x : executor_axis_) axis.values.emplace_back(x);
        axis.fixed = executor_axis_fixed_;
        spec_.parameters.push_back(std::move(axis));
        continue;
      }
      if (!CheckFieldName(entry, "parameters")) continue;
      ParameterAxis axis;
      axis.name = entry.key;
      axis.location = Location(entry.key_node);
      if (ParseAxis(entry.value, path, &axis)) {
        spec_.parameters.push_back(std::move(axis));
      } else {
        failed_axes_.insert(entry.key);  // its own error is said; rules naming it say nothing more
      }
    }
  }

  bool ParseAxis(const YAML::Node& node, const std::string& path, ParameterAxis* axis) {
    const std::string expected =
        "a mapping {values: [...]}, {value: x}" +
        std::string(spec_.method == Method::kRandom
                        ? " or {distribution: int_uniform|uniform|log_uniform, min, max}"
                        : "");
    auto entries = Entries(node, path, expected);
    if (!entries) return false;
    const Entry *values = nullptr, *value = nullptr, *distribution = nullptr, *min = nullptr,
                *max = nullptr;
    for (const auto& entry : *entries) {
      if (entry.key == "values") values = &entry;
      else if (entry.key == "value") value = &entry;
      else if (entry.key == "distribution") distribution = &entry;
      else if (entry.key == "min") min = &entry;
      else if (entry.key == "max") max = &entry;
      else {
        Unknown(entry, path, kAxisFields);
        return false;
      }
    }
    int forms = (values != nullptr) + (value != nullptr) + (distribution != nullptr);
    if (forms != 1) {
      Add(node, path,
          forms == 0 ? "expected " + expected
                     : "give only one of values, value and distribution");
      return false;
    }
    if ((min || max) && !distribution) {
      Add((min ? min : max)->key_node, path, "min and max belong to a distribution");
      return false;
    }
    if (value) {
      auto v = FieldValue(axis->name, value->value, JoinPath(path, "value"));
      if (!v) return false;
      axis->values.push_back(std::move(*v));
      axis->fixed = true;
      return true;
    }
    if (values) {
      std::string values_path = JoinPath(path, "values");
      if (!values->value.IsSequence() || values->value.size() == 0) {
        Add(values->value, values_path,
            "expected a non-empty list such as [1, 2, 4], got " + Describe(values->value));
        return false;
      }
      bool ok = true;
      size_t i = 0;
      for (const auto& item : values->value) {
        std::string item_path = IndexPath(values_path, i);
        auto v = FieldValue(axis->name, item, item_path);
        if (!v) {
          ok = false;
        } else {
          for (size_t j = 0; j < axis->values.size(); ++j) {
            if (axis->values[j] == *v) {
              Add(item, item_path, CanonicalValue(*v) + " repeats values[" + std::to_string(j) +
                                       "]; list each value once");
              ok = false;
            }
          }
          axis->values.push_back(std::move(*v));
        }
        ++i;
      }
      return ok;
    }
    return ParseDistribution(*distribution, min, max, path, axis);
  }

  bool ParseDistribution(const Entry& distribution, const Entry* min, const Entry* max,
                         const std::string& path, ParameterAxis* axis) {
    std::string d_path = JoinPath(path, "distribution");
    if (spec_.method != Method::kRandom) {
      Add(distribution.key_node, d_path,
          "needs method: random; a grid needs explicit values: {values: [...]}");
      return false;
    }
    auto kind_name = ReadChoice(distribution.value, d_path, {"int_uniform", "uniform", "log_uniform"});
    if (!kind_name) return false;
    Distribution d;
    d.kind = *kind_name == "int_uniform" ? Distribution::Kind::kIntUniform
             : *kind_name == "uniform"   ? Distribution::Kind::kUniform
                                         : Distribution::Kind::kLogUniform;
    if (!min || !max) {
      Add(distribution.value, path, "a distribution needs both min and max");
      return false;
    }
    const TrainerField* field = TrainerFieldFor(axis->name);
    if (field && field->kind != TrainerField::Kind::kInt &&
        field->kind != TrainerField::Kind::kNumber) {
      Add(distribution.value, d_path, axis->name + " is not numeric; list its values instead");
      return false;
    }
    bool int_field = field ? field->kind == TrainerField::Kind::kInt
                           : d.kind == Distribution::Kind::kIntUniform;
    if (d.kind == Distribution::Kind::kIntUniform && !int_field) {
      Add(distribution.value, d_path, axis->name + " is not an integer field; use uniform or log_uniform");
      return false;
    }
    if (d.kind == Distribution::Kind::kUniform && int_field && field) {
      Add(distribution.value, d_path, axis->name + " is an integer field; use int_uniform or log_uniform");
      return false;
    }
    auto bound = [&](const Entry& e, double* out) {
      auto v = FieldValue(axis->name, e.value, JoinPath(path, e.key));
      if (!v) return false;
      if (!v->is_number() || (int_field && !v->is_number_integer())) {
        Add(e.value, JoinPath(path, e.key),
            std::string("expected ") + (int_field ? "an integer" : "a number") + ", got " +
                Describe(e.value));
        return false;
      }
      *out = v->get<double>();
      return true;
    };
    if (!bound(*min, &d.min) || !bound(*max, &d.max)) return false;
    if (d.min >= d.max) {
      Add(max->value, JoinPath(path, "max"), "must be greater than min");
      return false;
    }
    if (d.kind == Distribution::Kind::kLogUniform && d.min <= 0) {
      Add(min->value, JoinPath(path, "min"), "log_uniform needs min > 0");
      return false;
    }
    axis->distribution = d;
    return true;
  }

  // Exclude rules and baselines name fields: axes, workload fields, trainer fields.
  std::optional<std::pair<std::string, json>> RuleItem(const Entry& entry, const std::string& path,
                                                       bool axes_only) {
    std::string item_path = JoinPath(path, entry.key);
    const ParameterAxis* axis = spec_.FindAxis(entry.key);
    // An axis whose own definition failed: its error is reported already, and a second
    // one here ("not a parameter axis") would be false.
    if (axis == nullptr && failed_axes_.count(entry.key)) return std::nullopt;
    if (axes_only && axis == nullptr) {
      std::vector<std::string> axis_names;
      for (const auto& a : spec_.parameters) axis_names.push_back(a.name);
      std::string hint = ClosestName(entry.key, axis_names);
      Add(entry.key_node, item_path,
          "not a parameter axis" + (hint.empty() ? "" : "; did you mean " + hint + "?") +
              " (the baseline picks values of axes listed in parameters: " +
              JoinNames(axis_names) + ")");
      return std::nullopt;
    }
    if (axis == nullptr && !spec_.workload.defaults.contains(entry.key)) {
      bool known = IsLora() ? FindTrainerField(entry.key) != nullptr
                            : (Template() != nullptr && Template()->AcceptsField(entry.key));
      if (!known) {
        std::vector<std::string> names;
        for (const auto& a : spec_.parameters) names.push_back(a.name);
        for (const auto& [k, v] : spec_.workload.defaults.items()) names.push_back(k);
        if (IsLora()) names = TrainerFieldNames();
        std::string hint = ClosestName(entry.key, names);
        Add(entry.key_node, item_path,
            "not a parameter axis, workload field or trainer field" +
                (hint.empty() ? "" : "; did you mean " + hint + "?"));
        return std::nullopt;
      }
    }
    auto v = FieldValue(entry.key, entry.value, item_path);
    if (!v) return std::nullopt;
    return std::make_pair(entry.key, std::move(*v));
  }

  void ParseExclude(const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      Add(node, "exclude", "expected a list of rules such as - {zero_stage: 0, offload: optimizer}, got " +
                               Describe(node));
      return;
    }
    size_t i = 0;
    for (const auto& rule_node : node) {
      std::string path = IndexPath("exclude", i++);
      auto entries = Entries(rule_node, path, "a mapping of fields to values");
      if (!entries) continue;
      if (entries->empty()) {
        Add(rule_node, path, "an empty rule would exclude every variant; name at least one field");
        continue;
      }
      ExcludeRule rule;
      rule.location = Location(rule_node);
      bool ok = true;
      for (const auto& entry : *entries) {
        auto item = RuleItem(entry, path, /*axes_only=*/false);
        if (!item) {
          ok = false;
          continue;
        }
        rule.match.push_back(std::move(*item));
      }
      if (ok) spec_.exclude.push_back(std::move(rule));
    }
  }

  void ParseBaseline(const YAML::Node& node) {
    auto entries = Entries(node, "baseline", "a mapping of axes to their baseline values");
    if (!entries) return;
    for (const auto& entry : *entries) {
      auto item = RuleItem(entry, "baseline", /*axes_only=*/true);
      if (!item) continue;
      const ParameterAxis* axis = spec_.FindAxis(item->first);
      if (!axis->distribution &&
          std::find(axis->values.begin(), axis->values.end(), item->second) == axis->values.end()) {
        std::string listed;
        for (const auto& v : axis->values) listed += (listed.empty() ? "" : ", ") + CanonicalValue(v);
        Add(entry.value, JoinPath("baseline", entry.key),
            CanonicalValue(item->second) + " is not one of the axis values [" + listed +
                "]; add it to parameters." + entry.key + ".values");
        continue;
      }
      spec_.baseline.push_back(std::move(*item));
    }
    if (entries->empty()) {
      Add(node, "baseline", "expected at least one axis, e.g. baseline: {compile_mode: eager}");
    }
  }

  // The value a non-axis field has in every variant: the workload's, else the trainer's
  // default (device comes from resources).
  std::optional<json> ConstantValue(const std::string& name) const {
    if (name == "device") return json(spec_.resources.device);
    if (spec_.workload.defaults.contains(name)) return spec_.workload.defaults[name];
    if (IsLora()) {
      if (const TrainerField* field = FindTrainerField(name)) {
        auto v = NormalizeTrainerValue(*field, field->default_value);
        if (v.ok()) return *v;
      }
    } else if (const ExecutorTemplate* tmpl = Template()) {
      if (auto own = tmpl->fields.find(name); own != tmpl->fields.end()) {
        if (!own->second.default_value.is_null()) return own->second.default_value;
      } else if (const TrainerField* field = TrainerFieldFor(name)) {
        auto v = NormalizeTrainerValue(*field, field->default_value);
        if (v.ok()) return *v;
      }
    }
    return std::nullopt;
  }

  // order: lockstep needs every side to take turns: an allowlisted template says so
  // with `turns: true` (its script reports through bakeoff_report's run.step()). A
  // template known by name only is checked at run time (docs/lockstep.md).
  void CheckLockstepTakesTurns(const YAML::Node& order) {
    if (spec_.order != Order::kLockstep) return;
    if (const auto& own = spec_.workload.own_command; own && !IsLora()) {
      if (own->turns) return;
      Add(order, "order",
          "lockstep needs every side to take turns, but the sweep's own command does not say it does: add "
          "turns: true to workload.command once your script reports its steps through bakeoff_report's "
          "run.step() (the Hugging Face callback does), or use order: interleaved");
      return;
    }
    const ExecutorTemplate* t = Template();
    if (t == nullptr || t->turns) return;
    Add(order, "order",
        "lockstep needs every side to take turns, but command template \"" + t->name +
            "\" does not declare `turns: true` (" + t->location +
            "): its script may not report through bakeoff_report's run.step(); use order: interleaved, "
            "or add turns: true to the template once its script takes turns");
  }

  void AddWarnings() {
    for (size_t i = 0; i < spec_.exclude.size(); ++i) {
      const ExcludeRule& rule = spec_.exclude[i];
      for (const auto& [key, value] : rule.match) {
        const ParameterAxis* axis = spec_.FindAxis(key);
        bool never = false;
        std::string why;
        if (axis != nullptr) {
          if (!axis->distribution &&
              std::find(axis->values.begin(), axis->values.end(), value) == axis->values.end()) {
            never = true;
            why = CanonicalValue(value) + " is not one of the values of axis " + key;
          }
        } else if (auto constant = ConstantValue(key); constant && *constant != value) {
          never = true;
          why = key + " is " + CanonicalValue(*constant) + " in every variant";
        }
        if (never) {
          spec_.warnings.push_back(rule.location.ToString() + ": exclude[" + std::to_string(i) +
                                   "] never matches: " + why);
          break;
        }
      }
    }
    if (IsLora() && spec_.resources.device == "cpu") {
      // The trainer-field table says which values need CUDA (TrainerField::cuda_only).
      for (const TrainerField& field : TrainerFields()) {
        if (field.cuda_only.empty()) continue;
        std::vector<json> values;
        if (const ParameterAxis* axis = spec_.FindAxis(field.name)) {
          values = axis->values;
        } else if (auto constant = ConstantValue(field.name)) {
          values = {*constant};
        }
        for (const json& v : values) {
          if (ValueNeedsCuda(field.name, v)) {
            spec_.warnings.push_back(field.name + " " + CanonicalValue(v) +
                                     " is CUDA only: on device cpu those trials end unsupported");
          }
        }
      }
    }
  }

  std::string source_;
  ParseLimits limits_;
  const ExecutorCatalog* executors_ = nullptr;  // not owned; may be null
  std::optional<std::string> forced_executor_;    // the executor this pass checks for
  std::vector<std::string> executor_axis_;        // the `executor` axis' values, if any
  bool executor_axis_fixed_ = false;              // written as {value: x}
  std::set<std::string> failed_axes_;             // axes of parameters whose definition failed
  // The own command's argv items and env values, for CheckOwnCommandPlaceholders.
  std::vector<std::pair<YAML::Node, std::string>> own_command_nodes_;
  std::vector<std::pair<std::pair<int, int>, std::string>> errors_;  // (line, column), text
  bool gave_up_ = false;
  size_t nodes_seen_ = 0;
  SweepSpec spec_;
};

}  // namespace

Result<SweepSpec> ParseSweepText(const std::string& text, const std::string& source_name,
                                 const ParseLimits& limits, const ExecutorCatalog* executors) {
  SweepParser first(source_name, limits, executors);
  Result<SweepSpec> result = first.Parse(text);
  const std::vector<std::string> axis = first.executor_axis();
  if (axis.empty()) return result;
  // An executor axis: the first pass checked every field for axis[0]; check them for
  // the others too. A problem found for some executors only says which.
  std::vector<std::pair<std::string, std::vector<std::string>>> problems;  // line, executors
  auto collect = [&](const Result<SweepSpec>& pass, const std::string& executor) {
    if (pass.ok()) return;
    std::istringstream lines(pass.status().message());
    for (std::string line; std::getline(lines, line);) {
      auto it = std::find_if(problems.begin(), problems.end(), [&](const auto& p) { return p.first == line; });
      if (it == problems.end()) {
        problems.push_back({line, {executor}});
      } else {
        it->second.push_back(executor);
      }
    }
  };
  if (!result.ok() && result.status().code() != Status::Code::kInvalidArgument) return result;
  collect(result, axis.front());
  for (size_t i = 1; i < axis.size(); ++i) {
    Result<SweepSpec> pass = SweepParser(source_name, limits, executors, axis[i]).Parse(text);
    if (!pass.ok() && pass.status().code() != Status::Code::kInvalidArgument) return pass.status();
    collect(pass, axis[i]);
  }
  if (problems.empty()) {
    // Each variant's executor is its axis value; the workload names none.
    result->workload.executor = Executor::kLora;
    result->workload.command_template.clear();
    return result;
  }
  // In file order, as one pass reports them.
  auto position = [&](const std::string& line) {
    int row = 0, column = 0;
    if (line.compare(0, source_name.size() + 1, source_name + ":") != 0 ||
        std::sscanf(line.c_str() + source_name.size() + 1, "%d:%d", &row, &column) != 2) {
      return std::make_pair(INT32_MAX, 0);  // no line: after those that have one
    }
    return std::make_pair(row, column);
  };
  std::stable_sort(problems.begin(), problems.end(),
                   [&](const auto& a, const auto& b) { return position(a.first) < position(b.first); });
  std::string message;
  for (const auto& [line, which] : problems) {
    message += (message.empty() ? "" : "\n") + line;
    if (which.size() < axis.size()) message += " (with executor " + JoinNames(which) + ")";
  }
  return Status::InvalidArgument(message);
}

Result<SweepSpec> ParseSweepFile(const std::string& path, const ParseLimits& limits,
                                 const ExecutorCatalog* executors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(path + ": cannot open the sweep file (" + std::strerror(errno) +
                            "); check the path");
  }
  // Read at most one byte past the limit: enough to know the file is too large.
  std::string text;
  text.resize(limits.max_yaml_bytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return Status::IoError(path + ": read failed");
  if (text.size() > limits.max_yaml_bytes) {
    return Status::ResourceExhausted(path + ": over the limit of " +
                                     std::to_string(limits.max_yaml_bytes) +
                                     " bytes for a sweep file; split the sweep into several");
  }
  return ParseSweepText(text, path, limits, executors);
}

}  // namespace bakeoff::spec
