// The Markdown rendering of a report: headings and pipe tables (report_renderer.h).
#include <sstream>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

// A cell may not contain a pipe or a newline in a pipe table.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out.empty() ? " " : out;
}

}  // namespace

std::string RenderSectionsMarkdown(const std::string& title, const std::vector<std::string>& headline,
                                   const std::vector<std::string>& callouts,
                                   const std::vector<ReportSection>& sections) {
  std::ostringstream out;
  out << "# " << Cell(title) << "\n\n";
  for (const std::string& line : headline) out << "- " << line << "\n";
  if (!callouts.empty()) {
    out << "\n## Call-outs\n\n";
    for (const std::string& c : callouts) out << "- **" << c << "**\n";
  }
  for (const ReportSection& section : sections) {
    out << "\n## " << section.title << "\n\n";
    if (!section.note.empty()) out << section.note << "\n\n";
    out << "|";
    for (const std::string& h : section.header) out << " " << Cell(h) << " |";
    out << "\n|";
    for (std::size_t i = 0; i < section.header.size(); ++i) {
      bool right = i < section.numeric.size() && section.numeric[i];
      out << (right ? " ---: |" : " --- |");
    }
    out << "\n";
    for (const auto& row : section.rows) {
      out << "|";
      for (std::size_t i = 0; i < section.header.size(); ++i) {
        out << " " << Cell(i < row.size() ? row[i] : "") << " |";
      }
      out << "\n";
    }
  }
  return out.str();
}

std::string RenderReportMarkdown(const Report& report) {
  return RenderSectionsMarkdown("Bakeoff report: " + report.sweep_name, ReportHeadline(report),
                                report.callouts, ReportSections(report));
}

}  // namespace bakeoff::metrics
