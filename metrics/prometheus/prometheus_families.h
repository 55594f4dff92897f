// Helpers to build Prometheus metric families: by hand, for collectors whose series are
// computed at scrape time (node figures, the coordinator's trial and worker counts),
// and registered in a prometheus::Registry for the series kept there (RegisterFamily,
// RegisterSeries). Names must follow docs/metrics.md.
// Thread-safety: pure functions on values.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "protocol/version.h"

namespace bakeoff::metrics {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

inline prometheus::MetricFamily MakeFamily(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

// Appends one sample; the value goes to the field of the family's type.
inline void AddSample(prometheus::MetricFamily& family, const LabelPairs& labels, double value) {
  prometheus::ClientMetric metric;
  for (const auto& [name, label_value] : labels) metric.label.push_back({name, label_value});
  // Sorted like prometheus-cpp's own families, so the exposition is stable.
  std::sort(metric.label.begin(), metric.label.end());
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else if (family.type == prometheus::MetricType::Gauge) {
    metric.gauge.value = value;
  } else {
    metric.untyped.value = value;
  }
  family.metric.push_back(std::move(metric));
}

// Registers the family `name` of Metric (prometheus::Counter, Gauge or Histogram) in
// `registry`, with its help text (docs/metrics.md).
template <typename Metric>
prometheus::Family<Metric>& RegisterFamily(prometheus::Registry& registry, const std::string& name,
                                           const std::string& help) {
  auto builder = [] {
    if constexpr (std::is_same_v<Metric, prometheus::Counter>) return prometheus::BuildCounter();
    else if constexpr (std::is_same_v<Metric, prometheus::Gauge>) return prometheus::BuildGauge();
    else return prometheus::BuildHistogram();
  }();
  return builder.Name(name).Help(help).Register(registry);
}

// A family with its one series, which has no labels (a counter or gauge).
template <typename Metric>
Metric& RegisterSeries(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return RegisterFamily<Metric>(registry, name, help).Add({});
}

// bakeoff_build_info{component, version, commit} 1, as Prometheus exporters expose
// their build (docs/metrics.md).
inline prometheus::MetricFamily BuildInfoFamily(const std::string& component) {
  auto family = MakeFamily("bakeoff_build_info", "1; carries the version and commit of this build.",
                           prometheus::MetricType::Gauge);
  AddSample(family, {{"component", component}, {"version", kBakeoffVersion}, {"commit", kBakeoffGitCommit}}, 1);
  return family;
}

}  // namespace bakeoff::metrics
