#include "network/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

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

// Issue 35: a custom cluster without efficiencies or a collective latency flatters silently
// (1, 1 and 0 where every preset has 0.775-0.97 and 8.4 us); each default taken is named.
TEST(ClusterFromJsonTest, DefaultsACustomClusterTakesAreNamed) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(Json::parse(kCustom), "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  ASSERT_EQ(cluster->assumed.size(), 3u);
  EXPECT_EQ(cluster->assumed[0],
            "cluster.intra_node.efficiency not given: 1 assumed (collectives at the line rate; "
            "the presets' NVLink fabrics achieve 0.775-0.89 of it)");
  EXPECT_THAT(cluster->assumed[1], HasSubstr("cluster.inter_node.efficiency not given: 1"));
  EXPECT_THAT(cluster->assumed[2], HasSubstr("cluster.collective_latency not given: 0 assumed"));
  // Given, or from a preset, nothing is assumed.
  Json stated = Json::parse(kCustom);
  stated["intra_node"]["efficiency"] = 0.8;
  stated["inter_node"]["efficiency"] = 0.95;
  stated["collective_latency"] = "8.4 us";
  EXPECT_TRUE(ClusterFromJson(stated, "cluster")->assumed.empty());
  EXPECT_TRUE(
      ClusterFromJson(Json::parse(R"({"preset": "dgx-h100"})"), "cluster")->assumed.empty());
}

// The resolved spec dtsim records in a result's provenance reads back to the same spec, for
// every preset (the NVLink mesh of the DGX-1 and NVLS included) and a custom one.
TEST(ClusterSpecToJsonTest, EveryPresetReadsBackTheSame) {
  std::vector<ClusterSpec> specs;
  for (std::string_view name : ClusterPresetNames()) specs.push_back(*ClusterPreset(name, 2));
  specs.push_back(*ClusterFromJson(Json::parse(kCustom), "cluster"));
  Json pods = Json::parse(kCustom);
  pods["nodes"] = 8;
  pods["inter_node"]["nodes_per_pod"] = 4;
  pods["inter_node"]["pod_oversubscription"] = 7;
  specs.push_back(*ClusterFromJson(pods, "cluster"));
  for (const ClusterSpec& spec : specs) {
    const OrderedJson written = ClusterSpecToJson(spec);
    const Expected<ClusterSpec> back = ClusterFromJson(Json::parse(written.dump()), "cluster");
    ASSERT_TRUE(back.ok()) << spec.name << ": " << back.error().ToString();
    EXPECT_EQ(back->nodes, spec.nodes) << spec.name;
    EXPECT_EQ(back->gpus_per_node, spec.gpus_per_node);
    EXPECT_EQ(back->collective_latency, spec.collective_latency) << spec.name;
    EXPECT_EQ(back->intra.topology, spec.intra.topology);
    EXPECT_EQ(back->intra.bandwidth, spec.intra.bandwidth) << spec.name;
    EXPECT_EQ(back->intra.links, spec.intra.links);
    EXPECT_EQ(back->intra.latency, spec.intra.latency);
    EXPECT_EQ(back->intra.efficiency, spec.intra.efficiency);
    EXPECT_EQ(back->intra.nvls.enabled, spec.intra.nvls.enabled);
    EXPECT_EQ(back->intra.nvls.latency, spec.intra.nvls.latency);
    EXPECT_EQ(back->intra.nvls.efficiency, spec.intra.nvls.efficiency);
    EXPECT_EQ(back->intra.nvls.channels, spec.intra.nvls.channels);
    EXPECT_EQ(back->intra.nvls.chunk_overhead, spec.intra.nvls.chunk_overhead);
    EXPECT_EQ(back->intra.mesh_links, spec.intra.mesh_links) << spec.name;
    EXPECT_EQ(back->inter.topology, spec.inter.topology);
    EXPECT_EQ(back->inter.nics_per_node, spec.inter.nics_per_node);
    EXPECT_EQ(back->inter.nic_bandwidth, spec.inter.nic_bandwidth) << spec.name;
    EXPECT_EQ(back->inter.latency, spec.inter.latency);
    EXPECT_EQ(back->inter.oversubscription, spec.inter.oversubscription);
    EXPECT_EQ(back->inter.nodes_per_leaf, spec.inter.nodes_per_leaf);
    EXPECT_EQ(back->inter.nodes_per_pod, spec.inter.nodes_per_pod);
    EXPECT_EQ(back->inter.pod_oversubscription, spec.inter.pod_oversubscription);
    EXPECT_EQ(back->inter.efficiency, spec.inter.efficiency);
  }
  const OrderedJson h100 = ClusterSpecToJson(*ClusterPreset("dgx-h100", 1));
  EXPECT_EQ(h100["intra_node"]["bandwidth"], "450 GB/s");
  EXPECT_EQ(h100["inter_node"]["nic_bandwidth"], "400 Gbps");
  EXPECT_EQ(h100["intra_node"]["nvls"]["chunk_overhead"], "640 ns");
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

// NCCL_P2P_NET_CHUNKSIZE as the run sets it: NCCL's 128 KiB unless given, read back as bytes.
TEST(ClusterFromJsonTest, NcclSettings) {
  EXPECT_EQ(ClusterPreset("dgx-h100")->nccl.p2p_net_chunk_size, Bytes(int64_t{128} * 1024));
  const Expected<ClusterSpec> cluster = ClusterFromJson(
      Json::parse(R"({"preset": "dgx-h100", "nccl": {"p2p_net_chunk_size": "2 MiB"}})"), "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->nccl.p2p_net_chunk_size, Bytes(int64_t{2} * 1024 * 1024));
  EXPECT_EQ(ClusterSpecToJson(*cluster)["nccl"]["p2p_net_chunk_size"], "2097152 B");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "nccl": {"p2p_net_chunk_size": 2097152}})"),
            "cluster.nccl.p2p_net_chunk_size: expected a quantity with a unit, such as "
            "\"4 MiB\", got 2097152");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "nccl": {"p2p_net_chunk_size": "0 B"}})"),
            "cluster.nccl.p2p_net_chunk_size: must be positive and at most 2147483647 bytes "
            "(NCCL reads an int), got \"0 B\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "nccl": {"p2p_net_chunk_size": "4 GiB"}})"),
            "cluster.nccl.p2p_net_chunk_size: must be positive and at most 2147483647 bytes "
            "(NCCL reads an int), got \"4 GiB\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "nccl": {"buffsize": "8 MiB"}})"),
            "cluster.nccl.buffsize: unknown key (expected one of \"p2p_net_chunk_size\")");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "nccl": 4})"),
            "cluster.nccl: expected a JSON object, got 4");
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

