#include "experiments/sweep/executor_catalog.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "experiments/sweep/trainer_fields.h"
#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::spec {
namespace {

using json = nlohmann::json;

const std::regex& NameRegex() {
  static const std::regex kName("[A-Za-z0-9_.-]+");
  return kName;
}

// A `name` argument value: the characters of NameRegex, and never `.` or `..` (a path
// component) or a leading `-` (a program would read it as an option).
bool IsNameValue(const std::string& value) {
  return value.size() <= 128 && std::regex_match(value, NameRegex()) && value != "." && value != ".." &&
         value.front() != '-';
}

const std::regex& EnvNameRegex() {
  static const std::regex kEnv("[A-Za-z_][A-Za-z0-9_]*");
  return kEnv;
}

// trainer::JoinNames, with "none" for an empty list.
std::string Join(const std::vector<std::string>& items) {
  std::string out = trainer::JoinNames(items);
  return out.empty() ? "none" : out;
}

std::string NumberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Collects "file:line:column: path: message" problems.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}
  void Add(const YAML::Node& node, const std::string& path, const std::string& message) {
    std::string where = source_;
    if (node.IsDefined() && node.Mark().line >= 0) {
      where += ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1);
    }
    lines_.push_back(where + ": " + path + ": " + message);
  }
  bool empty() const { return lines_.empty(); }
  std::string Text() const {
    std::string out;
    for (const auto& l : lines_) out += (out.empty() ? "" : "\n") + l;
    return out;
  }
  std::string Location(const YAML::Node& node) const {
    return source_ + ":" + std::to_string(node.Mark().line + 1);
  }

 private:
  std::string source_;
  std::vector<std::string> lines_;
};

std::vector<std::string> Placeholders(const std::string& text) {
  std::vector<std::string> names;
  static const std::regex kPlaceholder("\\{([^{}]*)\\}");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kPlaceholder); it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

std::optional<std::vector<std::string>> StringList(const YAML::Node& node, const std::string& path,
                                                   Problems& problems) {
  if (!node.IsSequence()) {
    problems.Add(node, path, "expected a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      problems.Add(item, path, "expected a string");
      return std::nullopt;
    }
    out.push_back(item.Scalar());
  }
  return out;
}

std::optional<ValueSpec> ParseValueSpec(const YAML::Node& node, const std::string& path, Problems& problems) {
  if (!node.IsMap()) {
    problems.Add(node, path, "expected a mapping {choices: [...]} or {type: bool|int|number|name, min, max, default}");
    return std::nullopt;
  }
  ValueSpec spec;
  bool typed = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& value = kv.second;
    if (key == "choices") {
      auto list = StringList(value, path + ".choices", problems);
      if (!list) return std::nullopt;
      if (list->empty()) {
        problems.Add(value, path + ".choices", "expected at least one choice");
        return std::nullopt;
      }
      spec.type = ValueSpec::Type::kChoice;
      spec.choices = *list;
      typed = true;
    } else if (key == "type") {
      const std::string t = value.IsScalar() ? value.Scalar() : "";
      if (t == "bool") spec.type = ValueSpec::Type::kBool;
      else if (t == "int") spec.type = ValueSpec::Type::kInt;
      else if (t == "number") spec.type = ValueSpec::Type::kNumber;
      else if (t == "name") spec.type = ValueSpec::Type::kName;
      else {
        problems.Add(value, path + ".type", "expected bool, int, number or name");
        return std::nullopt;
      }
      typed = true;
    } else if (key == "min" || key == "max") {
      try {
        (key == "min" ? spec.min : spec.max) = value.as<double>();
      } catch (const YAML::Exception&) {
        problems.Add(value, path + "." + key, "expected a number");
        return std::nullopt;
      }
    } else if (key == "default") {
      // Checked against the type once the whole mapping is read.
    } else if (key == "description") {
    } else {
      problems.Add(kv.first, path + "." + key, "unknown key; expected choices, type, min, max, default, description");
      return std::nullopt;
    }
  }
  if (!typed) {
    problems.Add(node, path, "missing choices or type");
    return std::nullopt;
  }
  if (node["default"]) {
    const YAML::Node& d = node["default"];
    json raw;
    if (spec.type == ValueSpec::Type::kBool) {
      try { raw = d.as<bool>(); } catch (const YAML::Exception&) { raw = d.Scalar(); }
    } else if (spec.type == ValueSpec::Type::kInt || spec.type == ValueSpec::Type::kNumber) {
      try {
        double v = d.as<double>();
        raw = (spec.type == ValueSpec::Type::kInt && v == std::floor(v)) ? json(static_cast<long long>(v)) : json(v);
      } catch (const YAML::Exception&) {
        raw = d.Scalar();
      }
    } else {
      raw = d.Scalar();
    }
    auto checked = spec.Check(raw);
    if (!checked.ok()) {
      problems.Add(d, path + ".default", checked.status().message());
      return std::nullopt;
    }
    spec.default_value = *checked;
  }
  return spec;
}

}  // namespace

