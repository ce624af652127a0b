#include "strategies/simulate.h"

#include "strategies/config.h"
#include "tools/api/api.h"
#include "tools/results/provenance.h"
#include "tools/results/simulate_result.h"

namespace dtsim::api {

Expected<Json> ReadConfigInput(const ConfigInput& input) {
  Json json;
  if (input.document) {
    json = *input.document;
  } else {
    DTSIM_ASSIGN_OR_RETURN(json, ReadJsonFile(input.path));
  }
  for (const std::string& assignment : input.overrides) {
    DTSIM_RETURN_IF_ERROR(strategies::ApplyOverride(json, assignment));
  }
  return json;
}

Expected<OrderedJson> SimulateJson(const ConfigInput& input) {
  DTSIM_ASSIGN_OR_RETURN(const Json document, ReadConfigInput(input));
  Expected<strategies::ResolvedConfig> config =
      strategies::ConfigFromJson(document, input.Source());
  if (!config.ok()) return std::move(config).error().InFile(input.Source());
  results::RecordConfig(document, input.overrides, &*config);
  Expected<strategies::SimulationResult> result = strategies::Simulate(*config);
  if (!result.ok()) return std::move(result).error().InFile(input.Source());
  OrderedJson written = results::SimulateResultJson(*config, *result);
  written["provenance"] = results::ProvenanceJson();
  return written;
}

}  // namespace dtsim::api
