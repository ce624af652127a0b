// A transformer's passes on one rank, priced op by op by the cost model once per kind of piece
// (a dense layer, a MoE layer, the embedding, the output layer): what the graph builder emits
// and the search's lower bound sums, both through strategies/microbatch_layout.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/cost_model.h"
#include "models/ops.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// What follows an op in a pass: nothing, a tensor-parallel reduction, an expert exchange to or
// from the experts (models::Op::Boundary, 1D), or on a 2D/2.5D grid, where those boundaries do
// not exist, the all-reduces of a norm's row statistics (LayerNorm2D, and the loss).
enum class After : uint8_t { kNothing, kTensor, kExpertDispatch, kExpertCombine, kRowStats };

struct PricedOp {
  std::string segment;  // "attn", "mlp" or "moe": names the compute task the op lands in
  DurationNs duration;
  After after = After::kNothing;
  models::Pass pass = models::Pass::kForward;
  bool expert = false;  // an expert's GEMM or activation: scales with the rank's routed tokens
  bool wgrad = false;   // a weight-gradient GEMM (what --delay-wgrad-compute defers)
  // The core attention kernel: under context parallelism a ring of K/V shifts (p2p) or between
  // all-to-alls (a2a).
  bool attention = false;
  // A column-parallel dgrad under sequence parallelism: what each rank gives the all-gather of
  // the layer's input that runs beside it (models::Op::regather_bytes); 0: none.
  int64_t regather_bytes = 0;
  // A tensor-parallel boundary's widths where not the hidden size (models::Op::reduce_columns,
  // gather_columns).
  int64_t reduce_columns = 0;
  int64_t gather_columns = 0;
  // On a 2D/2.5D grid: a weight GEMM run as SUMMA steps, and its operand blocks (elements).
  models::Op::WeightGemm summa = models::Op::WeightGemm::kNone;
  int64_t activation_block = 0;
  int64_t weight_block = 0;
};

struct PricedPass {
  std::vector<PricedOp> ops;
  double model_flops = 0;
};

// The passes of one kind of piece, and the costs they were priced from: forward's ops, then
// backward's and recompute's (a tally counts each priced op once per use).
struct PiecePasses {
  PricedPass forward, backward, recompute;
  std::vector<models::OpCost> sources;
  int fp8_linears = 0;  // FP8 GEMMs of weights in its forward (Transformer Engine's modules)
  // FP8: quantizing its FP8 GEMMs' weights row- and column-wise (what ZeRO-3 pays each time it
  // gathers the piece; otherwise once per iteration, in the optimizer step).
  std::optional<models::OpCost> weight_cast;
};

// Every piece of the model: the first layer of each kind (TransformerSpec::LayerKind: MoE or
// dense, windowed or full attention) stands for all of its kind.
// Layers the recompute policy skips (training.recompute_every > 1) are their kind's piece
// without a recompute pass.
struct PricedModel {
  std::array<PiecePasses, models::TransformerSpec::kLayerKinds> layers;  // with the recompute
  std::array<PiecePasses, models::TransformerSpec::kLayerKinds> kept;    // without: all kept
  int recompute_every = 1;
  PiecePasses embedding, output;
  const PiecePasses& Layer(const models::TransformerSpec& spec, int index) const {
    const auto kind = static_cast<size_t>(spec.LayerKind(index));
    return models::RecomputesLayer(recompute_every, index) ? layers[kind] : kept[kind];
  }
};

// Precondition: `config` is a transformer's.
Expected<PricedModel> PriceModel(const ResolvedConfig& config, const models::OpCostModel& cost);

}  // namespace dtsim::strategies