Result<json> ValueSpec::Check(const json& value) const {
  auto bad = [&] { return Status::InvalidArgument("expected " + Describe() + ", got " + value.dump()); };
  switch (type) {
    case Type::kChoice:
      if (!value.is_string()) return bad();
      if (std::find(choices.begin(), choices.end(), value.get<std::string>()) == choices.end()) return bad();
      return value;
    case Type::kBool:
      if (!value.is_boolean()) return bad();
      return value;
    case Type::kInt: {
      if (!value.is_number_integer()) return bad();
      const double v = value.get<double>();
      if (v < min || v > max) return bad();
      return value;
    }
    case Type::kNumber: {
      if (!value.is_number()) return bad();
      const double v = value.get<double>();
      if (!std::isfinite(v) || v < min || v > max) return bad();
      return json(v);
    }
    case Type::kName:
      if (!value.is_string() || !IsNameValue(value.get<std::string>())) return bad();
      return value;
  }
  return bad();
}

std::string ValueSpec::Describe() const {
  auto range = [&](const char* what) {
    std::string out = what;
    if (min > -1e300 || max < 1e300) {
      out += " in [" + (min > -1e300 ? NumberText(min) : "-inf") + ", " + (max < 1e300 ? NumberText(max) : "inf") + "]";
    }
    return out;
  };
  switch (type) {
    case Type::kChoice: return "one of " + Join(choices);
    case Type::kBool: return "true or false";
    case Type::kInt: return range("an integer");
    case Type::kNumber: return range("a number");
    case Type::kName:
      return "a name of letters, digits, '.', '_', '-' (at most 128; not '.' or '..', not starting with '-')";
  }
  return "a value";
}

bool ExecutorTemplate::AcceptsField(const std::string& field) const {
  return from_sweep || fields.count(field) > 0 || args.count(field) > 0 ||
         std::find(trainer_fields.begin(), trainer_fields.end(), field) != trainer_fields.end();
}

std::vector<std::string> ExecutorTemplate::FieldNames() const {
  std::set<std::string> names(trainer_fields.begin(), trainer_fields.end());
  for (const auto& [name, _] : fields) names.insert(name);
  for (const auto& [name, _] : args) names.insert(name);
  return {names.begin(), names.end()};
}

std::set<std::string> ExecutorTemplate::PlaceholderFields() const {
  std::set<std::string> names;
  const auto& builtins = BuiltinPlaceholders();
  auto add = [&](const std::string& text) {
    for (auto& p : Placeholders(text)) {
      if (std::find(builtins.begin(), builtins.end(), p) == builtins.end()) names.insert(std::move(p));
    }
  };
  for (const auto& a : argv) add(a);
  for (const auto& [_, value] : env_set) add(value);
  return names;
}

