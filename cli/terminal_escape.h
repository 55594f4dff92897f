// The one control-character escape of everything the CLI prints (security review
// 2026-12-07, A13): its output, and its error lines (exit_codes.h, PrintFailure), so that
// what a trainer, a worker, a coordinator or a database holds cannot drive the terminal it
// is shown on. Header-only and pure; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bakeoff::cli {

// `text` with every control character but newline, tab and the CR of a CRLF line end
// written as visible text ("\x1b"; a C1 control, U+0080 to U+009F, as "\u009b"; DEL as
// "\x7f"). Valid text without controls is returned as is.
inline std::string EscapeControlCharacters(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // A CR that ends a line (CSV's CRLF, RFC 4180) moves no cursor back over text: kept.
    const bool line_end = c == '\r' && i + 1 < text.size() && text[i + 1] == '\n';
    if ((c < 0x20 && c != '\n' && c != '\t' && !line_end) || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace bakeoff::cli
