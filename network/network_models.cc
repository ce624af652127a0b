#include "network/network_models.h"

#include <array>

#include "network/analytical_model.h"
#include "network/flow_model.h"
#include "sim/base/registry.h"

namespace dtsim::network {
namespace {

template <typename Model>
std::unique_ptr<ClusterModel> Make(ClusterSpec cluster) {
  return std::make_unique<Model>(std::move(cluster));
}

constexpr std::array<NetworkModelEntry, 2> kModels = {{
    {.name = "analytical",
     .summary = "each communication's algorithm α-β time on the levels its group spans; no "
                "contention between communications",
     .shares_links = false,
     .make = Make<AnalyticalModel>},
    {.name = "flow",
     .summary = "each communication's flow program on the cluster's links, all flows in flight "
                "sharing bandwidth max-min fairly",
     .shares_links = true,
     .make = Make<FlowModel>},
}};

constexpr std::array kNames = RegistryNames(kModels);

}  // namespace

std::span<const NetworkModelEntry> NetworkModels() { return kModels; }

std::span<const std::string_view> NetworkModelNames() { return kNames; }

const NetworkModelEntry& DefaultNetworkModel() { return kModels[0]; }

const NetworkModelEntry& LinkSharingNetworkModel() { return kModels[1]; }

Expected<const NetworkModelEntry*> FindNetworkModel(std::string_view name) {
  return FindInRegistry<NetworkModelEntry>(kModels, kNames, name, "network model");
}

Expected<std::unique_ptr<ClusterModel>> MakePreparedModel(const NetworkModelEntry& entry,
                                                          ClusterSpec cluster,
                                                          const graph::TaskGraph& graph) {
  std::unique_ptr<ClusterModel> model = entry.make(std::move(cluster));
  DTSIM_RETURN_IF_ERROR(model->Prepare(graph));
  return model;
}

}  // namespace dtsim::network
