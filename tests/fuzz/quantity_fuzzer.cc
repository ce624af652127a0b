// The quantity parser ("100 Gbps", "80 GiB", "2 us", "312 TFLOP/s"): every unit kind, and the
// summaries' renderings of what it accepts.
#include "sim/base/quantity.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string_view text = fuzz::Text(data, size);
  if (const Expected<Bytes> bytes = ParseBytes(text); fuzz::Succeeded(bytes)) {
    (void)FormatGiB(bytes->count());
  }
  if (const Expected<DurationNs> duration = ParseDuration(text); fuzz::Succeeded(duration)) {
    (void)FormatDuration(*duration);
  }
  if (const Expected<Bandwidth> rate = ParseBandwidth(text); fuzz::Succeeded(rate)) {
    (void)FormatBandwidth(*rate);
  }
  (void)fuzz::Succeeded(ParseFlopRate(text));
  return 0;
}
