#include "strategies/stage_communicators.h"

#include <algorithm>
#include <utility>

namespace dtsim::strategies {
namespace {

// What collectives a communicator runs: none (point-to-point only), some, or all-reduces among
// them (NVLS buffers on an NVLS node).
enum class Collectives { kNone, kOthers, kWithAllReduce };

// How `self`, one of `ranks` (distinct: ParallelPlan::Rank numbers each place once), uses
// their communicator: collectives or not, and `peers` it sends to and receives from (itself and
// repeats left out). Linear in the ranks: a data-parallel group may hold millions.
network::CommunicatorUse UseOf(const network::ClusterSpec& cluster,
                               const std::vector<int32_t>& ranks, int32_t self,
                               Collectives collectives, std::vector<int32_t> peers) {
  network::CommunicatorUse use;
  use.ranks = static_cast<int>(ranks.size());
  use.local_ranks = 0;  // counted below; `self` is one of `ranks`
  use.nodes = 0;
  std::vector<bool> seen(static_cast<size_t>(std::max(cluster.nodes, 1)));
  for (const int32_t rank : ranks) {
    const auto node = static_cast<size_t>(cluster.NodeOf(rank));
    if (node >= seen.size()) seen.resize(node + 1);
    if (!seen[node]) ++use.nodes;
    seen[node] = true;
    if (cluster.NodeOf(rank) == cluster.NodeOf(self)) ++use.local_ranks;
  }
  use.collectives = collectives != Collectives::kNone;
  use.all_reduce = collectives == Collectives::kWithAllReduce;
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  for (const int32_t peer : peers) {
    if (peer == self) continue;
    ++(cluster.NodeOf(peer) == cluster.NodeOf(self) ? use.local_peers : use.remote_peers);
  }
  return use;
}

// The rank of expert index `e` (tp + t·dp) on `stage`.
int32_t ExpertRank(const ParallelPlan& plan, int e, int stage) {
  return plan.Rank(e / plan.tensor, stage, e % plan.tensor);
}

class Collector {
 public:
  Collector(const ResolvedConfig& config, int stage)
      : cluster_(config.cluster), self_(config.plan.Rank(0, stage, 0)) {}

  void Add(std::string name, const std::vector<int32_t>& ranks, Collectives collectives,
           std::vector<int32_t> peers = {}) {
    if (ranks.size() < 2) return;
    StageCommunicator communicator{
        .name = std::move(name),
        .use = UseOf(cluster_, ranks, self_, collectives, std::move(peers))};
    if (communicator.use.ranks < 2) return;
    communicator.buffers = network::CommunicatorBuffers(cluster_, communicator.use);
    communicators_.push_back(std::move(communicator));
  }
  std::vector<StageCommunicator> Take() { return std::move(communicators_); }

