// "Did you mean ...?" for a mistyped subcommand or flag, as git and cargo say it: the
// known names within a small edit distance of what was typed (a swap of two neighbouring
// letters counts as one edit, the commonest typo), closest first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::cli {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// two adjacent characters, each 1.
inline std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidates within max(1, typed length / 3) edits of `typed` (so "loacl" finds
// "local", and "x" finds nothing in particular), closest first, then in the candidates'
// order. Empty when none is close.
inline std::vector<std::string> Nearest(std::string_view typed, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(1, typed.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> close;
  for (const auto& c : candidates) {
    const std::size_t d = EditDistance(typed, c);
    if (d <= limit && d > 0) close.emplace_back(d, c);
  }
  std::stable_sort(close.begin(), close.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, c] : close) out.push_back(std::move(c));
  return out;
}

// " Did you mean 'a' or 'b'?" for `nearest` (at most its first two), or "" for none.
inline std::string DidYouMean(const std::vector<std::string>& nearest) {
  if (nearest.empty()) return "";
  std::string out = " Did you mean '" + nearest[0] + "'";
  if (nearest.size() > 1) out += " or '" + nearest[1] + "'";
  return out + "?";
}

}  // namespace bakeoff::cli
