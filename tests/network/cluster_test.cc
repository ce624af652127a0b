#include "network/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtsim::network {
namespace {

using testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(Json::parse(text), "cluster");
  return cluster.ok() ? "(loaded fine)" : cluster.error().ToString();
}

constexpr const char* kCustom = R"({
  "nodes": 4, "gpus_per_node": 8,
  "intra_node": {"topology": "switch", "bandwidth": "300 GB/s", "latency": "2 us"},
  "inter_node": {"topology": "fat-tree", "nics_per_node": 8, "nic_bandwidth": "200 Gbps",
                 "latency": "5 us", "oversubscription": 2, "nodes_per_leaf": 2}})";

TEST(ClusterPresetTest, DgxA100) {
  const Expected<ClusterSpec> cluster = ClusterPreset("dgx-a100", 4);
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->gpu_count(), 32);
  EXPECT_EQ(cluster->intra.bandwidth.bits_per_second(), 300 * kGiga * 8);  // 300 GB/s
  EXPECT_EQ(cluster->inter.nics_per_node, 8);
  EXPECT_EQ(cluster->inter.nic_bandwidth.bits_per_second(), 200 * kGiga);  // HDR 200 Gb/s
  EXPECT_EQ(cluster->NodeOf(17), 2);
  EXPECT_EQ(cluster->collective_latency, Nanoseconds(8400));  // NCCL's ring base latency
}

TEST(ClusterPresetTest, AllPresetsLoad) {
  for (std::string_view name : ClusterPresetNames()) EXPECT_TRUE(ClusterPreset(name).ok()) << name;
  EXPECT_EQ(ClusterPreset("dgx-a10").error().ToString(),
            "unknown cluster preset (did you mean \"dgx-a100\"?); presets: \"dgx-a100\", "
            "\"dgx-h100\", \"dgx-h200\", \"dgx-b200\", \"gb200-nvl72\", "
            "\"azure-nd-h100-v5\", \"aws-p5\", \"gcp-a3-mega\", \"dgx1-v100\", "
            "\"ethernet-25g\", got \"dgx-a10\"");
}

TEST(ClusterFromJsonTest, CustomSpec) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(Json::parse(kCustom), "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->name, "custom");
  EXPECT_EQ(cluster->inter.oversubscription, 2.0);
  EXPECT_EQ(cluster->inter.latency, Microseconds(5));
  EXPECT_EQ(cluster->collective_latency, DurationNs::Zero());  // not given: none
}

