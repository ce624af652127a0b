#include "strategies/microbatch_layout.h"

#include <algorithm>
#include <cmath>

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using models::Op;

}  // namespace

MicrobatchLayout::MicrobatchLayout(const SimulationConfig& config)
    : config_(config), tensor_overlap_(TensorOverlapOf(config)) {}

Bytes MicrobatchLayout::ActivationBytes() const {
  return Bytes(ShardOf(config_).tokens() * config_.model.transformer.hidden *
               DTypeBytes(config_.training.dtype));
}

// Widths per token on a tensor-parallel rank: Q is its heads/t heads, K and V its KV heads
// (replicated when there are fewer than t), head_dim each (V and the output v_head_dim: they
// differ under MLA); attention stays in the activation dtype under FP8.
Bytes MicrobatchLayout::KvBlockBytes() const {
  const models::TransformerSpec& spec = config_.model.transformer;
  const int64_t kv_heads = std::max<int64_t>(1, spec.kv_heads / config_.plan.tensor);
  return Bytes(ShardOf(config_).tokens() * kv_heads * (spec.head_dim() + spec.v_head_dim()) *
               DTypeBytes(config_.training.dtype));
}

Bytes MicrobatchLayout::AttentionOutputBytes() const {
  const models::TransformerSpec& spec = config_.model.transformer;
  return Bytes(ShardOf(config_).tokens() * spec.heads / config_.plan.tensor * spec.v_head_dim() *
               DTypeBytes(config_.training.dtype));
}

Bytes MicrobatchLayout::QkvBytes() const {
  const models::TransformerSpec& spec = config_.model.transformer;
  const Bytes q(ShardOf(config_).tokens() * spec.heads / config_.plan.tensor * spec.head_dim() *
                DTypeBytes(config_.training.dtype));
  return Bytes(q.count() + KvBlockBytes().count());
}

// p2p (Transformer Engine's AttnFuncWithCPAndKVP2P): forward and recompute pass the K/V block
// c − 1 times around the ring; backward passes K/V with its gradient dK/dV (2× the bytes)
// c − 1 times, and the finished dK/dV one hop home at the end. a2a: Q, K, V all-to-all before
// the whole-sequence attention and the output after it; backward mirrors it (dO before, dQ, dK,
// dV after).
void MicrobatchLayout::ContextAttention(const PricedOp& op, LayoutSink& sink) const {
  const bool backward = op.pass == models::Pass::kBackward;
  const auto context = [](CommKind kind, Bytes bytes) {
    return LayoutComm{.kind = kind, .bytes = bytes, .group = CommGroup::kContext};
  };
  if (config_.plan.context_comm == models::ContextComm::kAllToAll) {
    sink.Collective(context(CommKind::kAllToAll, backward ? AttentionOutputBytes() : QkvBytes()));
    sink.Compute(op);
    sink.Collective(context(CommKind::kAllToAll, backward ? QkvBytes() : AttentionOutputBytes()));
    return;
  }
  const Bytes block = KvBlockBytes();
  const std::vector<LayoutComm> shifts(static_cast<size_t>(config_.plan.context - 1),
                                       context(CommKind::kShift, backward ? block * 2 : block));
  std::vector<LayoutComm> trailing;
  if (backward) trailing.push_back(context(CommKind::kShift, block));
  sink.Ring(op, shifts, trailing);
}

int64_t MicrobatchLayout::GridTokens() const {
  return config_.training.micro_batch / ShardOf(config_).batch_split() * config_.training.seq_len;
}

Bytes MicrobatchLayout::ColumnBytes(int64_t columns) const {
  if (columns <= 0) return ActivationBytes();
  return Bytes(ShardOf(config_).tokens() * columns * DTypeBytes(config_.training.dtype));
}

