#include "strategies/collective_summary.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace dtsim::strategies {

std::vector<CollectiveSummary> SummarizeCollectives(const graph::TaskGraph& graph,
                                                    const graph::TaskTimes& times,
                                                    const network::CommMethods& methods) {
  using Key = std::tuple<graph::CommKind, int64_t, size_t, uint32_t>;
  constexpr uint32_t kNoMethod = ~uint32_t{0};
  std::map<Key, CollectiveSummary> sums;
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::CommId id(c);
    const graph::Communication& comm = graph.comm(id);
    const size_t group = graph.group(comm.priced_group).size();
    const uint32_t method = methods.of_comm.empty() ? kNoMethod : methods.of_comm[c];
    CollectiveSummary& sum = sums[{comm.kind, comm.size.count(), group, method}];
    if (sum.count == 0) {
      sum.kind = comm.kind;
      sum.size_bytes = comm.size.count();
      sum.group_size = static_cast<int>(group);
      if (method != kNoMethod) sum.method = methods.labels[method];
    }
    const DurationNs took = times.comm_end[c] - times.comm_start[c];
    ++sum.count;
    sum.total += took;
    sum.longest = std::max(sum.longest, took);
  }
  std::vector<CollectiveSummary> out;
  out.reserve(sums.size());
  for (auto& [key, sum] : sums) out.push_back(std::move(sum));
  // The map's order breaks ties; a stable sort keeps it.
  std::stable_sort(
      out.begin(), out.end(),
      [](const CollectiveSummary& a, const CollectiveSummary& b) { return a.total > b.total; });
  return out;
}

}  // namespace dtsim::strategies
