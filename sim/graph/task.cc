#include "sim/graph/task.h"

#include <array>

namespace dtsim::graph {
namespace {

constexpr std::array<std::string_view, 6> kTaskKindNames = {"compute", "memcpy", "collective",
                                                            "send",    "recv",   "delay"};
// Index = CommKind value; the last entry is the send/recv pair, not a collective name.
constexpr std::array<std::string_view, 9> kCommKindNames = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
    "reduce",     "barrier",    "shift",          "send_recv"};
constexpr std::array<std::string_view, 3> kStreamOrderNames = {"in_order", "ready_first",
                                                               "unbounded"};

}  // namespace

std::string_view TaskKindName(TaskKind kind) { return kTaskKindNames[static_cast<size_t>(kind)]; }

std::optional<TaskKind> TaskKindFromName(std::string_view name) {
  for (size_t i = 0; i < kTaskKindNames.size(); ++i) {
    if (kTaskKindNames[i] == name) return static_cast<TaskKind>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> TaskKindNames() { return kTaskKindNames; }

std::string_view CommKindName(CommKind kind) { return kCommKindNames[static_cast<size_t>(kind)]; }

std::optional<CommKind> CollectiveKindFromName(std::string_view name) {
  for (size_t i = 0; i + 1 < kCommKindNames.size(); ++i) {
    if (kCommKindNames[i] == name) return static_cast<CommKind>(i);
  }
  return std::nullopt;
}

std::string_view StreamOrderName(StreamOrder order) {
  return kStreamOrderNames[static_cast<size_t>(order)];
}

std::optional<StreamOrder> StreamOrderFromName(std::string_view name) {
  for (size_t i = 0; i < kStreamOrderNames.size(); ++i) {
    if (kStreamOrderNames[i] == name) return static_cast<StreamOrder>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> StreamOrderNames() { return kStreamOrderNames; }

std::span<const std::string_view> CollectiveKindNames() {
  return std::span<const std::string_view>(kCommKindNames).first(kCommKindNames.size() - 1);
}

}  // namespace dtsim::graph
