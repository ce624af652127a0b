#include "models/activation_offload.h"

namespace dtsim::models {

std::vector<int> OffloadWindows(int layers, int offloaded) {
  std::vector<int> windows;
  if (offloaded <= 0 || layers <= 0) return windows;
  const int per_group = layers / offloaded;
  const int spare = layers % offloaded;  // the first `spare` groups take one layer more
  windows.reserve(static_cast<size_t>(offloaded));
  for (int i = 0; i < offloaded; ++i) {
    windows.push_back(per_group * (i + 1) - 1 + (i < spare ? i + 1 : spare));
  }
  return windows;
}

std::vector<int> OffloadAnchors(int layers, int offloaded, OffloadHandler handler) {
  if (handler == OffloadHandler::kV1) return OffloadWindows(layers, offloaded);
  std::vector<int> anchors;
  if (offloaded <= 0 || layers <= 0) return anchors;
  for (int i = 0; i < offloaded; ++i) anchors.push_back(layers - offloaded - 1 + i);
  return anchors;
}

bool OffloadedLayerResident(std::span<const int> anchors, int layer, int now) {
  if (layer < 0 || static_cast<size_t>(layer) >= anchors.size()) return true;
  return anchors[static_cast<size_t>(layer)] >= now;
}

}  // namespace dtsim::models
