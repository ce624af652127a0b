#include "sim/base/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

namespace dtsim {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::string ClosestMatch(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string lowered = ToLower(word);
  // Scores are doubled distances; a match that differs only in case scores one better than
  // an edit, so "Us" suggests "us" over "ns" and "gbps" suggests "Gbps" over "bps".
  const int limit = 2 * std::max<int>(2, static_cast<int>(word.size()) / 2);
  std::string best;
  int best_score = limit + 1;
  for (std::string_view candidate : candidates) {
    // Both distances are at least the length difference, so a candidate that far off cannot
    // beat the best so far: skipping it changes no answer and keeps a long word (a 64 KiB
    // garbage key) from costing |word| x |candidate| per candidate.
    const auto gap =
        static_cast<int>(word.size() > candidate.size() ? word.size() - candidate.size()
                                                        : candidate.size() - word.size());
    if (2 * gap >= best_score) continue;
    const int exact = EditDistance(word, candidate);
    const int folded = EditDistance(lowered, ToLower(candidate));
    const int score = std::min(2 * exact, 2 * folded + 1);
    if (score < best_score) {
      best_score = score;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string match = ClosestMatch(word, candidates);
  if (!match.empty()) return " (did you mean " + Quote(match) + "?)";
  // A short name for a longer one ("h100" for "h100-sxm5-80gb"): the candidates it begins, or
  // whose dash-separated parts it begins ("sxm5"), up to three.
  const std::string lowered = ToLower(word);
  if (lowered.size() < 2) return {};
  std::vector<std::string_view> begun;
  for (std::string_view candidate : candidates) {
    const std::string name = ToLower(candidate);
    if (name.starts_with(lowered) || name.find("-" + lowered) != std::string::npos) {
      begun.push_back(candidate);
    }
  }
  if (begun.empty() || begun.size() > 3) return {};
  std::string text = " (did you mean ";
  for (size_t i = 0; i < begun.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == begun.size() ? " or " : ", ") + Quote(begun[i]);
  }
  return text + "?)";
}

std::string QuoteChar(char c) {
  const auto byte = static_cast<unsigned char>(c);
  char buffer[16];
  if (byte >= 0x20 && byte < 0x7f) {
    std::snprintf(buffer, sizeof buffer, "'%c'", c);
  } else {
    std::snprintf(buffer, sizeof buffer, "byte 0x%02x", byte);
  }
  return buffer;
}

std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JoinQuoted(std::span<const std::string_view> candidates) {
  std::string out;
  for (std::string_view candidate : candidates) {
    if (!out.empty()) out += ", ";
    out += Quote(candidate);
  }
  return out;
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace dtsim