 private:
  const network::ClusterSpec& cluster_;
  int32_t self_;
  std::vector<StageCommunicator> communicators_;
};

// Gradients are all-reduced without ZeRO, reduce-scattered (and parameters all-gathered) with
// it (GradientReducer::ReduceBucket).
Collectives GradientCollectives(const ParallelPlan& plan) {
  return plan.zero_stage >= 1 ? Collectives::kOthers : Collectives::kWithAllReduce;
}

void AddTensor(const ParallelPlan& plan, int stage, Collector& out) {
  if (plan.tensor < 2) return;
  std::vector<int32_t> group;
  if (!plan.on_grid()) {
    for (int tp = 0; tp < plan.tensor; ++tp) group.push_back(plan.Rank(0, stage, tp));
    // Megatron's all-reduces of activations, or with sequence parallelism all-gathers and
    // reduce-scatters.
    out.Add("tensor", group,
            plan.sequence_parallel ? Collectives::kOthers : Collectives::kWithAllReduce);
    return;
  }
  // Tensor index i + q·(j + q·k): a row (i varies) and a column (j varies) broadcast and reduce.
  const int q = plan.grid();
  std::vector<int32_t> row, column;
  for (int i = 0; i < q; ++i) {
    row.push_back(plan.Rank(0, stage, i));
    column.push_back(plan.Rank(0, stage, q * i));
  }
  out.Add("tensor-row", row, Collectives::kOthers);
  out.Add("tensor-column", column, Collectives::kOthers);
}

void AddData(const ParallelPlan& plan, int stage, Collector& out) {
  // The weights' replicas: data indices (data × context) and a 2.5D grid's depth layers.
  std::vector<int32_t> group;
  const int q = plan.grid();
  for (int dp = 0; dp < plan.DataIndices(); ++dp) {
    for (int k = 0; k < plan.tensor_depth; ++k) group.push_back(plan.Rank(dp, stage, q * q * k));
  }
  out.Add("data", group, GradientCollectives(plan));
}

void AddContext(const ParallelPlan& plan, int stage, Collector& out) {
  if (plan.context < 2) return;
  std::vector<int32_t> group;
  group.reserve(static_cast<size_t>(plan.context));
  for (int cp = 0; cp < plan.context; ++cp) group.push_back(plan.Rank(cp, stage, 0));
  // p2p: a ring, K/V to the next peer and from the previous one; a2a: every peer.
  std::vector<int32_t> peers = group;
  if (plan.context_comm == models::ContextComm::kP2p) peers = {group[1], group.back()};
  out.Add("context", group, Collectives::kNone, std::move(peers));
}

void AddExpert(const ParallelPlan& plan, int stage, Collector& out) {
  if (!plan.experts_apart()) return;
  // Megatron-Core's expert rank order etp-ep-edp over expert indices tp + t·dp (data indices
  // times t without folding): the all-to-all peers are etp apart, the expert-data ones etp·EP.
  const int etp = plan.folded_experts() ? plan.ExpertTensor() : plan.tensor;
  std::vector<int32_t> experts, expert_data;
  for (int i = 0; i < plan.expert; ++i) experts.push_back(ExpertRank(plan, etp * i, stage));
  for (int m = 0; m < plan.ExpertData(); ++m) {
    expert_data.push_back(ExpertRank(plan, etp * plan.expert * m, stage));
  }
  std::vector<int32_t> peers = experts;
  out.Add("expert", experts, Collectives::kNone, std::move(peers));
  out.Add("expert-data", expert_data, GradientCollectives(plan));
}

void AddPipeline(const ResolvedConfig& config, int stage, Collector& out) {
  const ParallelPlan& plan = config.plan;
  const int p = plan.pipeline;
  if (p < 2) return;
  std::vector<int32_t> group;
  group.reserve(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) group.push_back(plan.Rank(0, s, 0));
  // Activations to the next stage, gradients to the previous one; an interleaved schedule's
  // chunks also pass from the last stage to the first.
  const bool wraps = plan.virtual_stages > 1;
  std::vector<int32_t> peers;
  if (stage > 0 || wraps) peers.push_back(group[static_cast<size_t>((stage + p - 1) % p)]);
  if (stage < p - 1 || wraps) peers.push_back(group[static_cast<size_t>((stage + 1) % p)]);
  out.Add("pipeline", group, Collectives::kNone, std::move(peers));
  // The first and last stages' copies of a tied embedding (or the MTP modules' lookup table)
  // all-reduce their gradients (Megatron's embedding group).
  const models::TransformerSpec& spec = config.model.transformer;
  const bool shared_table = config.model.family == models::ModelFamily::kTransformer &&
                            (spec.tied_embeddings || spec.mtp_layers > 0);
  if (shared_table && (stage == 0 || stage == p - 1)) {
    out.Add("embedding", {plan.Rank(0, 0, 0), plan.Rank(0, p - 1, 0)}, Collectives::kWithAllReduce);
  }
}

}  // namespace

std::vector<StageCommunicator> StageCommunicators(const ResolvedConfig& config, int stage) {
  Collector out(config, stage);
  AddTensor(config.plan, stage, out);
  AddData(config.plan, stage, out);
  AddContext(config.plan, stage, out);
  AddExpert(config.plan, stage, out);
  AddPipeline(config, stage, out);
  return out.Take();
}

network::NcclBuffers StageNcclBuffers(const ResolvedConfig& config, int stage) {
  network::NcclBuffers total;
  for (const StageCommunicator& communicator : StageCommunicators(config, stage)) {
    total += communicator.buffers;
  }
  return total;
}

}  // namespace dtsim::strategies
