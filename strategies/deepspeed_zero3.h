// DeepSpeed's ZeRO-3 as releases before 0.5.5 ran it (docs/strategies.md, "DeepSpeed ZeRO-3"),
// from deepspeed/runtime/zero/stage3.py and partition_parameters.py at v0.3.13:
// - Every parameter above `param_persistence_threshold` (1e5 elements) is all-gathered on its
//   own before its submodule runs (fetch_sub_module), and released after it (release_sub_module)
//   unless its next use is fewer than `max_reuse_distance` (1e9 by default) elements of other
//   parameters' uses away (_keep_for_later); smaller parameters stay whole (persistent).
// - Each gather is bracketed by torch.cuda.synchronize() (_allgather_param, then
//   _synchronize_communication): "the async version is not async at all" (DeepSpeed PR #1188,
//   released in 0.5.5), so no gather overlaps compute.
// - Gathers go through torch.distributed's list API, which copies each of the p ranks' parts
//   out of a flat buffer (ProcessGroupNCCL::allgather); every gradient is reduce-scattered on
//   its own through the same API, p copies in (_reduce_scatter_gradients), and the next fetch's
//   device-wide synchronize waits for it.
// Later releases gather a submodule's parameters in one coalesced collective with prefetching
// that overlaps compute: dtsim's ZeRO-3 model (ParameterGathers) stands for them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "models/gpu.h"
#include "models/ops.h"
#include "strategies/compression.h"
#include "strategies/config.h"

namespace dtsim::strategies {

inline constexpr int64_t kDeepSpeedPersistenceThreshold = 100'000;
// max_reuse_distance is the config's (training.deepspeed.stage3_max_reuse_distance,
// models::DeepSpeedZero: 1e9 by default), which the memory model reads too.
// The first release with coalesced, overlapped gathers.
inline constexpr std::array<int, 3> kDeepSpeedCoalescedRelease = {0, 5, 5};

// Whether the plan runs ZeRO-3 as DeepSpeed before 0.5.5 did: framework "deepspeed" at a
// framework_version below 0.5.5, ZeRO-3 over two or more ranks.
bool SynchronizedZero3(const SimulationConfig& config);

// One use of a parameter in a micro-batch's passes, in order.
struct ParameterUse {
  int parameter = 0;
  int64_t elements = 0;
};
// For each use, whether it gathers: the parameter is not gathered at that point, either never
// yet or released after its previous use because its next use lay `max_reuse_distance`
// elements of other uses or more away.
std::vector<bool> GatheredUses(std::span<const ParameterUse> uses, int64_t max_reuse_distance);

// The parameters each piece gathers before each of its passes, for a model on one pipeline
// stage (DeepSpeed's pipeline engine runs ZeRO-1 at most): one micro-batch's forward (the
// embedding, the layers in order, the output layer) then its backward (the output layer, each
// layer's recompute and backward in reverse, the embedding), each weight matrix one parameter.
class DeepSpeedGathers {
 public:
  explicit DeepSpeedGathers(const SimulationConfig& config);
  // Piece 0 the embedding, 1 the output layer, 2 + i layer i: the elements of each parameter
  // gathered before its forward (`backward` false) or before its recompute and backward.
  std::span<const int64_t> At(size_t piece, bool backward) const;

 private:
  std::vector<std::array<std::vector<int64_t>, 2>> gathers_;
};

// The parameter tensors of a piece's gradients, each reduce-scattered on its own: its matrices,
// then its vectors (biases and norm weights, counted from the model).
std::vector<int64_t> ParameterTensors(const models::TransformerSpec& spec,
                                      const GradientTensors& gradients, bool layer);

// The copies torch.distributed's list API makes around one collective over `ranks` ranks:
// `ranks` copies of `part_elements` elements each (read and written once).
models::Op ListApiCopy(int64_t part_elements, DType dtype, models::Pass pass);

// The buffer a gather of `elements` elements (the parameter padded to a multiple of the ranks)
// lands in, zeroed first (_allgather_param's torch.zeros, before its synchronize): written once.
models::Op GatherBufferZeros(int64_t elements, DType dtype, models::Pass pass);

// The host's time around one of these collectives over `ranks` ranks, which the GPU waits for
// (docs/strategies.md, "DeepSpeed ZeRO-3"):
// - `loop`: DeepSpeed's Python loop over the ranks building the list of parts, before the
//   collective is launched — _allgather_param's narrow() and get_rank() a rank, or
//   _reduce_scatter_gradient's view().narrow() a rank (kGatherListPerRank,
//   kReduceScatterListPerRank);
// - `copies`: ProcessGroupNCCL's loop issuing the list API's copies, one copy_ (its dispatch,
//   kCopyDispatch, and its cudaMemcpyAsync, the GPU's host_launch_time) a rank: after the
//   all-gather's launch, beside it; before the reduce-scatter's.
struct ListApiHost {
  DurationNs loop;
  DurationNs copies;
};
ListApiHost GatherHost(int ranks, const models::GpuSpec& gpu);
ListApiHost ReduceScatterHost(int ranks, const models::GpuSpec& gpu);

// Measured (tools/dev/deepspeed_list_loops.py: the loops as DeepSpeed 0.3.13 writes them, on
// CPU tensors, Python 3.11 and PyTorch 1.13 on the development machine's AMD EPYC, Zen 5, of
// 2025; medians of three runs): 1.74 µs and 2.05 µs a rank, a small tensor's copy_ 0.55 µs. A
// 2021 host (Python 3.8, PyTorch 1.8, DGX A100's Zen 2 EPYC 7742) ran them slower: lower bounds.
inline constexpr DurationNs kGatherListPerRank = DurationNs(1'740);
inline constexpr DurationNs kReduceScatterListPerRank = DurationNs(2'050);
inline constexpr DurationNs kCopyDispatch = DurationNs(550);

}  // namespace dtsim::strategies
