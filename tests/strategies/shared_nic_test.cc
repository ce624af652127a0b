// A training step's GPUs share their node's NICs (docs/network.md, "Analytical model"): on a
// node with one NIC for eight GPUs, each of the eight data-parallel rings of TP 8 gets an eighth
// of it — in the analytical model, in the flow model with one rank per stage, and in the flow
// model with every rank simulated, where the eight rings really contend.
#include <gtest/gtest.h>

#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// GPT, 2 layers of h = 2048 on 2 DGX-1 nodes with `nics` 100 Gb/s NICs each: TP 8 inside a
// node, DP 2 across the two (each data-parallel group one GPU a node).
Json TwoNodes(int nics, std::string_view network_model, std::string_view ranks) {
  Json config = Json::parse(R"({
    "model": {"family": "transformer", "layers": 2, "hidden": 2048, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 2, "micro_batch": 1, "seq_len": 1024, "precision": "fp16"},
    "cluster": {"preset": "dgx1-v100", "gpu": "v100-sxm2-32gb",
                "inter_node": {"nic_bandwidth": "100 Gbps"}},
    "parallelism": {"data": 2, "tensor": 8, "overlap_gradient_reduce": false}
  })");
  config["cluster"]["inter_node"]["nics_per_node"] = nics;
  config["simulation"] = {{"network_model", network_model}, {"ranks", ranks}};
  return config;
}

double DataParallelMs(const SimulationResult& result) {
  return static_cast<double>(result.stages.front().data_exposed.ns()) / 1e6;
}

TEST(SharedNicTest, EightDataParallelRingsSplitOneNic) {
  // Each rank's data-parallel all-reduce of its gradients (≈ 2 layers · 12 · 2048² / 8 + its
  // embedding shard, fp16) is a 2-member ring across the nodes. With 8 NICs a node each ring has
  // one to itself; with 1 it has an eighth: the reduction's wire time grows 8× (its latency does
  // not), so the data-parallel time grows more than 7×.
  const SimulationResult railed = SimulateJson(TwoNodes(8, "analytical", "symmetric"));
  const SimulationResult shared = SimulateJson(TwoNodes(1, "analytical", "symmetric"));
  EXPECT_GT(DataParallelMs(shared), 7 * DataParallelMs(railed));
  EXPECT_LT(DataParallelMs(shared), 8 * DataParallelMs(railed));
}

TEST(SharedNicTest, BothNetworkModelsAgreeWithEveryRankSimulated) {
  // The flow model with every rank simulated runs the eight rings against each other over the
  // one NIC; the analytical model and the flow model under symmetric ranks price one ring at its
  // share. The iterations agree within 0.5%.
  const double analytical =
      static_cast<double>(SimulateJson(TwoNodes(1, "analytical", "symmetric")).iteration_time.ns());
  const double symmetric =
      static_cast<double>(SimulateJson(TwoNodes(1, "flow", "symmetric")).iteration_time.ns());
  const double full =
      static_cast<double>(SimulateJson(TwoNodes(1, "flow", "full")).iteration_time.ns());
  EXPECT_NEAR(symmetric / full, 1.0, 0.005);
  EXPECT_NEAR(analytical / full, 1.0, 0.005);
}

}  // namespace
}  // namespace dtsim::strategies
