// `dtsim simulate CONFIG` end to end, on configs small enough to simulate in a moment: after the
// config readers (the config harness's ground), the memory model, the op costs, the graph
// builder, the network models and the engine, on fuzzed sizes, rates and plans. A config may be
// refused with an error; nothing may crash, and UBSan checks the arithmetic on the way.
#include "strategies/config.h"
#include "strategies/simulate.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const Expected<Json> json = ParseJson(fuzz::Text(data, size), "fuzz.json");
  if (!fuzz::Succeeded(json)) return 0;
  Expected<strategies::ResolvedConfig> config = strategies::ConfigFromJson(*json, "fuzz.json");
  if (!fuzz::Succeeded(config)) return 0;
  // A moment's simulation: few ranks and micro-batches, one rank per stage simulated; a
  // graph past 64 MiB is refused before it is built (strategies/footprint.h).
  const strategies::ParallelPlan& plan = config->plan;
  if (plan.world() > 64 || config->Microbatches() > 16) return 0;
  if (config->model.transformer.layers > 16) return 0;
  config->ranks = strategies::RanksMode::kSymmetric;
  config->max_memory = int64_t{64} << 20;
  (void)fuzz::Succeeded(strategies::Simulate(*config));
  return 0;
}
