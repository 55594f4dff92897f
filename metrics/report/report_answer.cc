// The report's answer: one sentence per comparison, in the form of the question Bakeoff
// exists to answer (docs/question.md): the speedup with its interval and verdict, the
// peak memory change, the warm-up cost, the break-even (only for a significant speedup),
// loss parity, and an outcome that differs (out of memory). Declared in
// report_renderer.h; every format puts these sentences first.
#include <cmath>
#include <string>
#include <vector>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

// The two sides of one comparison as a reader names them.
struct Sides {
  std::string held;     // "zero_stage=2", or empty
  std::string variant;  // "compile_mode=default"
  std::string counterpart;
  const VariantReport* v = nullptr;
  const VariantReport* cp = nullptr;
};

std::string Join(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [name, value] : params) out += (out.empty() ? "" : ",") + name + "=" + value;
  return out;
}

// A counterpart comparison names only the axes that differ; the rest are held.
Sides CounterpartSides(const VariantReport& v, const VariantReport* cp) {
  Sides s{"", v.key, v.counterpart_key, &v, cp};
  if (cp == nullptr) return s;
  std::map<std::string, std::string> held, mine, theirs;
  for (const auto& [name, value] : v.params) {
    auto it = cp->params.find(name);
    if (it != cp->params.end() && it->second == value) {
      held[name] = value;
    } else {
      mine[name] = value;
      if (it != cp->params.end()) theirs[name] = it->second;
    }
  }
  s.held = Join(held);
  s.variant = Join(mine);
  s.counterpart = Join(theirs);
  return s;
}

bool RanOutOfMemory(const VariantReport* v) {
  return v != nullptr && v->CountOf(protocol::Outcome::kOom) > 0;
}

std::string VerdictWords(const Comparison& c) {
  if (!c.worker_confound.empty()) return "no verdict: confounded with workers";
  switch (c.verdict) {
    case Verdict::kFaster: return "faster";
    case Verdict::kSlower: return "slower";
    case Verdict::kNoMeasurableDifference: return "no measurable difference";
    case Verdict::kUnclear:
      return c.repeats_needed ? "no verdict yet: " + std::to_string(*c.repeats_needed) + " repeats needed"
                              : std::string("no verdict yet");
  }
  return "no verdict yet";
}

// The warm-up of each compile-cache state the variant's trials paid, with its break-even
// (only for a significant speedup), and which state the sweep did not measure.
std::string CompileCostClause(const Comparison& c) {
  std::string out;
  bool cold = false, warm = false;
  std::vector<std::string> unmatched;  // states the counterpart has no trial in
  for (const CompileCost& cost : c.compile_costs) {
    cold = cold || cost.cache == "cold";
    warm = warm || cost.cache == "warm";
    if (!cost.warmup_delta_s) {
      if (!cost.note.empty()) unmatched.push_back(cost.cache);
      continue;
    }
    double w = *cost.warmup_delta_s;
    std::string what = cost.cache == "cold"   ? "compiling cold"
                       : cost.cache == "warm" ? "with a warm compile cache"
                                              : "with a partly warm cache";
    out += std::string(out.empty() ? "spends " : "; ") + FormatSeconds(std::fabs(w)) +
           (w >= 0 ? " more" : " less") + " in warm-up " + what + " (" + std::to_string(cost.trials) +
           (cost.trials == 1 ? " trial" : " trials");
    if (c.verdict == Verdict::kFaster && cost.break_even) {
      out += cost.break_even_steps ? ", paid back after " + *cost.break_even : ", paid back " + *cost.break_even;
    }
    out += ")";
  }
  for (const std::string& cache : unmatched) {
    out += std::string(out.empty() ? "" : "; ") + "its " + cache + " compile is not compared (the counterpart has no " +
           cache + " trial)";
  }
  if (out.empty()) return "spends an unmeasured time in warm-up";
  if (cold && !warm) out += "; a warm cache was not measured";
  if (warm && !cold) out += "; a cold compile was not measured (compile_cache: cold measures it)";
  return out;
}

