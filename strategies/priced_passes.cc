#include "strategies/priced_passes.h"

#include <optional>
#include <string_view>
#include <utility>

namespace dtsim::strategies {
namespace {

using models::Op;

// On a grid LayerNorm2D all-reduces its row statistics in forward and backward, as does the
// loss in forward. A QK norm does not: it normalizes over one head, and a grid keeps a rank's
// heads whole (the heads split over its columns, models/transformer_ops.cc).
bool RowStatistics(const Op& op) {
  const std::string_view name = op.name;
  if (name.find("attn.q_norm") != name.npos || name.find("attn.k_norm") != name.npos) return false;
  return op.kind == models::OpKind::kNorm ||
         (op.kind == models::OpKind::kCrossEntropy && op.pass == models::Pass::kForward);
}

After AfterOf(const Op& op, bool grid) {
  if (grid) return RowStatistics(op) ? After::kRowStats : After::kNothing;
  switch (op.boundary) {
    case Op::Boundary::kTensorReduce:
      return After::kTensor;
    case Op::Boundary::kExpertDispatch:
      return After::kExpertDispatch;
    case Op::Boundary::kExpertCombine:
      return After::kExpertCombine;
    case Op::Boundary::kNone:
      break;
  }
  return After::kNothing;
}

class Pricer {
 public:
  Pricer(const models::OpCostModel& cost, bool grid, DType dtype, models::Fp8Recipe fp8)
      : cost_(cost), grid_(grid), dtype_(dtype), fp8_(fp8) {}

  Expected<PricedPass> Price(const std::vector<Op>& ops) {
    PricedPass pass;
    for (const Op& op : ops) {
      DTSIM_ASSIGN_OR_RETURN(const models::OpCost cost, cost_.PriceOrError(op));
      const std::string_view name = op.name;
      PricedOp& priced =
          pass.ops.emplace_back(PricedOp{.segment = std::string(name.substr(0, name.find('.'))),
                                         .duration = cost.duration,
                                         .after = AfterOf(op, grid_),
                                         .pass = op.pass,
                                         .expert = op.expert,
                                         .wgrad = op.weight_gemm == Op::WeightGemm::kWgrad,
                                         .attention = op.kind == models::OpKind::kFlashAttention,
                                         .regather_bytes = op.regather_bytes,
                                         .reduce_columns = op.reduce_columns,
                                         .gather_columns = op.gather_columns});
      if (grid_) {
        priced.summa = op.weight_gemm;
        priced.activation_block = op.activation_block;
        priced.weight_block = op.weight_block;
      }
      pass.model_flops += op.model_flops;
      sources_.push_back(cost);
    }
    return pass;
  }

  Expected<PiecePasses> Piece(const models::LayerOps& ops,
                              std::optional<models::Recompute> recompute) {
    PiecePasses piece;
    DTSIM_ASSIGN_OR_RETURN(piece.forward, Price(ops.forward));
    DTSIM_ASSIGN_OR_RETURN(piece.backward, Price(ops.backward));
    if (recompute) {
      DTSIM_ASSIGN_OR_RETURN(piece.recompute, Price(models::RecomputeOps(ops, *recompute)));
    }
    piece.sources = std::exchange(sources_, {});
    for (const models::Op& op : ops.forward) {
      piece.fp8_linears += op.fp8_weight_elements > 0 ? 1 : 0;
    }
    if (const int64_t weights = models::Fp8WeightElements(ops); weights > 0) {
      DTSIM_ASSIGN_OR_RETURN(piece.weight_cast,
                             cost_.PriceOrError(models::Fp8WeightQuantizeOp(
                                 dtype_, fp8_, weights, models::Pass::kForward)));
    }
    return piece;
  }

 private:
  const models::OpCostModel& cost_;
  bool grid_;
  DType dtype_;
  models::Fp8Recipe fp8_;
  std::vector<models::OpCost> sources_;
};

}  // namespace

Expected<PricedModel> PriceModel(const ResolvedConfig& config, const models::OpCostModel& cost) {
  const models::TransformerSpec& spec = config.model.transformer;
  const models::TransformerShard shard = ShardOf(config);
  Pricer pricer(cost, config.plan.on_grid(), config.training.dtype, config.training.fp8);
  PricedModel model;
  model.recompute_every = config.training.recompute_every;
  std::array<bool, models::TransformerSpec::kLayerKinds> priced{};
  for (int index = 0; index < spec.AllLayers(); ++index) {
    const auto kind = static_cast<size_t>(spec.LayerKind(index));
    if (priced[kind]) continue;
    const models::LayerOps ops = models::TransformerLayerOps(spec, index, shard);
    DTSIM_ASSIGN_OR_RETURN(model.layers[kind], pricer.Piece(ops, config.training.recompute));
    if (model.recompute_every > 1) {
      DTSIM_ASSIGN_OR_RETURN(model.kept[kind], pricer.Piece(ops, std::nullopt));
    }
    priced[kind] = true;
  }
  DTSIM_ASSIGN_OR_RETURN(model.embedding,
                         pricer.Piece(models::EmbeddingOps(spec, shard), std::nullopt));
  DTSIM_ASSIGN_OR_RETURN(model.output, pricer.Piece(models::OutputOps(spec, shard), std::nullopt));
  return model;
}

}  // namespace dtsim::strategies
