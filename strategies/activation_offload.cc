#include "strategies/activation_offload.h"

#include <fmt/format.h>

#include <cmath>

#include "models/memory.h"
#include "strategies/categories.h"
#include "strategies/stage_memory.h"

namespace dtsim::strategies {

using models::OffloadHandler;

ActivationOffload::ActivationOffload(graph::TaskGraphBuilder& builder, const ResolvedConfig& config)
    : builder_(builder), rate_(config.gpu.host_bandwidth) {
  const int offloaded = config.training.activation_offload_layers;
  if (offloaded <= 0 || config.plan.pipeline != 1 || rate_.bits_per_second() <= 0) return;
  const models::TransformerSpec& spec = config.model.transformer;
  const models::MemoryPlan memory = MemoryPlanOf(config, 0);
  handler_ = memory.offload_handler;
  anchors_ = models::OffloadAnchors(spec.layers, offloaded, handler_);
  for (int layer = 0; layer < offloaded; ++layer) {
    bytes_.push_back(models::LayerKeptBytes(spec, memory, layer));
    out_names_.push_back(fmt::format("layer{} offload", layer));
    in_names_.push_back(fmt::format("layer{} reload", layer));
    freed_names_.push_back(fmt::format("layer{} offloaded", layer));
  }
  out_.resize(static_cast<size_t>(offloaded));
  in_.resize(static_cast<size_t>(offloaded));
}

DurationNs ActivationOffload::CopyTime(int layer) const {
  const double seconds = static_cast<double>(bytes_[static_cast<size_t>(layer)]) * 8.0 /
                         static_cast<double>(rate_.bits_per_second());
  return DurationNs(std::llround(seconds * 1e9));
}

std::optional<int> ActivationOffload::AnchoredAt(int layer) const {
  for (size_t i = 0; i < anchors_.size(); ++i) {
    if (anchors_[i] == layer) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::vector<graph::TaskId> ActivationOffload::Copy(PeerGroup& group, StreamRole role, int layer,
                                                   bool out) {
  group.Flush();
  const std::string& name = (out ? out_names_ : in_names_)[static_cast<size_t>(layer)];
  std::vector<graph::TaskId> copies;
  for (size_t i = 0; i < group.ranks().size(); ++i) {
    const graph::TaskId copy =
        builder_.AddTask(RoleStream(builder_, group.ranks()[i], role), graph::TaskKind::kMemcpy,
                         name, kOffloadCategory, CopyTime(layer));
    const bool from_start =
        out && handler_ == OffloadHandler::kSynchronizer && i < layer_start_.size();
    const std::optional<graph::TaskId> after = from_start ? layer_start_[i] : group.last(i);
    if (after) builder_.AddDependency(copy, *after);
    copies.push_back(copy);
  }
  return copies;
}

void ActivationOffload::WaitOut(PeerGroup& group, const std::vector<graph::TaskId>& copies,
                                int layer) {
  group.WaitBefore(copies);
  group.Mark(freed_names_[static_cast<size_t>(layer)], kOffloadCategory);
  for (size_t i = 0; i < group.ranks().size() && draw_memory_; ++i) {
    builder_.AddMemoryChange(*group.last(i), -bytes_[static_cast<size_t>(layer)]);
  }
}

std::vector<graph::TaskId> ActivationOffload::Reload(PeerGroup& group, StreamRole role, int layer) {
  group.Flush();
  for (size_t i = 0; i < group.ranks().size() && draw_memory_; ++i) {
    if (const std::optional<graph::TaskId> last = group.last(i)) {
      builder_.AddMemoryChange(*last, bytes_[static_cast<size_t>(layer)]);
    }
  }
  return Copy(group, role, layer, false);
}

void ActivationOffload::BeforeForward(PeerGroup& group, int layer) {
  if (!active() || handler_ != OffloadHandler::kSynchronizer ||
      layer >= static_cast<int>(anchors_.size())) {
    return;
  }
  group.Flush();
  layer_start_.clear();
  for (size_t i = 0; i < group.ranks().size(); ++i) layer_start_.push_back(group.last(i));
}

void ActivationOffload::AfterForward(PeerGroup& group, int layer) {
  if (!active()) return;
  const int offloaded = static_cast<int>(anchors_.size());
  if (handler_ == OffloadHandler::kSynchronizer) {
    // Layer i's copy, from its forward's start (BeforeForward); the layer anchored here must be
    // out before the next layer's forward.
    if (layer < offloaded) {
      out_[static_cast<size_t>(layer)] = Copy(group, StreamRole::kOffload, layer, true);
    }
    if (const std::optional<int> out = AnchoredAt(layer)) {
      WaitOut(group, out_[static_cast<size_t>(*out)], *out);
    }
    return;
  }
  // v1: one copy out at a time, the first after layer 0, each next one started where the
  // compute waits for the one before (both ways: d2h_stream.wait_stream, then the reverse).
  if (layer == 0) {
    next_ = 0;
    out_[0] = Copy(group, StreamRole::kOffloadOut, 0, true);
  }
  if (next_ >= offloaded || anchors_[static_cast<size_t>(next_)] != layer) return;
  WaitOut(group, out_[static_cast<size_t>(next_)], next_);
  if (const int following = next_ + 1; following < offloaded) {
    out_[static_cast<size_t>(following)] = Copy(group, StreamRole::kOffloadOut, following, true);
  }
  ++next_;
}

void ActivationOffload::BeforeBackward(PeerGroup& group, int layer) {
  if (!active()) return;
  const int offloaded = static_cast<int>(anchors_.size());
  if (handler_ == OffloadHandler::kSynchronizer) {
    // The layer anchored here starts back; a layer's own backward waits for it.
    if (const std::optional<int> back = AnchoredAt(layer)) {
      in_[static_cast<size_t>(*back)] = Reload(group, StreamRole::kOffload, *back);
    }
    if (layer < offloaded) group.WaitBefore(in_[static_cast<size_t>(layer)]);
    return;
  }
  // v1: at an anchor the streams wait for each other, and the layer anchored there starts
  // back; before layer 0 the compute waits for the last copy back.
  const std::optional<int> back = AnchoredAt(layer);
  if (back && *back == next_ - 1) {
    if (const int before = *back + 1; before < offloaded) {
      group.WaitBefore(in_[static_cast<size_t>(before)]);
    }
    in_[static_cast<size_t>(*back)] = Reload(group, StreamRole::kOffloadIn, *back);
    if (next_ > 1) --next_;
  }
  if (layer == 0) {
    group.WaitBefore(in_[0]);
    next_ = 0;
  }
}

}  // namespace dtsim::strategies
