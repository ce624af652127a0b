// Three switch tiers (docs/network.md, "Switch tiers"): pods of leaves joined by an
// oversubscribed core slow the groups that cross them by the share of their traffic that
// climbs — in the analytical model, in the flow model with one rank per stage, and in the flow
// model with every rank simulated, where the copies of a group really contend on the pods'
// up-links. The parallel order decides which groups cross.
#include <gtest/gtest.h>

#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// GPT, 2 layers of h = 4096 on 8 DGX H100 nodes, one node a leaf, two a pod, pods joined at
// 1:`pod_oversubscription`: TP 8 inside a node, DP 8 across the 8 nodes (eight rings, one per
// rail, each one GPU a node).
Json EightNodes(double pod_oversubscription, std::string_view network_model,
                std::string_view ranks) {
  Json config = Json::parse(R"({
    "model": {"family": "transformer", "layers": 2, "hidden": 4096, "heads": 32,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1024, "precision": "bf16"},
    "cluster": {"preset": "dgx-h100", "nodes": 8, "gpu": "h100-sxm5-80gb",
                "inter_node": {"topology": "fat-tree", "nodes_per_leaf": 1,
                               "nodes_per_pod": 2}},
    "parallelism": {"data": 8, "tensor": 8, "overlap_gradient_reduce": false}
  })");
  config["cluster"]["inter_node"]["pod_oversubscription"] = pod_oversubscription;
  config["simulation"] = {{"network_model", network_model}, {"ranks", ranks}};
  return config;
}

double DataParallelMs(const SimulationResult& result) {
  return static_cast<double>(result.stages.front().data_exposed.ns()) / 1e6;
}

TEST(SwitchTiersTest, RingsAcrossPodsSlowByTheShareThatClimbs) {
  // Each data-parallel ring leaves each pod on one edge of its 2 nodes (c = 1/2). At 1:2 the
  // core keeps up (2 · 1/2 = 1); at 1:8 the rings get 1 / (8 · 1/2) = 1/4 of their NICs: the
  // reduction's wire time grows 4× (its latency does not).
  const double flat = DataParallelMs(SimulateJson(EightNodes(1, "analytical", "symmetric")));
  EXPECT_EQ(DataParallelMs(SimulateJson(EightNodes(2, "analytical", "symmetric"))), flat);
  const double slow = DataParallelMs(SimulateJson(EightNodes(8, "analytical", "symmetric")));
  EXPECT_GT(slow, 3.5 * flat);
  EXPECT_LT(slow, 4 * flat);
}

TEST(SwitchTiersTest, BothNetworkModelsAgreeWithEveryRankSimulated) {
  // With every rank simulated the flow model routes the eight rings of each node through the
  // pods' up-links, where they contend; the analytical model and the flow model under
  // symmetric ranks price one ring at its share of them. The iterations agree within 1%.
  const auto iteration = [](std::string_view model, std::string_view ranks) {
    return static_cast<double>(SimulateJson(EightNodes(8, model, ranks)).iteration_time.ns());
  };
  const double full = iteration("flow", "full");
  EXPECT_NEAR(iteration("flow", "symmetric") / full, 1.0, 0.01);
  EXPECT_NEAR(iteration("analytical", "symmetric") / full, 1.0, 0.01);
  // … and the pods cost the full simulation what they cost the analytical model.
  const double flat =
      static_cast<double>(SimulateJson(EightNodes(1, "flow", "full")).iteration_time.ns());
  EXPECT_GT(full, 1.05 * flat);
}

TEST(SwitchTiersTest, TheParallelOrderDecidesWhatCrossesThePods) {
  // Llama 3.1 405B on 16,384 H100s of a cluster built like Meta's (racks of 2 nodes, pods of
  // 384, 1:7 between pods). Llama 3's order, TP-PP-DP innermost first, keeps each pipeline
  // inside 16 consecutive nodes and leaves the pods on one edge of every data-parallel ring of
  // 128 nodes (8 of them in the last, partly used pod: 7 · 1/8 < 1), nothing slows. Megatron's
  // default TP-DP-PP puts each pipeline across 2,048 nodes, three stages a pod: 5 of its 15
  // stage boundaries cross pods, their sends at 1/7 of a NIC.
  const std::string path = std::string(DTSIM_EXAMPLES_DIR) + "/llama3.1_405b_pods_16384h100.json";
  const auto iteration = [&](std::vector<std::string> sets) {
    Expected<ResolvedConfig> config = LoadConfig(path, sets);
    EXPECT_TRUE(config.ok()) << config.error().ToString();
    Expected<SimulationResult> result = Simulate(*config);
    EXPECT_TRUE(result.ok()) << result.error().ToString();
    return result.ok() ? static_cast<double>(result->iteration_time.ns()) : 0.0;
  };
  const double shipped = iteration({});
  EXPECT_EQ(shipped, iteration({"cluster.inter_node.pod_oversubscription=1"}));
  const double megatron = iteration({"parallelism.order=tp-dp-pp"});
  EXPECT_EQ(iteration({"parallelism.order=tp-dp-pp", "cluster.inter_node.pod_oversubscription=1"}),
            shipped);
  EXPECT_GT(megatron, 1.05 * shipped);
}

}  // namespace
}  // namespace dtsim::strategies
