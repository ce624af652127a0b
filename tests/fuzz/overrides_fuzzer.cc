// What the command line adds to a config: `--set KEY.PATH=VALUE` (simulate, search, sweep) and
// `--vary KEY.PATH=V1,V2,...` (sweep), one per line of the input, applied to the shipped small
// example and read back as a config.
#include <sstream>

#include "sim/base/json_reader.h"
#include "strategies/config.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/api/sweep_axes.h"

namespace {

constexpr std::string_view kBase = R"({
  "model": "gpt3-1.3b",
  "training": {"global_batch": 64, "micro_batch": 4, "seq_len": 2048, "precision": "bf16",
               "recompute": "selective"},
  "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
  "parallelism": {"data": 2, "tensor": {"size": 4, "sequence_parallel": true},
                  "pipeline": {"size": 2, "schedule": "1f1b"}, "zero_stage": 1},
  "simulation": {"network_model": "analytical"}
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  static const Json base = *ParseJson(kBase, "base.json");
  Json config = base;
  std::istringstream lines{std::string(fuzz::Text(data, size))};
  int applied = 0;
  for (std::string line; std::getline(lines, line) && applied < 16; ++applied) {
    if (line.starts_with("vary ")) {
      const Expected<api::Axis> axis = api::ParseVary(line.substr(5));
      if (!fuzz::Succeeded(axis)) continue;
      for (const std::string& value : axis->values) (void)api::ValueJson(value);
      (void)fuzz::Succeeded(api::CheckKey(config, *axis, "base.json"));
      continue;
    }
    if (!fuzz::Succeeded(strategies::ApplyOverride(config, line))) return 0;
  }
  (void)fuzz::Succeeded(strategies::ConfigFromJson(config, "base.json"));
  return 0;
}
