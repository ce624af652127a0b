// Accuracy against published measurements (`dtsim validate`, docs/validation.md): every point
// of a published-points file (../shared/validation/published-points.json) turned into a
// simulation, its predicted metric against the measured one.
#pragma once

#include <string>
#include <vector>

#include "models/cost_model.h"
#include "models/ops.h"
#include "network/cluster.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::strategies {

struct ValidationRow {
  std::string id;
  std::string metric;  // the measured metric compared ("achieved_tflops_per_gpu", ...)
  std::string unit;
  double measured = 0;
  double predicted = 0;
  std::string how;  // what was simulated, and what was inferred

  double Error() const { return predicted / measured - 1; }
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  double mean_absolute_percentage_error = 0;  // over every row, in percent
};

struct LayerTimes {
  double forward_seconds = 0;
  double backward_seconds = 0;  // with what recompute re-runs
};

// One transformer layer on one of the shard's t tensor-parallel ranks: its ops priced by `cost`
// plus its tensor-parallel collectives priced analytically over ranks 0 … t − 1 of `cluster`
// (Korthikanti et al. Table 4's setting). Precondition: ValidateShard(spec, shard) passed.
Expected<LayerTimes> PredictLayerTimes(const models::TransformerSpec& spec,
                                       const models::TransformerShard& shard,
                                       models::Recompute recompute, const models::OpCostModel& cost,
                                       const network::ClusterSpec& cluster);

// Points of category "megatron_weak_scaling" are simulated whole (symmetric ranks, analytical
// network, full recompute as the paper's FLOP formula assumes, micro-batch 1 where the
// source gives none) and compared on achieved TFLOP/s per GPU (hardware FLOPs, as the paper
// counts); "layer_microbenchmark" points are one layer's forward + backward at their tensor-
// parallel size. Any other category is an error naming the point.
Expected<ValidationReport> Validate(const Json& points, const std::string& source);

}  // namespace dtsim::strategies