std::vector<LayoutComm> MicrobatchLayout::TensorReduce(int64_t reduce_columns,
                                                       int64_t gather_columns) const {
  std::vector<LayoutComm> comms;
  if (reduce_columns != models::Op::kNoReduce) {
    const Bytes reduced = ColumnBytes(reduce_columns);
    if (!config_.plan.sequence_parallel) return {{CommKind::kAllReduce, reduced}};
    comms.push_back({CommKind::kReduceScatter, reduced});
  } else if (!config_.plan.sequence_parallel) {
    return comms;  // a gather-only boundary: nothing without sequence parallelism
  }
  if (gather_columns == models::Op::kNoGather) return comms;
  const int64_t shard = ColumnBytes(gather_columns).count() / config_.plan.tensor;
  const models::Fp8Recipe fp8 = config_.training.fp8;
  if (fp8 == models::Fp8Recipe::kNone) {
    comms.push_back({CommKind::kAllGather, Bytes(shard)});
    return comms;
  }
  // Under FP8, Transformer Engine quantizes the shard before the all-gather — in forward (and
  // recompute) the next column-parallel linear's input, in backward the row-parallel linear's
  // output gradient (grad_output_preprocess) — which then moves FP8 with its scales. Under
  // current scaling the ranks first agree on one scale: an all-reduce (max) over the TP group of
  // the shard's row- and column-wise amaxes, coalesced (Float8CurrentScalingQuantizer's
  // with_amax_reduction; 2 × 4 B).
  if (fp8 == models::Fp8Recipe::kCurrent) comms.push_back({CommKind::kAllReduce, Bytes(8)});
  const auto gathered = static_cast<int64_t>(std::ceil(
      static_cast<double>(shard) / DTypeBytes(config_.training.dtype) * models::Fp8CopyBytes(fp8)));
  comms.push_back({CommKind::kAllGather, Bytes(gathered)});
  return comms;
}

// Megatron's async input-gradient reduction (tensor_parallel/layers.py,
// LinearWithGradAccumulationAndAsyncCommunication.backward: the all-reduce, or under sequence
// parallelism the reduce-scatter, of the dgrad's output is issued with async_op=True before the
// weight-gradient GEMM and waited for after it; CUDA_DEVICE_MAX_CONNECTIONS=1 keeps that order;
// Transformer Engine's Linear and LayerNormLinear backward the same): the reduction a
// column-parallel linear's wgrad is followed by runs beside that wgrad.
bool MicrobatchLayout::ReducesBesideWgrad(const PricedOp& op) const {
  return op.wgrad && op.after == After::kTensor && op.reduce_columns != models::Op::kNoReduce &&
         config_.plan.tensor > 1 && tensor_overlap_ != TensorOverlap::kNone;
}

void MicrobatchLayout::LayOut(const PricedOp& op, LayoutSink& sink) const {
  if (ReducesBesideWgrad(op)) {
    const std::vector<LayoutComm> comms = TensorReduce(op.reduce_columns, op.gather_columns);
    sink.Overlapped(op, comms.front());  // the reduction; what follows it waits as before
    for (size_t i = 1; i < comms.size(); ++i) sink.Collective(comms[i]);
    return;
  }
  if (op.attention && config_.plan.context > 1) {
    ContextAttention(op, sink);
  } else if (op.summa != Op::WeightGemm::kNone) {
    sink.Summa(op, SummaSteps(op));
  } else if (op.regather_bytes > 0 && config_.plan.tensor > 1) {
    sink.Overlapped(op, {CommKind::kAllGather, Bytes(op.regather_bytes)});
  } else {
    sink.Compute(op);
  }
  switch (op.after) {
    case After::kTensor:
      for (const LayoutComm& comm : TensorReduce(op.reduce_columns, op.gather_columns)) {
        sink.Collective(comm);
      }
      break;
    case After::kExpertDispatch:
      sink.ExpertAllToAll();
      if (ShardOf(config_).expert_gather() > 1) sink.ExpertTensor(CommKind::kAllGather);
      break;
    case After::kExpertCombine:
      if (ShardOf(config_).expert_gather() > 1) sink.ExpertTensor(CommKind::kReduceScatter);
      sink.ExpertAllToAll();
      break;
    case After::kRowStats: {
      // LayerNorm2D: the per-token sum and sum of squares, one all-reduce each over the ROW
      // group, in forward and backward (the loss: its max and sum of exponentials).
      const LayoutComm stats{CommKind::kAllReduce,
                             Bytes(GridTokens() * DTypeBytes(config_.training.dtype)),
                             CommGroup::kGridRow};
      sink.Collective(stats);
      sink.Collective(stats);
      break;
    }
    case After::kNothing:
      break;
  }
}