Result<json> ExecutorTemplate::CheckField(const std::string& field, const json& value) const {
  if (from_sweep) return value;
  if (auto it = fields.find(field); it != fields.end()) {
    auto checked = it->second.Check(value);
    if (!checked.ok()) return Status::InvalidArgument(checked.status().message() + " (template " + name + ")");
    return checked;
  }
  if (auto it = args.find(field); it != args.end()) {
    auto checked = it->second.Check(value);
    if (!checked.ok()) return Status::InvalidArgument(checked.status().message() + " (template " + name + " arg)");
    return checked;
  }
  if (std::find(trainer_fields.begin(), trainer_fields.end(), field) != trainer_fields.end()) {
    const TrainerField* trainer = FindTrainerField(field);
    if (trainer == nullptr) return value;  // the catalog's own check refuses such names at load
    return NormalizeTrainerValue(*trainer, value);
  }
  std::string hint = ClosestName(field, FieldNames());
  return Status::InvalidArgument("not a field of command template " + name +
                                 (hint.empty() ? "" : "; did you mean " + hint + "?") +
                                 " (its fields: " + Join(FieldNames()) + ")");
}

const std::vector<std::string>& BuiltinPlaceholders() {
  static const std::vector<std::string> kNames = {"python", "dir", "config", "trial_dir",
                                                  "output_dir", "data_root", "cache"};
  return kNames;
}

const ExecutorTemplate* ExecutorCatalog::Find(const std::string& name) const {
  auto it = templates.find(name);
  return it == templates.end() ? nullptr : &it->second;
}

std::vector<std::string> ExecutorCatalog::Names() const {
  std::set<std::string> names(names_only.begin(), names_only.end());
  for (const auto& [name, _] : templates) names.insert(name);
  return {names.begin(), names.end()};
}

std::string ExecutorCatalog::NameList() const { return Join(Names()); }

