// The rank order of a plan (`parallelism.order`): its text, and which orders number a plan's
// ranks alike. Declared in config.h.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/strings.h"
#include "strategies/config.h"

namespace dtsim::strategies {

namespace {

constexpr std::array<std::string_view, 3> kPlanDimensionNames = {"tp", "dp",
                                                                 "pp"};  // by PlanDimension

}  // namespace

Expected<std::array<PlanDimension, 3>> ParsePlanOrder(std::string_view text,
                                                      const std::string& path) {
  std::array<PlanDimension, 3> order{};
  std::array<bool, 3> seen{};
  size_t count = 0;
  const auto bad = [&](std::string_view why) {
    return Error(fmt::format("{}: the order names tp, dp and pp once each, innermost first "
                             "(\"tp-dp-pp\", Megatron's, is the default)",
                             why),
                 path, Quote(text));
  };
  for (size_t begin = 0; begin <= text.size();) {
    const size_t dash = std::min(text.find('-', begin), text.size());
    const std::string_view name = text.substr(begin, dash - begin);
    begin = dash + 1;
    const auto it = std::find(kPlanDimensionNames.begin(), kPlanDimensionNames.end(), name);
    if (it == kPlanDimensionNames.end()) {
      return bad(fmt::format("unknown dimension {}", Quote(name)));
    }
    const auto d = static_cast<size_t>(it - kPlanDimensionNames.begin());
    if (seen[d]) return bad(fmt::format("{} appears twice", name));
    if (count == order.size()) return bad("too many dimensions");
    seen[d] = true;
    order[count++] = static_cast<PlanDimension>(d);
  }
  if (count != order.size()) return bad("a dimension is missing");
  return order;
}

bool ParallelPlan::NumbersLike(const std::array<PlanDimension, 3>& other) const {
  const auto spread = [this](const std::array<PlanDimension, 3>& dimensions) {
    std::vector<PlanDimension> kept;
    for (const PlanDimension d : dimensions) {
      const int size = d == PlanDimension::kTensor ? tensor
                       : d == PlanDimension::kData ? DataIndices()
                                                   : pipeline;
      if (size > 1) kept.push_back(d);
    }
    return kept;
  };
  return spread(order) == spread(other);
}

std::string PlanOrderName(const ParallelPlan& plan) {
  const auto name = [](PlanDimension d) { return kPlanDimensionNames[static_cast<size_t>(d)]; };
  return fmt::format("{}-{}-{}", name(plan.order[0]), name(plan.order[1]), name(plan.order[2]));
}

}  // namespace dtsim::strategies
