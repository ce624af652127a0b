// Switch tiers (docs/network.md, "Switch tiers"): the leaves and pods a group spans, and what
// a tier's oversubscribed up-links cost it — in the analytical model a factor on a node's rate
// by the share of the group's traffic that climbs, in the flow model a cap on each climbing
// transfer standing for the copies of the group that symmetric ranks do not simulate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "network/cluster.h"
#include "network/collective_algorithms.h"
#include "network/flow_programs.h"

namespace dtsim::network {

// Sets shape.leaves and shape.pods from the group's sorted node list (repeats allowed) on a
// fat-tree or rail-optimized fabric; leaves them at one block elsewhere.
void SpanTiers(const std::vector<int>& nodes, const ClusterSpec& cluster, GroupShape& shape);

// Which of a node's off-node bytes climb above its leaf (or pod), by the algorithm's traffic
// pattern (docs/network.md, "Switch tiers").
enum class Traffic {
  kNeighbour,  // rings and trees over the group in rank order: one edge leaves a block
  kAllToAll,   // every member to every member: the share bound for other blocks
  kSpanned,    // all of it, at every tier the group spans (colocated parameter servers)
  kToCore,     // all of it, at every tier (dedicated parameter servers hang off the top)
};

// What the tiers' up-links divide a group's node rate by for `traffic` (TierFactor in
// switch_tiers.cc derives it): max(1, o · c) over the tiers the group spans.
double TierFactor(const ClusterSpec& cluster, const GroupShape& shape, Traffic traffic);

// The flow model's cap on the transfers of `program` that climb out of a block of an
// oversubscribed tier, where every GPU communicates at once (ClusterSpec::gpus_share_nics).
void CapTierTransfers(FlowProgram& program, std::span<const int32_t> ranks, const GroupShape& shape,
                      const ClusterSpec& cluster);

}  // namespace dtsim::network
