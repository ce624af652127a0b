// One description of what a micro-batch's pass puts on a rank's streams, op by op — its
// compute, the 1D tensor-parallel reductions and expert all-to-alls after Megatron's
// boundaries, a grid's row-statistics all-reduces and SUMMA steps — and its two consumers:
// the graph builder emits it as tasks (transformer_iteration.cc) and the search's lower bound
// prices it (pass_times.cc), so the bound cannot drift from what is simulated
// (docs/strategies.md).
#pragma once

#include <cstdint>
#include <vector>

#include "models/ops.h"
#include "sim/base/time.h"
#include "sim/base/units.h"
#include "sim/graph/task.h"
#include "strategies/config.h"
#include "strategies/priced_passes.h"

namespace dtsim::strategies {

// Where a collective runs: over the rank's t tensor-parallel peers (1D), or inside one depth
// layer of a 2D/2.5D grid over ROW, the q ranks of a grid row (tensor indices i + q·(j + q·k)
// for i = 0..q−1, adjacent), or COL, those of a grid column (j varies), or over the rank's c
// context-parallel peers (the same tensor index and stage, c adjacent data indices).
enum class CommGroup : uint8_t { kTensor, kGridRow, kGridColumn, kContext };

// One collective of the layout; a broadcast's or reduce's root is the member at `root` along
// the grid axis.
struct LayoutComm {
  graph::CommKind kind = graph::CommKind::kAllReduce;
  Bytes bytes;
  CommGroup group = CommGroup::kTensor;
  int root = 0;
};

// One SUMMA step of a weight GEMM: what is broadcast before its 1/q chunk of the GEMM, and what
// is reduced after it.
struct SummaStep {
  std::vector<LayoutComm> before, after;
};

// Chunk k of an op's `duration` split into `count` (a SUMMA step's, a ring attention chunk's):
// the chunks add up to the duration exactly.
inline DurationNs LayoutChunk(DurationNs duration, int64_t k, int64_t count) {
  return DurationNs(duration.ns() * (k + 1) / count - duration.ns() * k / count);
}

// What the layout hands its consumer, in order.
class LayoutSink {
 public:
  virtual ~LayoutSink() = default;
  // The op's compute on the rank's compute stream.
  virtual void Compute(const PricedOp& op) = 0;
  // The op as SUMMA steps, each a 1/q chunk of it between its broadcasts and reduces.
  virtual void Summa(const PricedOp& op, const std::vector<SummaStep>& steps) = 0;
  // A collective the compute stream waits for (tensor-parallel reduction, row statistics,
  // context parallelism's all-to-alls).
  virtual void Collective(const LayoutComm& comm) = 0;
  // Ring attention (context parallelism, p2p): the op as shifts.size() + 1 chunks, shift k
  // hidden behind chunk k, then the `trailing` shift (none in forward) the next op waits for.
  virtual void Ring(const PricedOp& op, const std::vector<LayoutComm>& shifts,
                    const std::vector<LayoutComm>& trailing) = 0;
  // The expert-parallel all-to-all of the rank's tokens.
  virtual void ExpertAllToAll() = 0;
  // A collective of `kind` over the expert-tensor group on the tokens the rank's experts hold
  // (its size, like the all-to-all's, follows the routing): the all-gather after the dispatch's
  // all-to-all, the reduce-scatter before the combine's (models::Op::Boundary).
  virtual void ExpertTensor(graph::CommKind kind) = 0;
  // The op on the compute stream with `comm` (tensor-parallel) beside it from the op's start;
  // what follows the op waits for both (sequence parallelism's backward re-gather, the async
  // input-gradient reduction beside a wgrad).
  virtual void Overlapped(const PricedOp& op, const LayoutComm& comm) = 0;
};

class MicrobatchLayout {
 public:
  explicit MicrobatchLayout(const SimulationConfig& config);

  // One op and what follows it.
  void LayOut(const PricedOp& op, LayoutSink& sink) const;

  // The embedding's tensor-parallel collectives: 1D, the all-reduce (reduce-scatter) of the
  // vocabulary-parallel lookup in forward; on a grid, VocabParallelEmbedding2D's reduce-scatter
  // over COL of the depth layer's B/d tokens × h/q in forward and its all-gather in backward.
  std::vector<LayoutComm> EmbeddingComms(models::Pass pass) const;
  // The output layer's: 1D, the tensor-parallel reduction ending its backward; in forward, for
  // a model whose layers gather MLA's latents rather than the hidden state under sequence
  // parallelism, the all-gather of the final norm's shard the column-parallel output layer
  // needs (with standard attention the last layer's reduction carries it).
  std::vector<LayoutComm> OutputComms(models::Pass pass) const;

  // The b·s·h activations of a micro-batch on a rank (b·s/c·h under context parallelism).
  Bytes ActivationBytes() const;

  // Context parallelism's communication around the core attention (docs/strategies.md,
  // "Context parallelism"): the bytes of the rank's K and V (one ring block), and of its Q, K,
  // V and of its attention output (what the a2a variant exchanges).
  Bytes KvBlockBytes() const;
  Bytes QkvBytes() const;
  Bytes AttentionOutputBytes() const;

 private:
  // A tensor-parallel all-reduce of the activations, or with sequence parallelism the
  // reduce-scatter and all-gather it splits into (same bytes; docs/strategies.md; under FP8
  // the all-gather moves FP8, after current scaling's amax all-reduce). `reduce_columns` and
  // `gather_columns` are the widths per token where not the hidden size (0): MLA's latents
  // (models::Op::reduce_columns, kNoReduce: no reduction, only the gather under SP;
  // gather_columns models::Op::kNoGather: no all-gather).
  std::vector<LayoutComm> TensorReduce(int64_t reduce_columns = 0,
                                       int64_t gather_columns = 0) const;
  // The bytes of `columns` elements a token (0: the hidden size) for the micro-batch's tokens.
  Bytes ColumnBytes(int64_t columns) const;
  // Tokens on one rank of a grid: the micro-batch's b·s split q·d ways.
  int64_t GridTokens() const;
  std::vector<SummaStep> SummaSteps(const PricedOp& op) const;
  void ContextAttention(const PricedOp& op, LayoutSink& sink) const;
  // Whether the tensor-parallel reduction after `op` runs beside it (TensorOverlap::kAsync).
  bool ReducesBesideWgrad(const PricedOp& op) const;

  const SimulationConfig& config_;
  TensorOverlap tensor_overlap_;
};

}  // namespace dtsim::strategies
