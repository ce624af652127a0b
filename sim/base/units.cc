#include "sim/base/units.h"

#include "sim/base/check.h"

namespace dtsim {
namespace {
// GCC/Clang extension for exact bits x ns products; `using` cannot take __extension__.
__extension__ typedef __int128 Int128;  // NOLINT(modernize-use-using)
}  // namespace

DurationNs TransferTime(Bytes size, Bandwidth bandwidth) {
  DTSIM_CHECK(bandwidth.bits_per_second() > 0, "bandwidth must be positive");
  DTSIM_CHECK(size.count() >= 0, "negative transfer size");
  const Int128 bits_ns = static_cast<Int128>(size.count()) * 8 * kGiga;
  const Int128 rate = bandwidth.bits_per_second();
  const Int128 ns = (bits_ns + rate - 1) / rate;
  // Saturates as time arithmetic does (sim/base/time.h): an exabyte at 1 b/s.
  if (ns >= DurationNs::Max().ns()) return DurationNs::Max();
  return DurationNs(static_cast<int64_t>(ns));
}

}  // namespace dtsim
