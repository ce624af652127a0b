// The op list of `dtsim simulate --op-list` (docs/formats/op-list.md): every distinct op
// signature a plan prices, with how often and where first; tools/op_benchmark.py measures
// them on a GPU and writes an op-cost table (traces/op_cost_table.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/cost_model.h"
#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::results {

inline constexpr FileFormat kOpListFormat{"dtsim.op_list", 1, 0, "not an op list"};

OrderedJson OpListJson(const strategies::SimulationConfig& config,
                       const std::vector<models::RecordingCostModel::Recorded>& ops);

// What a reader gets back.
struct OpListRecord {
  std::string config, model, gpu;
  std::vector<models::RecordingCostModel::Recorded> ops;
};

Expected<OpListRecord> OpListFromJson(const Json& document);

}  // namespace dtsim::results
