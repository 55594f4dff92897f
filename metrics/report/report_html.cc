// The HTML rendering of a report: one self-contained page (inline CSS, inline SVG
// charts, no scripts, no external URL) that a browser opens from disk or the
// coordinator serves as is (report_renderer.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

constexpr const char* kFaster = "#1a7f37";
constexpr const char* kSlower = "#cf222e";
constexpr const char* kUnclear = "#6e7781";
constexpr const char* kVariantColor = "#0969da";
constexpr const char* kBaselineColor = "#8c959f";

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", x);
  return buffer;
}

// A linear scale from [lo, hi] to [px_lo, px_hi].
struct Scale {
  double lo, hi, px_lo, px_hi;
  double operator()(double x) const {
    if (hi <= lo) return px_lo;
    return px_lo + (x - lo) / (hi - lo) * (px_hi - px_lo);
  }
};

// About five round tick values covering [lo, hi].
std::vector<double> Ticks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / 5;
  double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

int LabelWidth(const std::vector<std::string>& labels) {
  std::size_t longest = 8;
  for (const auto& l : labels) longest = std::max(longest, l.size());
  return static_cast<int>(std::min<std::size_t>(longest, 60) * 7 + 16);
}

std::string Truncate(const std::string& label) {
  return label.size() <= 60 ? label : label.substr(0, 57) + "...";
}

void XAxis(std::ostringstream& out, const Scale& x, double y, const std::vector<double>& ticks,
           const std::string& suffix, double grid_top) {
  out << "<line x1=\"" << Num(x.px_lo) << "\" y1=\"" << Num(y) << "\" x2=\"" << Num(x.px_hi)
      << "\" y2=\"" << Num(y) << "\" class=\"axis\"/>\n";
  for (double t : ticks) {
    out << "<line x1=\"" << Num(x(t)) << "\" y1=\"" << Num(grid_top) << "\" x2=\"" << Num(x(t))
        << "\" y2=\"" << Num(y) << "\" class=\"grid\"/>\n";
    out << "<text x=\"" << Num(x(t)) << "\" y=\"" << Num(y + 16)
        << "\" text-anchor=\"middle\" class=\"tick\">" << Escape(FormatNumber(t, 3) + suffix)
        << "</text>\n";
  }
}

// The title of an axis: what it measures and its unit. `rotated` writes it upwards,
// centred on (x, y), for a vertical axis.
void AxisLabel(std::ostringstream& out, double x, double y, const std::string& text, bool rotated = false) {
  out << "<text x=\"" << Num(x) << "\" y=\"" << Num(y) << "\" text-anchor=\"middle\" class=\"axis-label\"";
  if (rotated) out << " transform=\"rotate(-90 " << Num(x) << " " << Num(y) << ")\"";
  out << ">" << Escape(text) << "</text>\n";
}

}  // namespace

