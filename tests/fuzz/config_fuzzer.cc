// `dtsim simulate` / `search` / `sweep` configs: the JSON text, every section (model, training,
// cluster with its presets and servers, parallelism, compression, simulation, profile), the
// search section, the checks of the plan against the rest, and a replay what-if read from the
// same document (`dtsim replay --what-if FILE` has the same readers for its cluster, GPU and
// compression sections).
#include <array>

#include "sim/base/json_reader.h"
#include "strategies/config.h"
#include "strategies/replay.h"
#include "strategies/search.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const Expected<Json> json = ParseJson(fuzz::Text(data, size), "fuzz.json");
  if (!fuzz::Succeeded(json)) return 0;
  (void)fuzz::Succeeded(strategies::ReplayWhatIfFromJson(*json, "what_if"));
  constexpr std::array<std::string_view, 1> kSearchKey = {"search"};
  const Expected<strategies::SimulationConfig> sections =
      strategies::ReadConfigSections(*json, "fuzz.json", kSearchKey);
  if (!fuzz::Succeeded(sections)) return 0;
  const Json* search = json->is_object() && json->contains("search") ? &(*json)["search"] : nullptr;
  (void)fuzz::Succeeded(strategies::SearchSpaceFromJson(search, *sections));
  (void)fuzz::Succeeded(strategies::ConfigFromJson(*json, "fuzz.json"));
  return 0;
}
