// What `dtsim model` shows (docs/formats/model-report.md): a model's architecture and parameter
// counts and, for a transformer, one layer on one tensor-parallel rank — each op's FLOPs, bytes
// and roofline time on a GPU, each pass's totals and the activations the layer keeps. Written by
// `dtsim model -o` and returned by the Python module's dtsim.model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"

namespace dtsim::results {

inline constexpr FileFormat kModelReportFormat{"dtsim.model", 1, 2, "not a model report"};

// One op of the layer priced on the GPU's roofline.
struct PricedOp {
  models::Op op;
  double seconds = 0;
};

struct PassTotals {
  double flops = 0;
  double model_flops = 0;  // what MFU counts (models::Op::model_flops)
  double bytes = 0;
  double seconds = 0;
};

struct LayerReport {
  int layer = 0;
  models::TransformerShard shard;
  std::string dtype;             // as asked: "bf16", "fp8" (BF16 activations, FP8 GEMMs), ...
  std::string gpu;               // the preset whose roofline priced the ops
  std::string recompute;         // the policy's name
  std::string recompute_policy;  // "selective of core_attn, mlp" where modules are named
  std::vector<PricedOp> forward, backward, recompute_ops;
  PassTotals forward_totals, backward_totals, recompute_totals;
  int64_t activation_bytes = 0;  // kept per layer and micro-batch under the policy
};

struct ModelReport {
  models::ModelSpec model;
  models::ParameterCount parameters;
  int64_t kv_cache_bytes_per_token = 0;  // bf16; transformers only
  std::optional<LayerReport> layer;      // transformers only
};

// The report as a document (with the process's provenance).
OrderedJson ModelReportJson(const ModelReport& report);

}  // namespace dtsim::results