std::string RenderRatioChartSvg(const std::string& id, const std::string& title,
                                const std::vector<RatioChartRow>& rows, const std::string& axis_label) {
  if (rows.empty()) return "";
  double lo = 1, hi = 1;
  for (const RatioChartRow& r : rows) {
    if (!r.ratio) continue;
    lo = std::min({lo, r.ratio->value, r.ratio->low.value_or(r.ratio->value)});
    hi = std::max({hi, r.ratio->value, r.ratio->high.value_or(r.ratio->value)});
  }
  double pad = std::max(0.02, (hi - lo) * 0.08);
  lo = std::max(0.0, lo - pad);
  hi += pad;
  std::vector<std::string> labels;
  for (const RatioChartRow& r : rows) labels.push_back(Truncate(r.label));
  int label_w = LabelWidth(labels), plot_w = 520, row_h = 26, top = 10;
  int height = top + row_h * static_cast<int>(rows.size()) + 56;
  int width = label_w + plot_w + 190;
  Scale x{lo, hi, static_cast<double>(label_w), static_cast<double>(label_w + plot_w)};
  std::ostringstream out;
  out << "<svg class=\"chart\" id=\"" << Escape(id) << "\" role=\"img\" width=\"" << width << "\" height=\""
      << height << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  out << "<title>" << Escape(title) << "</title>\n";
  double axis_y = top + row_h * static_cast<double>(rows.size()) + 4;
  XAxis(out, x, axis_y, Ticks(lo, hi), "x", top);
  AxisLabel(out, label_w + plot_w / 2.0, axis_y + 34, axis_label);
  out << "<line x1=\"" << Num(x(1)) << "\" y1=\"" << top << "\" x2=\"" << Num(x(1)) << "\" y2=\""
      << Num(axis_y) << "\" class=\"unity\"/>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RatioChartRow& r = rows[i];
    double cy = top + row_h * (i + 0.5);
    out << "<text x=\"" << label_w - 8 << "\" y=\"" << Num(cy + 4)
        << "\" text-anchor=\"end\" class=\"label\">" << Escape(labels[i]) << "</text>\n";
    if (!r.ratio) {
      out << "<text x=\"" << label_w + 6 << "\" y=\"" << Num(cy + 4) << "\" class=\"missing\">"
          << Escape(r.note.size() > 90 ? r.note.substr(0, 87) + "..." : r.note) << "</text>\n";
      continue;
    }
    const RatioFigure& ratio = *r.ratio;
    const char* color = r.no_difference || !ratio.low ? kUnclear : (ratio.value >= 1 ? kFaster : kSlower);
    if (ratio.low && ratio.high) {
      double x1 = x(*ratio.low), x2 = x(*ratio.high);
      out << "<line x1=\"" << Num(x1) << "\" y1=\"" << Num(cy) << "\" x2=\"" << Num(x2) << "\" y2=\""
          << Num(cy) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
      for (double xe : {x1, x2}) {
        out << "<line x1=\"" << Num(xe) << "\" y1=\"" << Num(cy - 6) << "\" x2=\"" << Num(xe)
            << "\" y2=\"" << Num(cy + 6) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
      }
    }
    out << "<circle cx=\"" << Num(x(ratio.value)) << "\" cy=\"" << Num(cy) << "\" r=\"5\" fill=\""
        << color << "\"/>\n";
    std::string text = FormatRatio(ratio.value);
    std::string ci = FormatInterval(ratio);
    if (!ci.empty()) text += " [" + ci + "]";
    out << "<text x=\"" << label_w + plot_w + 10 << "\" y=\"" << Num(cy + 4) << "\" class=\"value\">"
        << Escape(text) << "</text>\n";
  }
  out << "</svg>\n";
  return out.str();
}

