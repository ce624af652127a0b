// The network models that price communication on a cluster, one entry each: what `simulate`,
// `search`, `run` and `replay` choose from by name, and the only place a model's name is
// compared. Adding a model is one entry in network_models.cc (docs/development.md, "Adding a
// network model").
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "network/cluster.h"
#include "network/cluster_model.h"
#include "sim/base/status.h"
#include "sim/graph/task_graph.h"

namespace dtsim::network {

struct NetworkModelEntry {
  std::string_view name;
  std::string_view summary;  // one line: what the model charges for
  // Whether communications in flight at once slow each other down where they share links.
  bool shares_links = false;
  std::unique_ptr<ClusterModel> (*make)(ClusterSpec cluster) = nullptr;
};

std::span<const NetworkModelEntry> NetworkModels();
// The entries' names, in registry order (for readers that validate a choice).
std::span<const std::string_view> NetworkModelNames();
// `analytical`: what a config without `simulation.network_model` gets.
const NetworkModelEntry& DefaultNetworkModel();
// `flow`: the model `search` re-ranks its best plans with, as it sees links shared.
const NetworkModelEntry& LinkSharingNetworkModel();
// The entry named `name`, or an error listing the registered names with the nearest one.
Expected<const NetworkModelEntry*> FindNetworkModel(std::string_view name);
// `entry`'s model on `cluster`, prepared for `graph`.
Expected<std::unique_ptr<ClusterModel>> MakePreparedModel(const NetworkModelEntry& entry,
                                                          ClusterSpec cluster,
                                                          const graph::TaskGraph& graph);

}  // namespace dtsim::network
