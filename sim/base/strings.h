// Small string helpers shared by the parsers: "did you mean" suggestions and quoting.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace dtsim {

// ASCII lower case.
std::string ToLower(std::string_view text);
// `text` without leading and trailing whitespace.
std::string_view Trim(std::string_view text);

// Levenshtein distance (insert, delete, substitute each cost 1).
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` by edit distance (case-insensitively), or "" when none is
// close enough to be a plausible typo (distance above max(2, |word| / 2)).
std::string ClosestMatch(std::string_view word, std::span<const std::string_view> candidates);

// " (did you mean \"x\"?)" for the closest candidate, or "" when none is close.
std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates);

// `text` in double quotes with JSON escapes, for error messages.
std::string Quote(std::string_view text);

// One byte of an input for an error message: 'c' when it is printable ASCII, else its value
// ("byte 0x00"), so that a NUL or a stray control byte neither cuts nor garbles the message.
std::string QuoteChar(char c);

// The candidates joined as "a", "b", "c" — for "expected one of …" messages.
std::string JoinQuoted(std::span<const std::string_view> candidates);

// A CSV field (RFC 4180): as is, or in double quotes (inner quotes doubled) when it holds a
// comma, a quote or a line break.
std::string CsvField(std::string_view text);

}  // namespace dtsim