// SUMMA (ColossalAI's Matmul_AB/ABT/ATB_2D, per depth layer for 2.5D), q steps each: forward
// C = XW broadcasts the X block over ROW and the W block over COL; dgrad dX = dY·Wᵀ broadcasts
// W over COL and reduces the partial dX block over ROW; wgrad dW = Xᵀ·dY broadcasts X over ROW
// and reduces the partial dW block over COL (docs/strategies.md). Step s moves the blocks from
// (to) row/column s.
std::vector<SummaStep> MicrobatchLayout::SummaSteps(const PricedOp& op) const {
  const int64_t e = DTypeBytes(config_.training.dtype);
  const Bytes activation(op.activation_block * e);
  const Bytes weight(op.weight_block * e);
  const int q = config_.plan.grid();
  std::vector<SummaStep> steps(static_cast<size_t>(q));
  for (int s = 0; s < q; ++s) {
    const LayoutComm x_row{CommKind::kBroadcast, activation, CommGroup::kGridRow, s};
    const LayoutComm w_column{CommKind::kBroadcast, weight, CommGroup::kGridColumn, s};
    SummaStep& step = steps[static_cast<size_t>(s)];
    switch (op.summa) {
      case Op::WeightGemm::kForward:
        step.before = {x_row, w_column};
        break;
      case Op::WeightGemm::kDgrad:
        step.before = {w_column};
        step.after = {{CommKind::kReduce, activation, CommGroup::kGridRow, s}};
        break;
      case Op::WeightGemm::kWgrad:
        step.before = {x_row};
        step.after = {{CommKind::kReduce, weight, CommGroup::kGridColumn, s}};
        break;
      case Op::WeightGemm::kNone:
        break;
    }
  }
  return steps;
}

std::vector<LayoutComm> MicrobatchLayout::EmbeddingComms(models::Pass pass) const {
  const bool backward = pass == models::Pass::kBackward;
  if (!config_.plan.on_grid()) {
    if (backward) return {};
    return TensorReduce(0, config_.model.transformer.AttentionInputColumns());  // its input
  }
  const Bytes bytes(GridTokens() * config_.model.transformer.hidden *
                    DTypeBytes(config_.training.dtype));
  return {
      {backward ? CommKind::kAllGather : CommKind::kReduceScatter, bytes, CommGroup::kGridColumn}};
}

std::vector<LayoutComm> MicrobatchLayout::OutputComms(models::Pass pass) const {
  if (config_.plan.on_grid()) return {};
  if (pass == models::Pass::kBackward) {
    // The loss's input gradient, reduced; gathered for the last layer's row-parallel linear
    // unless its block is a MoE block without shared experts, which takes the shard.
    const models::TransformerSpec& spec = config_.model.transformer;
    return TensorReduce(0, spec.RoutedOnlyMlp(spec.layers - 1) ? models::Op::kNoGather : 0);
  }
  if (!config_.model.transformer.mla.enabled() || !config_.plan.sequence_parallel) return {};
  return {{CommKind::kAllGather, Bytes(ActivationBytes().count() / config_.plan.tensor)}};
}

}  // namespace dtsim::strategies