// What the compared figures say, as clauses after the speedup.
std::string Costs(const Comparison& c, const Sides& s) {
  std::vector<std::string> clauses;
  if (c.memory_relative) {
    double m = *c.memory_relative;
    clauses.push_back(std::fabs(m) < 0.005 ? std::string("uses the same peak memory")
                                           : "uses " + FormatPercent(std::fabs(m)) +
                                                 (m > 0 ? " more" : " less") + " peak memory");
  }
  if (!c.compile_costs.empty()) {
    clauses.push_back(CompileCostClause(c));
  } else if (c.warmup_delta_s) {
    double w = *c.warmup_delta_s;
    std::string clause = "spends " + FormatSeconds(std::fabs(w)) + (w >= 0 ? " more" : " less") + " in warm-up";
    // Only a speedup its interval backs has a break-even (docs/statistics.md).
    if (c.verdict == Verdict::kFaster && c.break_even) {
      clause += c.break_even_steps ? ", and pays that back after " + *c.break_even
                                   : ", and pays that back " + *c.break_even;
    }
    clauses.push_back(clause);
  }
  std::string out;
  for (const std::string& clause : clauses) out += ", " + clause;
  out += ".";
  if (c.loss_parity_expected && c.loss_max_deviation) {
    out += c.loss_flagged ? " Its loss curve deviates " + FormatPercent(*c.loss_max_deviation) + " from " +
                                s.counterpart + "'s (flagged)."
                          : " Its loss curve matches " + s.counterpart + " within " +
                                FormatPercent(*c.loss_max_deviation) + ".";
  }
  return out;
}

std::string Sentence(const Comparison& c, const Sides& s, double confidence) {
  using S = Comparison::Status;
  const std::string with = s.held.empty() ? "" : "With " + s.held + ", ";
  switch (c.status) {
    case S::kCompared: {
      std::string ci = FormatInterval(c.speedup);
      std::string ratio = c.verdict == Verdict::kFaster || c.verdict == Verdict::kSlower
                              ? FormatRatioAwayFromOne(c.speedup.value)
                              : FormatRatio(c.speedup.value);
      return with + s.variant + " is " + ratio +
             (ci.empty() ? std::string(" (no interval)")
                         : " (" + FormatNumber(confidence * 100, 2) + "% CI " + ci + ")") +
             " the tokens/s of " + s.counterpart + ": " + VerdictWords(c) + Costs(c, s);
    }
    case S::kVariantFailed:
      if (RanOutOfMemory(s.v) && !RanOutOfMemory(s.cp)) {
        return with + s.variant + " runs out of memory; " + s.counterpart + " does not.";
      }
      return with + s.variant + " fails (" + OutcomeCounts(*s.v) + ") where " + s.counterpart + " succeeds.";
    case S::kCounterpartFailed:
      if (RanOutOfMemory(s.cp) && !RanOutOfMemory(s.v)) {
        return with + s.counterpart + " runs out of memory; " + s.variant + " does not.";
      }
      return with + s.variant + " succeeds where " + s.counterpart + " fails (" +
             (s.cp != nullptr ? OutcomeCounts(*s.cp) : std::string("no trials")) + ").";
    case S::kBothFailed:
      return with + "neither " + s.variant + " nor " + s.counterpart + " succeeded.";
    case S::kPending:
      return with + s.variant + " against " + s.counterpart + ": trials not finished yet.";
    case S::kIsBaseline:
    case S::kExcluded:
      return "";
    default:
      return with + s.variant + " against " + s.counterpart + ": " + c.note + ".";
  }
}

}  // namespace

std::vector<std::string> AnswerSentences(const Report& report) {
  std::vector<std::string> out;
  const double confidence = report.options.confidence;
  if (!report.axis_comparisons.empty()) {
    for (const AxisComparison& a : report.axis_comparisons) {
      Sides s{a.held, a.axis + "=" + a.value, a.axis + "=" + a.reference,
              report.FindVariant(a.variant_key), report.FindVariant(a.counterpart_key)};
      std::string sentence = Sentence(a.comparison, s, confidence);
      if (!sentence.empty()) out.push_back(std::move(sentence));
    }
    return out;
  }
  for (const VariantReport& v : report.variants) {
    std::string sentence =
        Sentence(v.comparison, CounterpartSides(v, report.FindVariant(v.counterpart_key)), confidence);
    if (!sentence.empty()) out.push_back(std::move(sentence));
  }
  return out;
}

}  // namespace bakeoff::metrics
