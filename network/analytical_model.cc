#include "network/analytical_model.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace dtsim::network {

Status AnalyticalModel::Prepare(const graph::TaskGraph& graph) {
  DTSIM_RETURN_IF_ERROR(FitCluster(cluster_, graph.rank_count()));
  std::vector<GroupShape> shapes(graph.group_count());
  std::vector<bool> shaped(graph.group_count(), false);
  // Iterations repeat the same collectives: price each distinct (kind, size, group, algorithm,
  // root) once.
  std::map<std::tuple<graph::CommKind, int64_t, uint32_t, uint32_t, int32_t>,
           std::pair<AlgorithmChoice, uint32_t>>
      priced;  // the choice and its method's index
  costs_.resize(graph.comm_count());
  algorithms_.resize(graph.comm_count());
  methods_.of_comm.resize(graph.comm_count());
  blocks_.resize(graph.comm_count());
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    const uint32_t group = comm.priced_group.value();
    if (!shaped[group]) {
      shapes[group] = ShapeOfGroup(graph.group(comm.priced_group), cluster_);
      shaped[group] = true;
    }
    const auto key =
        std::make_tuple(comm.kind, comm.size.count(), group, comm.algorithm.value(), comm.root);
    auto it = priced.find(key);
    if (it == priced.end()) {
      const CollectiveRequest request{.kind = comm.kind,
                                      .size = comm.size,
                                      .shape = shapes[group],
                                      .cluster = &cluster_,
                                      .ranks = graph.group(comm.priced_group),
                                      .root = comm.root};
      Expected<AlgorithmChoice> choice =
          ChooseCollectiveAlgorithm(request, graph.name(comm.algorithm));
      if (!choice.ok()) {
        Error error = std::move(choice).error();
        return Error(graph.DescribeComm(graph::CommId(c)) + ": " + error.message(), "",
                     error.value());
      }
      it = priced.emplace(key, std::make_pair(*choice, methods_.Intern(choice->Label()))).first;
    }
    costs_[c] = it->second.first.time;
    algorithms_[c] = it->second.first.algorithm;
    methods_.of_comm[c] = it->second.second;
    blocks_[c] = static_cast<uint16_t>(it->second.first.blocks);
  }
  return Status::Ok();
}

void AnalyticalModel::Start(graph::CommId comm, engine::CommunicationContext& context) {
  context.CompleteAt(comm, context.Now() + costs_[comm.value()]);
}

std::string_view AnalyticalModel::AlgorithmOf(graph::CommId comm) const {
  const CollectiveAlgorithm* algorithm = algorithms_[comm.value()];
  return algorithm == nullptr ? std::string_view() : algorithm->name;
}

}  // namespace dtsim::network
