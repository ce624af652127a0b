// The one strict parser for quantities with units, as they appear in configs and graphs:
// "100 Gbps", "25 GB/s", "1.6 TB/s", "80 GiB", "2 us", "1.5 ms", "312 TFLOP/s".
//
// Grammar: <number> [spaces] <unit>, where <number> is a non-negative decimal with optional
// fraction and exponent ("1.5", "2e3"). The unit is required and case-sensitive (b is a bit,
// B a byte). Results are rounded to the nearest unit of storage (1 ns, 1 byte, 1 bit/s); a
// non-zero input that rounds to zero, a negative number, an unknown unit or trailing text is
// an error whose value is the text as written and whose message lists or suggests valid units.
#pragma once

#include <string>
#include <string_view>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim {

Expected<Bytes> ParseBytes(std::string_view text);
Expected<DurationNs> ParseDuration(std::string_view text);
Expected<Bandwidth> ParseBandwidth(std::string_view text);
Expected<FlopRate> ParseFlopRate(std::string_view text);

// Human-readable renderings for summaries ("1.234 ms", "12.5 GB/s"); not for serialization,
// which always writes integers in the unit named by the field.
std::string FormatDuration(DurationNs duration);
// A duration in milliseconds with `decimals` places, for table columns: "12.35" (no unit).
std::string FormatMilliseconds(DurationNs duration, int decimals);
std::string FormatBandwidth(Bandwidth bandwidth);
// Memory sizes as the memory errors and tables print them: "97.2 GiB" (one decimal, binary).
std::string FormatGiB(int64_t bytes);

// Exact renderings the parser reads back to the same value, for specs dtsim writes: the largest
// unit that keeps an integer ("2 us", "640 ns"; "450 GB/s", or in bits "400 Gbps").
std::string FormatDurationExact(DurationNs duration);
std::string FormatBandwidthExact(Bandwidth bandwidth, bool in_bits);

}  // namespace dtsim
