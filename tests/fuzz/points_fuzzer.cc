// Measurements files, as `dtsim validate POINTS...` and `dtsim calibrate POINTS...` read them: a
// memory points file (dtsim.memory_points) validated whole, or a training-run points file
// (../shared/validation's schema) whose points are each turned into a simulation config and
// simulated against their measured metric. Only points small enough to simulate in a moment are
// simulated (at most 64 GPUs, 16 micro-batches and 32 layers); the rest stop after their
// config is read, resolved and checked.
#include <algorithm>

#include "sim/base/json_reader.h"
#include "strategies/config.h"
#include "strategies/memory_validation.h"
#include "strategies/training_run_point.h"
#include "strategies/validation.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using dtsim::Json;

int64_t IntOr(const Json& object, const char* key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

// Whether a Megatron weak-scaling or layer point is a moment's simulation: its plan read from
// the point as WeakScalingPoint reads it (a layer point's ranks are its tensor-parallel ones).
bool SmallOwnSimulation(const Json& point) {
  const Json empty = Json::object();
  const Json& parallel =
      point.is_object() && point.contains("parallel") ? point["parallel"] : empty;
  const Json& model = point.is_object() && point.contains("model") ? point["model"] : empty;
  const int64_t tp = IntOr(parallel, "tp", 1);
  const int64_t pp = IntOr(parallel, "pp", 1);
  const int64_t dp = IntOr(parallel, "dp", 1);
  const int64_t micro = std::max<int64_t>(1, IntOr(parallel, "micro_batch", 1));
  const int64_t batch = IntOr(parallel, "global_batch", 1);
  const bool small_plan =
      tp >= 1 && pp >= 1 && dp >= 1 && tp <= 64 && pp <= 64 && dp <= 64 && tp * pp * dp <= 64;
  // Divided in turn: dp · micro could pass int64 for a fuzzed micro-batch.
  return small_plan && batch / dp / micro <= 16 && IntOr(model, "layers", 1) <= 32;
}

// Whether a measured training run's config is a moment's simulation; reading, resolving and
// checking it is what the harness fuzzes either way.
bool SmallTrainingRun(const Json& point, const std::string& path) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's helper
  const Expected<strategies::TrainingRunConfig> run = strategies::TrainingRunConfigOf(point, path);
  if (!fuzz::Succeeded(run)) return false;
  const Expected<strategies::ResolvedConfig> config =
      strategies::ConfigFromJson(run->config, "points.json");
  if (!fuzz::Succeeded(config)) return false;
  return config->plan.world() <= 64 && config->Microbatches() <= 16 &&
         config->model.transformer.layers <= 32;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const Expected<Json> json = ParseJson(fuzz::Text(data, size), "points.json");
  if (!fuzz::Succeeded(json)) return 0;
  if (strategies::IsMemoryPointsFile(*json)) {
    (void)fuzz::Succeeded(strategies::ValidateMemory(*json, "points.json"));
    return 0;
  }
  const Expected<std::vector<strategies::MeasuredPoint>> points =
      strategies::MeasuredPoints(*json, "points.json");
  if (!fuzz::Succeeded(points)) return 0;
  for (size_t i = 0; i < points->size() && i < 4; ++i) {
    const strategies::MeasuredPoint& point = (*points)[i];
    const bool small = strategies::IsTrainingRunCategory(point.category)
                           ? SmallTrainingRun(*point.point, point.path)
                           : SmallOwnSimulation(*point.point);
    if (small) (void)fuzz::Succeeded(strategies::ValidatePoint(point, "points.json"));
  }
  return 0;
}
