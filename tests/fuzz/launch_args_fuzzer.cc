// `dtsim import megatron` and `dtsim import deepspeed`: a launch script's text split into
// arguments, then read as pretrain_gpt.py's flags into a config and checked
// (strategies/launch_import.h). For DeepSpeed the text from the first line that opens a JSON
// object on is its config file; without one, an empty config.
#include "sim/base/json_reader.h"
#include "strategies/launch_import.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string_view text = fuzz::Text(data, size);
  const strategies::ImportTarget target{
      .cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 2}}, .vocab = 32000};
  (void)fuzz::Succeeded(
      strategies::ImportMegatronArguments(strategies::SplitLaunchArguments(text), target));
  const size_t brace = text.starts_with('{') ? 0 : text.find("\n{");
  const std::string_view flags = text.substr(0, brace);
  Json ds_config = Json::object();
  if (brace != std::string_view::npos) {
    Expected<Json> parsed = ParseJson(text.substr(brace), "ds_config.json");
    if (parsed.ok()) ds_config = *std::move(parsed);
  }
  (void)fuzz::Succeeded(strategies::ImportDeepSpeedArguments(
      strategies::SplitLaunchArguments(flags), ds_config, "ds_config.json", target));
  return 0;
}