namespace {

std::string SpeedupChart(const Report& report) {
  std::vector<RatioChartRow> rows;
  for (const VariantReport& v : report.variants) {
    if (v.is_baseline || v.excluded) continue;
    RatioChartRow row;
    row.label = v.key;
    const Comparison& c = v.comparison;
    if (c.status == Comparison::Status::kCompared) {
      row.ratio = c.speedup;
      row.no_difference = c.verdict == Verdict::kNoMeasurableDifference || c.verdict == Verdict::kUnclear;
    } else {
      row.note = c.note;
    }
    rows.push_back(std::move(row));
  }
  return RenderRatioChartSvg("chart-speedup",
                             "Speedup per variant against its baseline counterpart, with " +
                                 FormatNumber(report.options.confidence * 100, 2) + "% interval whiskers",
                             rows, "speedup: tokens/s of the variant over its counterpart (x)");
}

std::string MemoryChart(const Report& report) {
  std::vector<const VariantReport*> rows;
  std::int64_t max_bytes = 0;
  for (const VariantReport& v : report.variants) {
    if (!v.peak_mem_bytes) continue;
    rows.push_back(&v);
    max_bytes = std::max(max_bytes, *v.peak_mem_bytes);
  }
  if (rows.empty() || max_bytes <= 0) return "";
  if (report.options.memory_budget_bytes) max_bytes = std::max(max_bytes, *report.options.memory_budget_bytes);
  std::vector<std::string> labels;
  for (const VariantReport* v : rows) labels.push_back(Truncate(v->key));
  int label_w = LabelWidth(labels), plot_w = 520, row_h = 24, top = 10;
  int height = top + row_h * static_cast<int>(rows.size()) + 56;
  int width = label_w + plot_w + 190;
  // Axis in GiB when the peaks are large, MiB otherwise.
  double unit = max_bytes >= (1LL << 30) ? static_cast<double>(1LL << 30) : static_cast<double>(1LL << 20);
  std::string suffix = unit > (1 << 20) ? " GiB" : " MiB";
  double hi = static_cast<double>(max_bytes) / unit * 1.05;
  Scale x{0, hi, static_cast<double>(label_w), static_cast<double>(label_w + plot_w)};
  std::ostringstream out;
  out << "<svg class=\"chart\" id=\"chart-memory\" role=\"img\" width=\"" << width << "\" height=\""
      << height << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  out << "<title>Peak memory of the largest rank per variant</title>\n";
  double axis_y = top + row_h * static_cast<double>(rows.size()) + 4;
  XAxis(out, x, axis_y, Ticks(0, hi), suffix, top);
  AxisLabel(out, label_w + plot_w / 2.0, axis_y + 34, "peak memory, largest rank (" + suffix.substr(1) + ")");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const VariantReport& v = *rows[i];
    double y = top + row_h * static_cast<double>(i);
    double w = x(static_cast<double>(*v.peak_mem_bytes) / unit) - x(0);
    out << "<text x=\"" << label_w - 8 << "\" y=\"" << Num(y + row_h / 2.0 + 4)
        << "\" text-anchor=\"end\" class=\"label\">" << Escape(labels[i]) << "</text>\n";
    out << "<rect x=\"" << label_w << "\" y=\"" << Num(y + 4) << "\" width=\"" << Num(w)
        << "\" height=\"" << row_h - 8 << "\" fill=\"" << (v.is_baseline ? kBaselineColor : kVariantColor)
        << "\"/>\n";
    std::string text = FormatBytes(*v.peak_mem_bytes);
    if (v.comparison.memory_relative) text += " (" + FormatSignedPercent(*v.comparison.memory_relative) + ")";
    out << "<text x=\"" << label_w + plot_w + 10 << "\" y=\"" << Num(y + row_h / 2.0 + 4)
        << "\" class=\"value\">" << Escape(text) << "</text>\n";
  }
  if (report.options.memory_budget_bytes) {
    double bx = x(static_cast<double>(*report.options.memory_budget_bytes) / unit);
    out << "<line x1=\"" << Num(bx) << "\" y1=\"" << top << "\" x2=\"" << Num(bx) << "\" y2=\""
        << Num(axis_y) << "\" class=\"budget\"/>\n";
    out << "<text x=\"" << Num(bx - 4) << "\" y=\"" << Num(axis_y - 4)
        << "\" text-anchor=\"end\" class=\"budget-label\">budget</text>\n";
  }
  out << "</svg>\n";
  return out.str();
}

// The step-time axis ends at fences derived from the boxes and whiskers, so that one
// stalled step (a 0.15 s step among 5 ms ones) cannot squash every box into a line:
// per variant, p10 - 3 x (p90 - p10) and p90 + 3 x (p90 - p10); the axis spans the widest
// of those. Boxes and whiskers always lie inside (each variant's own fence contains its
// p10..p90), so only min and max dots are ever clipped; a clipped dot is drawn as a
// triangle on the axis edge with its true value in its tooltip.
struct StepAxis {
  double lo = 0, hi = 0;
  bool clipped_low = false, clipped_high = false;
};

StepAxis StepTimeAxis(const std::vector<const VariantReport*>& rows) {
  double fence_lo = INFINITY, fence_hi = 0, data_lo = INFINITY, data_hi = 0;
  for (const VariantReport* v : rows) {
    const StepDistribution& d = v->step_times;
    double spread = std::max(d.p90 - d.p10, d.p50 * 0.01);
    fence_lo = std::min(fence_lo, d.p10 - 3 * spread);
    fence_hi = std::max(fence_hi, d.p90 + 3 * spread);
    data_lo = std::min(data_lo, d.min);
    data_hi = std::max(data_hi, d.max);
  }
  StepAxis axis;
  axis.clipped_low = data_lo < fence_lo;
  axis.clipped_high = data_hi > fence_hi;
  double lo = axis.clipped_low ? fence_lo : data_lo;
  double hi = axis.clipped_high ? fence_hi : data_hi;
  double pad = std::max((hi - lo) * 0.05, hi * 0.01);
  axis.lo = std::max(0.0, lo - (axis.clipped_low ? 0 : pad));
  axis.hi = hi + (axis.clipped_high ? 0 : pad);
  if (axis.lo <= 0) axis.clipped_low = data_lo < 0;  // the axis starts at 0: nothing below
  return axis;
}