// A third switch tier: pods of whole leaves (Llama 3's 24k-GPU cluster: racks of 2 nodes, pods
// of 384 nodes, 1:7 between pods).
TEST(ClusterFromJsonTest, PodsGroupWholeLeaves) {
  const Expected<ClusterSpec> meta =
      ClusterFromJson(Json::parse(R"({"preset": "dgx-h100", "nodes": 3072,
                      "inter_node": {"topology": "fat-tree", "nodes_per_leaf": 2,
                                     "nodes_per_pod": 384, "pod_oversubscription": 7}})"),
                      "cluster");
  ASSERT_TRUE(meta.ok()) << meta.error().ToString();
  EXPECT_TRUE(meta->HasPods());
  EXPECT_EQ(meta->PodOversubscription(), 7);
  // One pod holding every node is no tier.
  ClusterSpec small = *meta;
  small.nodes = 384;
  EXPECT_FALSE(small.HasPods());
  Json leafless = Json::parse(kCustom);
  leafless["inter_node"].erase("nodes_per_leaf");
  leafless["inter_node"]["nodes_per_pod"] = 64;
  EXPECT_EQ(ErrorOf(leafless.dump()),
            "cluster.inter_node.nodes_per_pod: a pod groups leaf switches; set "
            "inter_node.nodes_per_leaf too, got 64");
  EXPECT_THAT(ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"nodes_per_pod": 48}})"),
              HasSubstr("cluster.inter_node.nodes_per_pod: must be a multiple of nodes_per_leaf "
                        "(32) larger than it: a pod holds whole leaves, got 48"));
  EXPECT_THAT(ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"nodes_per_pod": 32}})"),
              HasSubstr("must be a multiple of nodes_per_leaf (32) larger than it"));
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"pod_oversubscription": 7}})"),
            "cluster.inter_node.pod_oversubscription: applies between pods; set "
            "inter_node.nodes_per_pod, got 7");
  EXPECT_THAT(ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"nodes_per_pod": 0.5}})"),
              HasSubstr("cluster.inter_node.nodes_per_pod"));
  EXPECT_THAT(ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"topology": "torus-2d",
                          "dimensions": [2, 2], "nodes_per_pod": 64}})"),
              HasSubstr("pods are a switch tier of a fat-tree or rail-optimized fabric, not of a "
                        "torus-2d"));
  EXPECT_THAT(
      ErrorOf(R"({"preset": "dgx-h100", "inter_node": {"pod_oversubscription": 0.5}})"),
      HasSubstr("cluster.inter_node.pod_oversubscription: must be in [1, 1000000], got 0.5"));
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
