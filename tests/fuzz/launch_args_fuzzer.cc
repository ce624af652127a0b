// `dtsim import megatron`: a launch script's text split into arguments, then read as
// pretrain_gpt.py's flags into a config and checked (strategies/launch_import.h).
#include "strategies/launch_import.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::vector<std::string> words = strategies::SplitLaunchArguments(fuzz::Text(data, size));
  const strategies::ImportTarget target{
      .cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 2}}, .vocab = 32000};
  (void)fuzz::Succeeded(strategies::ImportMegatronArguments(words, target));
  return 0;
}