std::string StepTimeChart(const Report& report) {
  std::vector<const VariantReport*> rows;
  for (const VariantReport& v : report.variants) {
    if (v.step_times.count == 0) continue;
    rows.push_back(&v);
  }
  if (rows.empty()) return "";
  StepAxis axis = StepTimeAxis(rows);
  std::vector<std::string> labels;
  for (const VariantReport* v : rows) labels.push_back(Truncate(v->key));
  int label_w = LabelWidth(labels), plot_w = 520, row_h = 26, top = 10;
  int height = top + row_h * static_cast<int>(rows.size()) + 66;
  int width = label_w + plot_w + 190;
  Scale x{axis.lo, axis.hi, static_cast<double>(label_w), static_cast<double>(label_w + plot_w)};
  std::ostringstream out;
  out << "<svg class=\"chart\" id=\"chart-steps\" role=\"img\" width=\"" << width << "\" height=\""
      << height << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  out << "<title>Distribution of measured step times per variant: box p25-p75, line at the "
         "median, whiskers p10-p90, dots at min and max (triangles: beyond the axis)</title>\n";
  double axis_y = top + row_h * static_cast<double>(rows.size()) + 4;
  XAxis(out, x, axis_y, Ticks(axis.lo, axis.hi), " s", top);
  AxisLabel(out, label_w + plot_w / 2.0, axis_y + 34, "seconds per step (s)");
  int clipped = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const StepDistribution& d = rows[i]->step_times;
    const char* color = rows[i]->is_baseline ? kBaselineColor : kVariantColor;
    double cy = top + row_h * (i + 0.5);
    out << "<text x=\"" << label_w - 8 << "\" y=\"" << Num(cy + 4)
        << "\" text-anchor=\"end\" class=\"label\">" << Escape(labels[i]) << "</text>\n";
    out << "<line x1=\"" << Num(x(d.p10)) << "\" y1=\"" << Num(cy) << "\" x2=\"" << Num(x(d.p90))
        << "\" y2=\"" << Num(cy) << "\" stroke=\"" << color << "\"/>\n";
    out << "<rect x=\"" << Num(x(d.p25)) << "\" y=\"" << Num(cy - 7) << "\" width=\""
        << Num(std::max(1.0, x(d.p75) - x(d.p25))) << "\" height=\"14\" fill=\"" << color
        << "\" fill-opacity=\"0.25\" stroke=\"" << color << "\"/>\n";
    out << "<line x1=\"" << Num(x(d.p50)) << "\" y1=\"" << Num(cy - 7) << "\" x2=\"" << Num(x(d.p50))
        << "\" y2=\"" << Num(cy + 7) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    for (auto [e, name] : {std::pair{d.min, "min"}, std::pair{d.max, "max"}}) {
      if (e > axis.hi || e < axis.lo) {
        // A triangle on the edge, pointing the way the value lies; its <title> is the tooltip.
        ++clipped;
        bool high = e > axis.hi;
        double tip = high ? x.px_hi + 2 : x.px_lo - 2, base = high ? tip - 9 : tip + 9;
        out << "<polygon class=\"clipped\" data-value=\"" << Escape(FormatNumber(e, 6)) << "\" points=\""
            << Num(tip) << "," << Num(cy) << " " << Num(base) << "," << Num(cy - 6) << " " << Num(base) << ","
            << Num(cy + 6) << "\" fill=\"" << kSlower << "\"><title>" << name << " " << Escape(FormatSeconds(e))
            << " per step, beyond the axis (" << (high ? "which ends at " : "which starts at ")
            << Escape(FormatSeconds(high ? axis.hi : axis.lo)) << ")</title></polygon>\n";
        continue;
      }
      out << "<circle cx=\"" << Num(x(e)) << "\" cy=\"" << Num(cy) << "\" r=\"2\" fill=\"" << color
          << "\"/>\n";
    }
    std::string text = "median " + FormatSeconds(d.p50) + ", n=" + std::to_string(d.count);
    if (d.max > axis.hi) text += ", max " + FormatSeconds(d.max);
    out << "<text x=\"" << label_w + plot_w + 10 << "\" y=\"" << Num(cy + 4) << "\" class=\"value\">"
        << Escape(text) << "</text>\n";
  }
  if (clipped > 0) {
    out << "<text x=\"" << label_w + plot_w << "\" y=\"" << Num(axis_y + 54)
        << "\" text-anchor=\"end\" class=\"flag\">" << clipped
        << (clipped == 1 ? " point lies" : " points lie")
        << " beyond the axis: red triangles at its edge (hover for the value)</text>\n";
  }
  out << "</svg>\n";
  return out.str();
}