TEST(ClusterFromJsonTest, NvlinkSharp) {
  const Expected<ClusterSpec> h100 = ClusterPreset("dgx-h100");
  ASSERT_TRUE(h100.ok());
  EXPECT_TRUE(h100->intra.nvls.enabled);
  EXPECT_EQ(h100->intra.nvls.latency, Microseconds(23));
  EXPECT_EQ(h100->intra.nvls.efficiency, 0.686);
  EXPECT_EQ(h100->intra.nvls.channels, 16);  // NCCL's NVLS_NCHANNELS on Hopper
  EXPECT_EQ(h100->intra.nvls.chunk_overhead, Nanoseconds(640));
  EXPECT_EQ(ClusterPreset("dgx-b200")->intra.nvls.channels, 24);  // a Blackwell NVLink domain
  EXPECT_FALSE(ClusterPreset("dgx-a100")->intra.nvls.enabled);
  const auto read = [](const char* text) { return ClusterFromJson(Json::parse(text), "cluster"); };
  EXPECT_FALSE(
      read(R"({"preset": "dgx-h100", "intra_node": {"nvls": false}})")->intra.nvls.enabled);
  const Expected<ClusterSpec> tuned =
      read(R"({"preset": "dgx-h100", "intra_node": {"nvls": {"efficiency": 0.7}}})");
  ASSERT_TRUE(tuned.ok()) << tuned.error().ToString();
  EXPECT_EQ(tuned->intra.nvls.efficiency, 0.7);
  EXPECT_EQ(tuned->intra.nvls.latency, Microseconds(23));  // from the preset
  const Expected<ClusterSpec> chunks = read(
      R"({"preset": "dgx-h100", "intra_node": {"nvls": {"channels": 24, "chunk_overhead": "1 us"}}})");
  ASSERT_TRUE(chunks.ok()) << chunks.error().ToString();
  EXPECT_EQ(chunks->intra.nvls.channels, 24);
  EXPECT_EQ(chunks->intra.nvls.chunk_overhead, Microseconds(1));
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "intra_node": {"nvls": {"channels": 0}}})"),
            "cluster.intra_node.nvls.channels: must be in [1, 64], got 0");
  const Expected<ClusterSpec> a100 = read(
      R"({"preset": "dgx-a100", "intra_node": {"nvls": {"latency": "20 us", "efficiency": 0.6}}})");
  ASSERT_TRUE(a100.ok()) << a100.error().ToString();
  EXPECT_TRUE(a100->intra.nvls.enabled);
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "intra_node": {"nvls": {"efficiency": 0.6}}})"),
            "cluster.intra_node.nvls.latency: missing required field");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "intra_node": {"nvls": true}})"),
            "cluster.intra_node.nvls: expected {\"latency\", \"efficiency\"} or false, got true");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "intra_node": {"nvls": {"efficiency": 0}}})"),
            "cluster.intra_node.nvls.efficiency: must be in (0, 1], got 0");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "intra_node": {"topology": "ring"}})"),
            "cluster.intra_node.nvls: NVLink SHARP needs an NVSwitch (topology \"switch\"), not a "
            "ring; set \"nvls\": false");
}

TEST(ClusterFromJsonTest, CollectiveLatency) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(
      Json::parse(R"({"preset": "dgx-a100", "collective_latency": "12 us"})"), "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->collective_latency, Microseconds(12));
  EXPECT_EQ(
      ErrorOf(R"({"preset": "dgx-a100", "collective_latency": 12})"),
      "cluster.collective_latency: expected a quantity with a unit, such as \"2 us\", got 12");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "collective_latency": "-1 us"})"),
            "cluster.collective_latency: duration must not be negative, got \"-1 us\"");
}

TEST(ClusterFromJsonTest, PresetFieldsCanBeOverridden) {
  const Expected<ClusterSpec> cluster =
      ClusterFromJson(Json::parse(R"({"preset": "dgx-h100", "gpus": 64,
                      "inter_node": {"nic_bandwidth": "200 Gbps", "efficiency": 0.9}})"),
                      "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->nodes, 8);                                            // 64 / 8
  EXPECT_EQ(cluster->inter.nic_bandwidth.bits_per_second(), 200 * kGiga);  // overridden
  EXPECT_EQ(cluster->inter.nics_per_node, 8);                              // from the preset
  EXPECT_EQ(cluster->intra.bandwidth.bits_per_second(), 450 * kGiga * 8);  // from the preset
}

TEST(ClusterFromJsonTest, TorusDimensionsGiveTheNodeCount) {
  const Expected<ClusterSpec> cluster =
      ClusterFromJson(Json::parse(R"({"preset": "dgx-a100", "inter_node": {"topology": "torus-3d",
                                                          "dimensions": [2, 3, 4]}})"),
                      "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->nodes, 24);
}

TEST(ClusterFromJsonTest, TorusDimensionsMustMultiplyToTheNodes) {
  const std::string torus = R"({"preset": "dgx-a100", "nodes": 12,
      "inter_node": {"topology": "torus-2d", "dimensions": [4, 4]}})";
  EXPECT_EQ(ErrorOf(torus),
            "cluster.inter_node.dimensions: the torus dimensions multiply to 16 nodes, but the "
            "cluster has 12, got [4, 4]");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "nodes": 12,
                        "inter_node": {"topology": "torus-3d", "dimensions": [3, 4]}})"),
            "cluster.inter_node.dimensions: a torus-3d needs 3 dimensions, got [3, 4]");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "inter_node": {"dimensions": [2]}})"),
            "cluster.inter_node.dimensions: only a torus has dimensions, not a rail-optimized");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "nodes": 12,
                        "inter_node": {"topology": "torus-2d", "dimensions": [3, 4]}})"),
            "(loaded fine)");
}

