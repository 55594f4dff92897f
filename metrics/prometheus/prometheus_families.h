// Helpers to build Prometheus metric families by hand, for collectors whose series are
// computed at scrape time (node figures, the coordinator's trial and worker counts)
// rather than kept in a prometheus::Registry. Names must follow docs/metrics.md.
// Thread-safety: pure functions on values.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>

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

// bakeoff_build_info{component, version, commit} 1, as Prometheus exporters expose
// their build (docs/metrics.md).
inline prometheus::MetricFamily BuildInfoFamily(const std::string& component) {
  auto family = MakeFamily("bakeoff_build_info", "1; carries the version and commit of this build.",
                           prometheus::MetricType::Gauge);
  AddSample(family, {{"component", component}, {"version", kBakeoffVersion}, {"commit", kBakeoffGitCommit}}, 1);
  return family;
}

}  // namespace bakeoff::metrics
