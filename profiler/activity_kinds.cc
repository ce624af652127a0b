#include "profiler/activity_kinds.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "sim/base/strings.h"

namespace dtsim::profiler {
namespace {

constexpr std::array<std::string_view, kActivityKindCount> kNames = {
    "kernel",     "memcpy",   "memset", "runtime",  "driver", "sync",
    "cuda_event", "external", "nvtx",   "overhead", "memory"};

}  // namespace

ActivityKinds ActivityKinds::All() {
  ActivityKinds all;
  for (size_t k = 0; k < kActivityKindCount; ++k) all.Add(static_cast<ActivityKind>(k));
  return all;
}

ActivityKinds ActivityKinds::Default() {
  ActivityKinds kinds = All();
  kinds.Remove(ActivityKind::kSync);
  kinds.Remove(ActivityKind::kCudaEvent);
  kinds.Remove(ActivityKind::kMemory);  // not yet run on a GPU: asked for by name
  return kinds;
}

std::string ActivityKinds::ToString() const {
  std::vector<std::string_view> names;
  for (size_t k = 0; k < kActivityKindCount; ++k) {
    if (Has(static_cast<ActivityKind>(k))) names.push_back(kNames[k]);
  }
  return fmt::format("{}", fmt::join(names, ","));
}

std::span<const std::string_view> ActivityKindNames() { return kNames; }

std::string_view ActivityKindName(ActivityKind kind) { return kNames[static_cast<size_t>(kind)]; }

Expected<ActivityKinds> ParseActivityKinds(std::string_view text) {
  ActivityKinds kinds;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view name = text.substr(begin, comma - begin);
    begin = comma + 1;
    if (name == "all" || name == "default") {
      kinds.Add(name == "all" ? ActivityKinds::All() : ActivityKinds::Default());
      continue;
    }
    const auto it = std::find(kNames.begin(), kNames.end(), name);
    if (it == kNames.end()) {
      return Error(fmt::format("unknown activity kind{}; known: {} (or all, default)",
                               DidYouMean(name, kNames), JoinQuoted(kNames)),
                   "", Quote(name));
    }
    kinds.Add(static_cast<ActivityKind>(it - kNames.begin()));
  }
  return kinds;
}

}  // namespace dtsim::profiler
