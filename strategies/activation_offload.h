// Activation offloading's copies in the iteration graph, as Transformer Engine runs them under
// Megatron-Core's --cpu-offloading-num-layers (models/activation_offload.h: which layers, their
// anchors, the two handlers). Each offloaded layer's saved activations (models::LayerKeptBytes)
// go to host memory and come back on the rank's offload streams, at the GPU's host link rate
// (GpuSpec::host_bandwidth); the compute stream waits for a copy where TE synchronizes — so a
// copy costs time only where it outlasts the compute it runs beside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/activation_offload.h"
#include "sim/graph/builder.h"
#include "strategies/config.h"
#include "strategies/peer_group.h"

namespace dtsim::strategies {

class ActivationOffload {
 public:
  // Inactive unless the config offloads (training.activation_offload_layers, one stage).
  ActivationOffload(graph::TaskGraphBuilder& builder, const ResolvedConfig& config);

  bool active() const { return !anchors_.empty(); }
  // Whether the copies move the timeline's memory track (graph::MemoryChange): an offloaded
  // layer's tensors leave the device where the compute stream has waited for its copy out
  // (a zero-length "layerN offloaded" mark) and are back from the start of its copy back. Only
  // where the iteration draws the track (the layers' kept bytes added and removed).
  void DrawMemory(bool draw) { draw_memory_ = draw; }

  // Before layer `layer`'s forward: under TE 2.10's handler each tensor an offloaded layer
  // saves is copied out as soon as it is made (an event per tensor), so its copy may start with
  // the layer (taken as starting then, at the link's rate).
  void BeforeForward(PeerGroup& group, int layer);
  // After layer `layer`'s forward (a micro-batch's layers in order): copies out start, and the
  // compute stream waits for the copy of the layer anchored here.
  void AfterForward(PeerGroup& group, int layer);
  // Before layer `layer`'s backward (in reverse order): the copy back of the layer anchored
  // here starts, and the compute stream waits for what the layer's backward needs back.
  void BeforeBackward(PeerGroup& group, int layer);

 private:
  // A copy of offloaded layer `layer`'s tensors on each peer's `role` stream, after the peer's
  // last task so far.
  std::vector<graph::TaskId> Copy(PeerGroup& group, StreamRole role, int layer, bool out);
  std::vector<std::optional<graph::TaskId>> layer_start_;  // per peer: before the layer (2.10)
  DurationNs CopyTime(int layer) const;
  // The compute stream waits for `copies` (offloaded layer `layer`'s out); a mark on it then
  // frees the layer's device tensors.
  void WaitOut(PeerGroup& group, const std::vector<graph::TaskId>& copies, int layer);
  // Offloaded layer `layer` comes back: buffers allocated now, its copy after the compute so far.
  std::vector<graph::TaskId> Reload(PeerGroup& group, StreamRole role, int layer);
  // The offloaded layer anchored at `layer`, if any.
  std::optional<int> AnchoredAt(int layer) const;

  graph::TaskGraphBuilder& builder_;
  models::OffloadHandler handler_ = models::OffloadHandler::kSynchronizer;
  std::vector<int> anchors_;    // by offloaded layer
  std::vector<int64_t> bytes_;  // what each offloaded layer copies
  Bandwidth rate_;
  std::vector<std::string> out_names_, in_names_, freed_names_;  // by offloaded layer
  bool draw_memory_ = false;
  // Each offloaded layer's copies out and back, per peer (this micro-batch's).
  std::vector<std::vector<graph::TaskId>> out_, in_;
  int next_ = 0;  // v1: the next offloaded layer to wait for (TE's offloaded_group_count)
};

}  // namespace dtsim::strategies