TEST(ClusterFromJsonTest, BadInputNamesThePath) {
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "intra_node": {"topology": "nvswitch"}})"),
            "cluster.intra_node.topology: unknown intra-node topology (did you mean \"switch\"?); "
            "registered: \"switch\", "
            "\"ring\", \"mesh\", \"pcie\", got \"nvswitch\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "inter_node": {"topology": "fattree"}})"),
            "cluster.inter_node.topology: unknown inter-node topology (did you mean "
            "\"fat-tree\"?); registered: \"fat-tree\", \"rail-optimized\", \"ring\", "
            "\"torus-2d\", \"torus-3d\", got \"fattree\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "gpus": 12})"),
            "cluster.gpus: 12 GPUs do not divide into nodes of 8 (gpus_per_node), got 12");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "gpus": 16, "nodes": 2})"),
            "cluster: give either \"nodes\" or \"gpus\", not both");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "inter_node": {"nic_bandwidth": "0 Gbps"}})"),
            "cluster.inter_node.nic_bandwidth: bandwidth must be positive, got \"0 Gbps\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "intra_node": {"bandwidth": "-300 GB/s"}})"),
            "cluster.intra_node.bandwidth: bandwidth must not be negative, got \"-300 GB/s\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "nodes": 0})"),
            "cluster.nodes: must be in [1, 1048576], got 0");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "inter_node": {"oversubscription": 0.5}})"),
            "cluster.inter_node.oversubscription: must be in [1, 1000000], got 0.5");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "intra_node": {"efficiency": 0}})"),
            "cluster.intra_node.efficiency: must be in (0, 1], got 0");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "node": 2})"),
            "cluster.node: unknown key (did you mean \"nodes\"?)");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "inter_node": {"nic_bandwith": "1 Gbps"}})"),
            "cluster.inter_node.nic_bandwith: unknown key (did you mean \"nic_bandwidth\"?)");
  EXPECT_EQ(ErrorOf(R"({"gpus_per_node": 8, "intra_node": {"topology": "switch"}})"),
            "cluster.inter_node: missing required field");
  EXPECT_EQ(ErrorOf(R"({"gpus_per_node": 8, "intra_node": {"topology": "switch"},
                        "inter_node": {"topology": "ring", "nic_bandwidth": "1 Gbps",
                                       "latency": "1 us"}})"),
            "cluster.intra_node.bandwidth: missing required field");
  EXPECT_EQ(ErrorOf(R"({"nodes": 2})"),
            "cluster.gpus_per_node: missing required field (or give a \"preset\")");
  EXPECT_THAT(ErrorOf(R"({"preset": "dgx"})"), HasSubstr("cluster.preset: unknown cluster preset"));
}

TEST(LoadClusterTest, PresetNameOrFile) {
  EXPECT_EQ(LoadCluster("dgx-h100")->name, "dgx-h100");
  // No node count: sized to the workload, 20 ranks on nodes of 8 take 3.
  ClusterSpec cluster = *LoadCluster("dgx-h100");
  EXPECT_EQ(cluster.nodes, 0);
  ASSERT_TRUE(FitCluster(cluster, 20).ok());
  EXPECT_EQ(cluster.nodes, 3);
  ClusterSpec fixed = *ClusterPreset("dgx-h100", 2);
  EXPECT_EQ(FitCluster(fixed, 20).error().message(),
            "the graph has 20 ranks but the cluster has 16 GPUs (2 nodes of 8)");
  const Expected<ClusterSpec> missing = LoadCluster("/nonexistent/cluster.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().ToString(), HasSubstr("cannot open"));
}

}  // namespace
}  // namespace dtsim::network