namespace {

// `turns: true` and `flags: false`: a YAML boolean.
void ParseBoolKey(const YAML::Node& v, const std::string& where, Problems& problems, bool* out) {
  if (!v.IsScalar() || (v.Scalar() != "true" && v.Scalar() != "false")) {
    problems.Add(v, where, "expected true or false");
  } else {
    *out = v.Scalar() == "true";
  }
}

// A template's `env: {pass: [NAMES], set: {NAME: value}}`.
void ParseTemplateEnv(const YAML::Node& v, const std::string& path, Problems& problems, ExecutorTemplate& tmpl) {
  if (!v.IsMap()) {
    problems.Add(v, path + ".env", "expected {pass: [NAMES], set: {NAME: value}}");
    return;
  }
  for (const auto& e : v) {
    const std::string ek = e.first.Scalar();
    if (ek == "pass") {
      if (auto list = StringList(e.second, path + ".env.pass", problems)) tmpl.env_pass = *list;
    } else if (ek == "set") {
      if (!e.second.IsMap()) {
        problems.Add(e.second, path + ".env.set", "expected a mapping NAME: value");
        continue;
      }
      for (const auto& s : e.second) tmpl.env_set[s.first.Scalar()] = s.second.Scalar();
    } else {
      problems.Add(e.first, path + ".env." + ek, "unknown key; expected pass or set");
    }
  }
}

// A template's `fields` or `args` (`key`): names to value specs.
void ParseTemplateValueSpecs(const YAML::Node& v, const std::string& key, const std::string& path,
                             Problems& problems, ExecutorTemplate& tmpl) {
  if (!v.IsMap()) {
    problems.Add(v, path + "." + key, "expected a mapping of names to value specs");
    return;
  }
  for (const auto& f : v) {
    const std::string fname = f.first.Scalar();
    if (!std::regex_match(fname, EnvNameRegex())) {
      problems.Add(f.first, path + "." + key + "." + fname, "expected a name of letters, digits and '_'");
      continue;
    }
    if (auto spec = ParseValueSpec(f.second, path + "." + key + "." + fname, problems)) {
      (key == "fields" ? tmpl.fields : tmpl.args)[fname] = *spec;
    }
  }
}

// One key of a template's mapping.
void ParseTemplateKey(const YAML::Node& key_node, const YAML::Node& v, const std::string& path,
                      Problems& problems, ExecutorTemplate& tmpl) {
  const std::string k = key_node.Scalar();
  if (k == "description") {
    tmpl.description = v.IsScalar() ? v.Scalar() : "";
  } else if (k == "turns") {
    ParseBoolKey(v, path + ".turns", problems, &tmpl.turns);
  } else if (k == "flags") {
    ParseBoolKey(v, path + ".flags", problems, &tmpl.flags);
  } else if (k == "argv") {
    if (auto list = StringList(v, path + ".argv", problems)) {
      if (list->empty() || list->size() > kMaxArgv) {
        problems.Add(v, path + ".argv", "expected 1 to " + std::to_string(kMaxArgv) + " elements");
      } else {
        tmpl.argv = *list;
      }
    }
  } else if (k == "env") {
    ParseTemplateEnv(v, path, problems, tmpl);
  } else if (k == "trainer_fields") {
    if (auto list = StringList(v, path + ".trainer_fields", problems)) {
      for (const auto& f : *list) {
        if (FindTrainerField(f) == nullptr) {
          problems.Add(v, path + ".trainer_fields", f + " is not a field of the native trainer");
        }
      }
      tmpl.trainer_fields = *list;
    }
  } else if (k == "fields" || k == "args") {
    ParseTemplateValueSpecs(v, k, path, problems, tmpl);
  } else {
    problems.Add(key_node, path + "." + k,
                 "unknown key; expected description, argv, env, turns, flags, trainer_fields, fields, args");
  }
}

// Every placeholder of argv and env.set must be a built-in or a declared arg, and the
// program a fixed path or {python}.
void CheckTemplatePlaceholders(const YAML::Node& node, const std::string& path, Problems& problems,
                               const ExecutorTemplate& tmpl) {
  auto check = [&](const std::string& text, const std::string& where) {
    for (const auto& p : Placeholders(text)) {
      const auto& builtins = BuiltinPlaceholders();
      if (std::find(builtins.begin(), builtins.end(), p) == builtins.end() && !tmpl.AcceptsField(p)) {
        problems.Add(node, where, "placeholder {" + p + "} is neither built in (" + Join(builtins) +
                                      ") nor one of the template's args, fields or trainer_fields");
      }
    }
  };
  for (const auto& a : tmpl.argv) check(a, path + ".argv");
  for (const auto& [name, value] : tmpl.env_set) {
    if (!std::regex_match(name, EnvNameRegex())) {
      problems.Add(node, path + ".env.set", "not an environment variable name: " + name);
    }
    check(value, path + ".env.set." + name);
  }
  if (Placeholders(tmpl.argv[0]) != std::vector<std::string>{} && tmpl.argv[0] != "{python}") {
    problems.Add(node, path + ".argv", "the program must be a fixed path or {python}");
  }
}

// One entry of `templates`, or nothing when it is refused (the problems say why).
std::optional<ExecutorTemplate> ParseTemplate(const YAML::Node& name_node, const YAML::Node& body,
                                              Problems& problems) {
  ExecutorTemplate tmpl;
  tmpl.name = name_node.Scalar();
  tmpl.location = problems.Location(name_node);
  const std::string path = "templates." + tmpl.name;
  if (!std::regex_match(tmpl.name, NameRegex())) {
    problems.Add(name_node, path, "a template name is letters, digits, '.', '_', '-'");
    return std::nullopt;
  }
  if (tmpl.name == kSweepCommandName) {
    problems.Add(name_node, path,
                 std::string("reserved: ") + kSweepCommandName +
                     " is what `bakeoff local` calls a sweep's own command; choose another name");
    return std::nullopt;
  }
  if (!body.IsMap()) {
    problems.Add(body, path, "expected a mapping {argv, env, trainer_fields, fields, args}");
    return std::nullopt;
  }
  for (const auto& item : body) ParseTemplateKey(item.first, item.second, path, problems, tmpl);
  if (tmpl.argv.empty()) {
    problems.Add(body, path + ".argv", "missing; the program and its arguments");
    return std::nullopt;
  }
  CheckTemplatePlaceholders(body, path, problems, tmpl);
  return tmpl;
}

// The `templates` mapping, into catalog.templates.
void ParseTemplates(const YAML::Node& node, Problems& problems, ExecutorCatalog& catalog) {
  if (!node.IsMap()) {
    problems.Add(node, "templates", "expected a mapping of template names to templates");
    return;
  }
  if (node.size() > kMaxTemplates) {
    problems.Add(node, "templates", "more than " + std::to_string(kMaxTemplates) + " templates");
    return;
  }
  for (const auto& t : node) {
    if (auto tmpl = ParseTemplate(t.first, t.second, problems)) {
      std::string name = tmpl->name;
      catalog.templates.emplace(std::move(name), std::move(*tmpl));
    }
  }
}

}  // namespace

