// The small cluster the network tests derive their numbers on:
//   4 GPUs per node, 100 GB/s per GPU inside a node (1e11 B/s) over one link, α_intra = 1 us;
//   2 NICs per node of 100 Gbps (12.5 GB/s, 1.25e10 B/s) each, α_inter = 10 us; efficiency 1.
#pragma once

#include <numeric>
#include <vector>

#include "network/cluster.h"

namespace dtsim::network::testing_support {

inline ClusterSpec TestCluster(int nodes = 4) {
  return ClusterSpec{.name = "test",
                     .nodes = nodes,
                     .gpus_per_node = 4,
                     .intra = {IntraTopology::kSwitch, Bandwidth::BytesPerSecond(100 * kGiga), 1,
                               Microseconds(1), 1.0},
                     .inter = {.topology = InterTopology::kFatTree,
                               .nics_per_node = 2,
                               .nic_bandwidth = Bandwidth::BitsPerSecond(100 * kGiga),
                               .latency = Microseconds(10)}};
}

inline std::vector<int32_t> Ranks(int first, int count) {
  std::vector<int32_t> ranks(static_cast<size_t>(count));
  std::iota(ranks.begin(), ranks.end(), first);
  return ranks;
}

}  // namespace dtsim::network::testing_support