// One variant's loss curve over its counterpart's, `width` wide (the report passes the
// width of its other charts so that this one is never the smallest) and 300 px tall.
std::string LossChart(const VariantReport& v, const VariantReport& cp, double threshold, int width) {
  const int height = 300, left = 70, right = 16, top = 30, bottom = 50;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto* curve : {&v.loss_curve, &cp.loss_curve}) {
    for (const auto& [step, loss] : *curve) {
      x_lo = std::min(x_lo, static_cast<double>(step));
      x_hi = std::max(x_hi, static_cast<double>(step));
      y_lo = std::min(y_lo, loss);
      y_hi = std::max(y_hi, loss);
    }
  }
  if (!std::isfinite(x_lo) || !std::isfinite(y_lo)) return "";
  double y_pad = std::max((y_hi - y_lo) * 0.08, std::fabs(y_hi) * 0.005 + 1e-9);
  y_lo -= y_pad;
  y_hi += y_pad;
  if (!(x_hi > x_lo)) x_hi = x_lo + 1;
  Scale x{x_lo, x_hi, static_cast<double>(left), static_cast<double>(width - right)};
  Scale y{y_lo, y_hi, static_cast<double>(height - bottom), static_cast<double>(top)};
  auto polyline = [&](const std::vector<std::pair<std::int64_t, double>>& curve) {
    std::string points;
    for (const auto& [step, loss] : curve) {
      points += Num(x(static_cast<double>(step))) + "," + Num(y(loss)) + " ";
    }
    return points;
  };
  const Comparison& c = v.comparison;
  std::ostringstream out;
  out << "<figure class=\"loss\"><svg class=\"chart loss-chart\" role=\"img\" width=\"" << width
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  out << "<title>Mean loss per measured step: " << Escape(v.key) << " over its counterpart "
      << Escape(cp.key) << "</title>\n";
  out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width - left - right
      << "\" height=\"" << height - top - bottom << "\" class=\"frame\"/>\n";
  for (double t : Ticks(y_lo, y_hi)) {
    out << "<line x1=\"" << left << "\" y1=\"" << Num(y(t)) << "\" x2=\"" << width - right << "\" y2=\""
        << Num(y(t)) << "\" class=\"grid\"/>\n";
    out << "<text x=\"" << left - 4 << "\" y=\"" << Num(y(t) + 4)
        << "\" text-anchor=\"end\" class=\"tick\">" << Escape(FormatNumber(t, 3)) << "</text>\n";
  }
  for (double t : Ticks(x_lo, x_hi)) {
    if (t != std::floor(t)) continue;  // steps are whole numbers
    out << "<line x1=\"" << Num(x(t)) << "\" y1=\"" << top << "\" x2=\"" << Num(x(t)) << "\" y2=\""
        << height - bottom << "\" class=\"grid\"/>\n";
    out << "<text x=\"" << Num(x(t)) << "\" y=\"" << height - bottom + 16
        << "\" text-anchor=\"middle\" class=\"tick\">" << static_cast<long long>(t) << "</text>\n";
  }
  AxisLabel(out, (left + width - right) / 2.0, height - 10, "step");
  AxisLabel(out, 16, (top + height - bottom) / 2.0, "loss (mean over trials)", true);
  out << "<polyline points=\"" << polyline(cp.loss_curve) << "\" fill=\"none\" stroke=\"" << kBaselineColor
      << "\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>\n";
  out << "<polyline points=\"" << polyline(v.loss_curve) << "\" fill=\"none\" stroke=\"" << kVariantColor
      << "\" stroke-width=\"1.5\"/>\n";
  std::string dev = c.loss_max_deviation ? "max deviation " + FormatPercent(*c.loss_max_deviation) +
                                               (c.loss_flagged ? " (above " + FormatPercent(threshold) + ")" : "") +
                                               (c.loss_parity_expected ? "" : " (" + c.loss_parity_note + ")")
                                         : "no common steps";
  out << "<text x=\"" << left << "\" y=\"18\" class=\"" << (c.loss_flagged ? "flag" : "tick") << "\">"
      << Escape(dev) << "</text>\n";
  out << "</svg><figcaption style=\"max-width:" << width << "px\"><span class=\"swatch\" style=\"background:"
      << kVariantColor << "\"></span>" << Escape(v.key) << "<br><span class=\"swatch dashed\"></span>"
      << Escape(cp.key) << " (counterpart)</figcaption></figure>\n";
  return out.str();
}

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       margin: 24px auto; max-width: 1400px; padding: 0 24px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 6px;
     border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
