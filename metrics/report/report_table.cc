// The terminal rendering of a report: aligned plain-text tables (report_renderer.h).
#include <algorithm>
#include <sstream>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

void WriteTable(std::ostringstream& out, const ReportSection& section) {
  std::vector<std::size_t> widths(section.header.size(), 0);
  for (std::size_t i = 0; i < section.header.size(); ++i) widths[i] = section.header[i].size();
  for (const auto& row : section.rows) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  auto write_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      std::string pad(widths[i] - cell.size(), ' ');
      bool right = i < section.numeric.size() && section.numeric[i];
      line += (i == 0 ? "" : "  ") + (right ? pad + cell : cell + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << "  " << line << "\n";
  };
  write_row(section.header);
  std::vector<std::string> rule;
  for (std::size_t w : widths) rule.push_back(std::string(w, '-'));
  write_row(rule);
  for (const auto& row : section.rows) write_row(row);
}

}  // namespace

std::string RenderSectionsTable(const std::vector<std::string>& headline,
                                const std::vector<std::string>& callouts,
                                const std::vector<ReportSection>& sections) {
  std::ostringstream out;
  for (const std::string& line : headline) out << line << "\n";
  if (!callouts.empty()) {
    out << "\nCall-outs\n";
    for (const std::string& c : callouts) out << "  ! " << c << "\n";
  }
  for (const ReportSection& section : sections) {
    out << "\n" << section.title << "\n";
    if (!section.note.empty()) out << "  " << section.note << "\n";
    WriteTable(out, section);
  }
  return out.str();
}

std::string RenderReportTable(const Report& report) {
  return RenderSectionsTable(ReportHeadline(report), report.callouts, ReportSections(report));
}

}  // namespace bakeoff::metrics