Result<ExecutorCatalog> ParseExecutorCatalog(const std::string& text, const std::string& source_name,
                                             const std::string& dir) {
  if (text.size() > kMaxCatalogBytes) {
    return Status::ResourceExhausted(source_name + ": the executors file is over " +
                                     std::to_string(kMaxCatalogBytes) + " bytes");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  Problems problems(source_name);
  ExecutorCatalog catalog;
  catalog.source = source_name;
  catalog.dir = dir;
  catalog.python = "python3";
  if (!root.IsMap()) {
    return Status::InvalidArgument(source_name + ": expected a mapping with python and templates");
  }
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key == "python") {
        if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
          problems.Add(kv.second, "python", "expected the path of the Python interpreter");
        } else {
          catalog.python = kv.second.Scalar();
        }
      } else if (key == "templates") {
        ParseTemplates(kv.second, problems, catalog);
      } else {
        problems.Add(kv.first, key, "unknown key; expected python or templates");
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!problems.empty()) return Status::InvalidArgument(problems.Text());
  if (const char* venv = std::getenv("BAKEOFF_VENV"); venv != nullptr && *venv != '\0') {
    catalog.python = std::string(venv) + "/bin/python";
  }
  return catalog;
}

Result<ExecutorCatalog> LoadExecutorCatalog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the executors file " + path);
  std::string text;
  text.resize(kMaxCatalogBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  std::string dir = (ec ? std::filesystem::path(path) : absolute).parent_path().string();
  return ParseExecutorCatalog(text, path, dir);
}

std::string FormatArgValue(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();  // true/false, numbers in shortest round-trip form, compact JSON
}

namespace {

// The value a trial gives field `name` of `tmpl`: the trial's configuration, else the
// template's default for it (its own spec, else the trainer's table), checked against
// the template (a sweep's own command: any value). NotFound when there is none.
Result<json> TrialFieldValue(const ExecutorTemplate& tmpl, const std::string& name, const json& fields) {
  if (fields.is_object() && fields.contains(name) && !fields[name].is_null()) {
    return tmpl.CheckField(name, fields[name]);
  }
  if (auto it = tmpl.fields.find(name); it != tmpl.fields.end() && !it->second.default_value.is_null()) {
    return it->second.default_value;
  }
  if (std::find(tmpl.trainer_fields.begin(), tmpl.trainer_fields.end(), name) != tmpl.trainer_fields.end()) {
    if (const TrainerField* field = FindTrainerField(name)) return NormalizeTrainerValue(*field, field->default_value);
  }
  return Status::NotFound("template " + tmpl.name + " needs the value of {" + name +
                          "}, which the trial's configuration does not have; set it in the sweep's workload "
                          "or parameters");
}

}  // namespace