.question { font-size: 16px; color: #424a53; margin: 0 0 8px; }
.answer { font-size: 15px; font-weight: 600; color: #1f2328; margin: 0 0 6px; }
ul.meta { list-style: none; padding: 0; margin: 0; color: #57606a; }
.callouts { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 8px 16px; }
.callouts li { margin: 2px 0; }
p.note { color: #57606a; margin: 2px 0 8px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; }
th { background: #f6f8fa; text-align: left; } td.num { text-align: right;
     font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fbfcfd; }
svg.chart text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg.chart .tick { fill: #57606a; font-size: 11px; }
svg.chart .axis-label { fill: #424a53; font-size: 12px; } svg.chart .missing { fill: #cf222e; }
svg.chart .flag { fill: #cf222e; font-size: 11px; font-weight: bold; }
svg.chart .axis { stroke: #8c959f; } svg.chart .grid { stroke: #eaeef2; }
svg.chart .unity { stroke: #1f2328; stroke-dasharray: 4 3; }
svg.chart .budget { stroke: #cf222e; stroke-dasharray: 6 3; }
svg.chart .budget-label { fill: #cf222e; font-size: 11px; }
.scroll { overflow-x: auto; }
svg.chart .frame { fill: none; stroke: #d0d7de; }
.losses { display: flex; flex-wrap: wrap; gap: 12px; }
figure.loss { margin: 0; border: 1px solid #d0d7de; border-radius: 6px; padding: 6px; }
figcaption { font-size: 12px; color: #424a53; overflow-wrap: anywhere; }
.swatch { display: inline-block; width: 14px; height: 3px; vertical-align: middle; margin-right: 6px; }
.swatch.dashed { background: repeating-linear-gradient(90deg, #8c959f 0 5px, transparent 5px 8px); }
footer { margin-top: 32px; color: #8c959f; font-size: 12px; }
)css";

}  // namespace

std::string RenderSectionsHtml(const std::string& title, const std::vector<std::string>& headline,
                               const std::vector<std::string>& callouts, const std::string& charts,
                               const std::vector<ReportSection>& sections,
                               const std::string& footer) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<link rel=\"icon\" href=\"data:,\">\n"
      << "<title>" << Escape(title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  out << "<header>\n<h1>" << Escape(title) << "</h1>\n<ul class=\"meta\">\n";
  for (const std::string& line : headline) {
    if (line.rfind("Question: ", 0) == 0) {
      out << "<li class=\"question\">" << Escape(line.substr(10)) << "</li>\n";
    } else if (line.rfind("Answer: ", 0) == 0) {
      out << "<li class=\"answer\">" << Escape(line.substr(8)) << "</li>\n";
    } else {
      out << "<li>" << Escape(line) << "</li>\n";
    }
  }
  out << "</ul>\n</header>\n";
  if (!callouts.empty()) {
    out << "<section id=\"callouts\">\n<h2>Call-outs</h2>\n<ul class=\"callouts\">\n";
    for (const std::string& c : callouts) out << "<li>" << Escape(c) << "</li>\n";
    out << "</ul>\n</section>\n";
  }
  out << charts;
  for (const ReportSection& section : sections) {
    out << "<section id=\"" << Escape(section.id) << "\">\n<h2>" << Escape(section.title) << "</h2>\n";
    if (!section.note.empty()) out << "<p class=\"note\">" << Escape(section.note) << "</p>\n";
    out << "<div class=\"scroll\"><table>\n<thead><tr>";
    for (const std::string& h : section.header) out << "<th>" << Escape(h) << "</th>";
    out << "</tr></thead>\n<tbody>\n";
    for (const auto& row : section.rows) {
      out << "<tr>";
      for (std::size_t i = 0; i < section.header.size(); ++i) {
        bool right = i < section.numeric.size() && section.numeric[i];
        out << (right ? "<td class=\"num\">" : "<td>") << Escape(i < row.size() ? row[i] : "") << "</td>";
      }
      out << "</tr>\n";
    }
    out << "</tbody>\n</table></div>\n</section>\n";
  }
  out << "<footer>" << Escape(footer) << "</footer>\n</body>\n</html>\n";
  return out.str();
}

std::string RenderReportHtml(const Report& report) {
  std::ostringstream charts;
  charts << "<section id=\"charts\">\n";
  std::string speedup = SpeedupChart(report);
  if (!speedup.empty()) {
    charts << "<h2>Speedup against the baseline counterpart</h2>\n<p class=\"note\">Tokens/s ratio; "
              "whiskers are the "
           << Escape(FormatNumber(report.options.confidence * 100, 2))
           << "% interval (t over repeats; within-run only with one repeat); green: faster, red: "
              "slower, grey: no measurable difference or no verdict. The dashed line is 1.0x.</p>\n"
           << speedup;
  }
  std::string memory = MemoryChart(report);
  if (!memory.empty()) {
    charts << "<h2>Peak memory per variant</h2>\n<p class=\"note\">Largest rank; grey bars are "
              "baseline variants.</p>\n"
           << memory;
  }
  std::string steps = StepTimeChart(report);
  if (!steps.empty()) {
    charts << "<h2>Step-time distributions</h2>\n<p class=\"note\">All measured steps of a variant's "
              "succeeded trials: box p25-p75, bar at the median, whiskers p10-p90, dots at min and "
              "max. The axis ends 3 whisker spans beyond the widest whiskers, so one stalled step "
              "cannot squash the boxes: a min or max beyond it is a red triangle at the edge, its "
              "value in the tooltip and beside the row.</p>\n"
           << steps;
  }
  // As wide as the widest other chart (theirs: variant labels + 520 px plot + 190 px values).
  std::vector<std::string> keys;
  for (const VariantReport& v : report.variants) keys.push_back(Truncate(v.key));
  const int loss_width = std::max(800, LabelWidth(keys) + 520 + 190);
  std::ostringstream losses;
  int loss_charts = 0;
  for (const VariantReport& v : report.variants) {
    if (v.comparison.status != Comparison::Status::kCompared || v.loss_curve.empty()) continue;
    const VariantReport* cp = report.FindVariant(v.counterpart_key);
    if (cp == nullptr || cp->loss_curve.empty()) continue;
    if (++loss_charts > 24) break;  // keep the page light; the tables list every variant
    losses << LossChart(v, *cp, report.options.loss_parity_threshold, loss_width);
  }
  if (loss_charts > 0) {
    charts << "<h2>Loss curves</h2>\n<p class=\"note\">Mean loss over trials per measured step, each "
              "variant (solid) over its baseline counterpart (dashed).</p>\n<div class=\"losses\">\n"
           << losses.str() << "</div>\n";
  }
  charts << "</section>\n";
  std::string footer = "Generated by bakeoff report. Every figure is defined in docs/statistics.md; "
                       "within-run bootstrap seed " + std::to_string(report.options.seed) + ", " +
                       std::to_string(report.options.bootstrap_resamples) + " resamples.";
  return RenderSectionsHtml("Bakeoff report: " + report.sweep_name, ReportHeadline(report),
                            report.callouts, charts.str(), ReportSections(report), footer);
}

}  // namespace bakeoff::metrics
