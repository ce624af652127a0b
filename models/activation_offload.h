// Activation offloading to host memory as Transformer Engine runs it under Megatron-Core's
// --cpu-offloading-num-layers N (megatron/core/transformer/transformer_block.py passes N and
// the model's L layers to TE's get_cpu_offload_context, and marks each layer's end): the first
// N layers' saved activations are copied to pinned host memory after their forward and back
// before their backward. Offloaded layer i leaves the device after the forward of its anchor
// layer a_i (the compute stream waits there for its copy out) and is back from the backward of
// a_i on (its copy back starts there); Megatron-Core refuses N ≥ L, pipeline parallelism and
// activation recompute with it (TransformerConfig.__post_init__). Two handlers:
//
// - TE 2.10 and later (transformer_engine/pytorch/cpu_offload.py, OffloadSynchronizer's default
//   maps): a_i = L − N − 1 + i. Layer i's copy out starts once its forward has run, and its
//   copy back must be done before its own backward; one "offload" stream carries both ways.
//   At most L − N layers' activations are on the device at once.
// - TE before 2.10, or NVTE_CPU_OFFLOAD_V1=1 (cpu_offload_v1.py,
//   AsyncDoubleBufferGroupOffloadHandler): a_i = w_i, its layer_window_map — ⌊L/N⌋(i + 1) − 1,
//   plus i + 1 for the first L mod N layers and L mod N after them (w_{N−1} = L − 1). Copies
//   out run one at a time on a device-to-host stream, each starting at the previous one's
//   anchor (the first after layer 0); copies back on a host-to-device stream, the compute
//   waiting for the one before at each anchor and for the last before layer 0's backward.
//   At most L − N + 1 layers' activations are on the device at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::models {

enum class OffloadHandler : uint8_t { kSynchronizer, kV1 };

// TE's layer_window_map for `offloaded` (N, 1 ≤ N < L) of `layers` (L): w_0 … w_{N−1}.
std::vector<int> OffloadWindows(int layers, int offloaded);

// Each offloaded layer's anchor a_i under `handler` (empty when none is offloaded).
std::vector<int> OffloadAnchors(int layers, int offloaded, OffloadHandler handler);

// Whether layer `layer`'s saved activations are on the device while layer `now` runs its
// backward pass (now ≥ layer; now = L: the loss, after the forward): always for a layer that
// is not offloaded, and for an offloaded one from its anchor's backward on.
bool OffloadedLayerResident(std::span<const int> anchors, int layer, int now);

}  // namespace dtsim::models
