// The Markdown rendering of a report: headings and pipe tables (report_renderer.h).
#include <sstream>
#include <string_view>

#include "metrics/report/report_renderer.h"

namespace bakeoff::metrics {
namespace {

// A cell: its text as written (MarkdownText), never empty.
std::string Cell(const std::string& text) {
  std::string out = MarkdownText(text);
  return out.empty() ? " " : out;
}

}  // namespace

std::string MarkdownText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\': case '`': case '*': case '_': case '[': case ']': case '|': case '#': case '~': case '&':
        out += '\\';
        out += c;
        break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\n': case '\r': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

std::string MarkdownLine(std::string_view text) {
  std::string out = MarkdownText(text);
  // "- x", "+ x" (a list), "12. x" or "12) x" (an ordered list) start a block, inside a
  // list item as much as at the left margin.
  // A marker counts only when a space, a tab or the end follows it.
  const auto ends_marker = [&out](std::size_t at) { return at >= out.size() || out[at] == ' ' || out[at] == '\t'; };
  std::size_t digits = 0;
  while (digits < out.size() && out[digits] >= '0' && out[digits] <= '9') ++digits;
  if (!out.empty() && (out[0] == '-' || out[0] == '+') && ends_marker(1)) {
    out.insert(0, 1, '\\');
  } else if (digits > 0 && digits < out.size() && (out[digits] == '.' || out[digits] == ')') &&
             ends_marker(digits + 1)) {
    out.insert(digits, 1, '\\');
  }
  return out;
}

std::string RenderSectionsMarkdown(const std::string& title, const std::vector<std::string>& headline,
                                   const std::vector<std::string>& callouts,
                                   const std::vector<ReportSection>& sections) {
  std::ostringstream out;
  // Every text is shown as written (MarkdownText): names and reasons come from outside.
  out << "# " << MarkdownLine(title) << "\n\n";
  for (const std::string& line : headline) out << "- " << MarkdownLine(line) << "\n";
  if (!callouts.empty()) {
    out << "\n## Call-outs\n\n";
    for (const std::string& c : callouts) out << "- **" << MarkdownText(c) << "**\n";
  }
  for (const ReportSection& section : sections) {
    out << "\n## " << MarkdownLine(section.title) << "\n\n";
    if (!section.note.empty()) out << MarkdownLine(section.note) << "\n\n";
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
