// AnswerComparisons: which pairs of variants a sweep's answer compares. One rule for the
// report (its answer sentences and comparison tables) and the coordinator (adaptive
// repeats stop once every comparison the answer reports has stopped), so that the
// repeats a sweep runs serve the comparisons it prints.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace bakeoff::spec {

// A variant as the rule sees it: its key, its varying axes' values as they appear in
// keys (CanonicalValue), and its baseline counterpart ("" when none, or excluded).
struct ComparedVariant {
  std::string key;
  std::map<std::string, std::string> params;
  std::string counterpart_key;
};

struct AnswerComparison {
  std::string axis;       // the one axis that differs; "" for a variant against its counterpart
  std::string value;      // the variant's value of `axis` ("" when axis is "")
  std::string reference;  // the baseline's value of `axis` ("" when axis is "")
  std::string held;       // the other axes' values, "zero_stage=2" ("" when axis is "")
  std::string variant_key;
  std::string counterpart_key;
};

// With a baseline over two or more axes that each take two or more values among
// `variants`: each such axis on its own, in `axis_order` (the sweep's axes as written), every
// variant whose value of it is not the baseline's against the same variant with only that
// axis at the baseline's value (compile modes within each ZeRO stage, and ZeRO stages
// within each compile mode). Otherwise every variant with a counterpart against it.
// `variants` in sweep order; the result follows axis order, then variant order.
std::vector<AnswerComparison> AnswerComparisons(const std::vector<std::string>& axis_order,
                                                const std::map<std::string, std::string>& baseline,
                                                const std::vector<ComparedVariant>& variants);

// "axis=value,..." over `axis_order` (then any other param in name order), leaving out
// `skip_axis`: how the rule matches a variant with its counterpart, and AnswerComparison::held.
std::string SettingKey(const std::vector<std::string>& axis_order, const std::map<std::string, std::string>& params,
                       const std::string& skip_axis = "");

}  // namespace bakeoff::spec