Result<std::string> RenderTemplateString(const std::string& text, const ExecutorTemplate& tmpl,
                                         const ArgvContext& context, const json& args) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t open = text.find('{', pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    std::size_t close = text.find('}', open);
    if (close == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    out += text.substr(pos, open - pos);
    const std::string name = text.substr(open + 1, close - open - 1);
    std::string value;
    if (name == "python") value = context.python;
    else if (name == "dir") value = context.dir;
    else if (name == "config") value = context.config;
    else if (name == "trial_dir") value = context.trial_dir;
    else if (name == "output_dir") value = context.output_dir;
    else if (name == "cache") value = context.cache;
    else if (name == "data_root") {
      if (context.data_root.empty()) {
        return Status::InvalidArgument("template " + tmpl.name + " needs {data_root}, but this worker has no --data-root");
      }
      value = context.data_root;
    } else if (auto spec = tmpl.args.find(name); spec != tmpl.args.end()) {
      // An axis (or workload field) of the arg's name wins over command.args.
      json given = context.fields.is_object() && context.fields.contains(name) ? context.fields[name]
                   : args.is_object() && args.contains(name)                  ? args[name]
                                                                              : spec->second.default_value;
      if (given.is_null()) return Status::InvalidArgument("template " + tmpl.name + ": args." + name + " is required");
      auto checked = spec->second.Check(given);
      if (!checked.ok()) return Status::InvalidArgument("args." + name + ": " + checked.status().message());
      value = FormatArgValue(*checked);
    } else if (tmpl.from_sweep || tmpl.AcceptsField(name)) {
      auto field = TrialFieldValue(tmpl, name, context.fields);
      if (!field.ok()) return Status::InvalidArgument(name + ": " + field.status().message());
      value = FormatArgValue(*field);
    } else {
      return Status::InvalidArgument("template " + tmpl.name + ": unknown placeholder {" + name + "}");
    }
    out += value;
    pos = close + 1;
  }
  return out;
}

Result<std::vector<std::string>> RenderArgv(const ExecutorTemplate& tmpl, const ArgvContext& context,
                                            const json& args) {
  if (args.is_object()) {
    for (const auto& [name, _] : args.items()) {
      if (!tmpl.args.count(name)) {
        std::vector<std::string> names;
        for (const auto& [n, __] : tmpl.args) names.push_back(n);
        return Status::InvalidArgument("args." + name + " is not an arg of template " + tmpl.name +
                                       " (its args: " + Join(names) + ")");
      }
    }
  }
  std::vector<std::string> argv;
  for (const auto& a : tmpl.argv) {
    auto rendered = RenderTemplateString(a, tmpl, context, args);
    if (!rendered.ok()) return rendered.status();
    argv.push_back(std::move(*rendered));
  }
  if (!tmpl.flags) return argv;
  // W&B's ${args}: each parameter no placeholder took, as --name=value (one element, so
  // a value can never become an option of its own).
  const std::set<std::string> taken = tmpl.PlaceholderFields();
  for (const auto& name : context.flag_fields) {
    if (taken.count(name) || !context.fields.is_object() || !context.fields.contains(name)) continue;
    if (!tmpl.AcceptsField(name)) {
      return Status::InvalidArgument("parameter " + name + " is not a field of template " + tmpl.name +
                                     " (its fields: " + Join(tmpl.FieldNames()) + ")");
    }
    auto value = tmpl.CheckField(name, context.fields[name]);
    if (!value.ok()) return Status::InvalidArgument("parameter " + name + ": " + value.status().message());
    if (argv.size() >= kMaxArgv + 1024) return Status::ResourceExhausted("too many flags for template " + tmpl.name);
    argv.push_back("--" + name + "=" + FormatArgValue(*value));
  }
  return argv;
}

std::string DefaultExecutorCatalogPath() {
  if (const char* env = std::getenv("BAKEOFF_EXECUTORS"); env != nullptr && *env != '\0') return env;
#ifdef BAKEOFF_SOURCE_DIR
  const std::string shipped = std::string(BAKEOFF_SOURCE_DIR) + "/experiments/executors.yaml";
  std::error_code ec;
  if (std::filesystem::exists(shipped, ec)) return shipped;
#endif
  return "";
}

}  // namespace bakeoff::spec
