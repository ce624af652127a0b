// NCCL's rings on an NVLink mesh (network/mesh_rings.h) and what they make a collective cost on
// a DGX-1 (the dgx1-v100 preset: 6 NVLinks of 25 GB/s per GPU at efficiency 0.89, 22.25 GB/s
// a link; α_intra 3 us; 8.4 us collective latency).
#include "network/mesh_rings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "network/cluster.h"
#include "network/collective_algorithms.h"
#include "tests/network/test_cluster.h"

namespace dtsim::network {
namespace {

using testing::HasSubstr;
using testing_support::Ranks;

std::vector<int> Dgx1Links() { return ClusterPreset("dgx1-v100")->intra.mesh_links; }

uint32_t FirstGpus(int count) { return (1U << count) - 1; }

TEST(MeshRingsTest, TheDgx1HoldsTheRingsVtrainMeasured) {
  // GPUs 0–1 share one NVLink: one ring. 0–2: the triangle both ways. 0–3, a fully connected
  // quad of 9 links: 4 rings. 0–5: GPUs 4 and 5 are joined by one link and each by one pair of
  // links to the quad, so every ring runs 0–4–5–1 and back: 2. 0–6: 4. All 8, six links each:
  // 6. vTrain's bus bandwidths at 1 GiB, 22.6, 45.1, 85.4, 45.7, 87.0 and 134.5 GB/s, are
  // those ring counts at 21–22.6 GB/s a link (docs/network.md, "NVLink meshes").
  const std::vector<int> links = Dgx1Links();
  const std::vector<int> expected = {0, 0, 1, 2, 4, 2, 2, 4, 6};
  for (int gpus = 2; gpus <= 8; ++gpus) {
    const MeshRings rings = PackMeshRings(links, 8, FirstGpus(gpus));
    EXPECT_EQ(rings.rings, expected[static_cast<size_t>(gpus)]) << gpus << " GPUs";
    EXPECT_FALSE(rings.host) << gpus << " GPUs";
    EXPECT_EQ(rings.orders.size(), static_cast<size_t>(rings.rings));
    EXPECT_EQ(rings.relayed, gpus == 5) << gpus << " GPUs";
  }
  // 0–4: GPU 4's only link in the group goes to GPU 0, so no direct ring exists; through GPU 0
  // (NCCL's PATH_NVB) two do, each entering and leaving GPU 4 over the 0–4 pair of links.
  const MeshRings five = PackMeshRings(links, 8, FirstGpus(5));
  EXPECT_EQ(five.rings, 2);
  EXPECT_TRUE(five.relayed);
}

TEST(MeshRingsTest, StridedGroupsAndUnlinkedPairs) {
  const std::vector<int> links = Dgx1Links();
  // Every other GPU (a data-parallel group under TP 2): the square 0–2–6–4, one link on three
  // of its sides: 2 rings.
  EXPECT_EQ(PackMeshRings(links, 8, 0b01010101).rings, 2);
  EXPECT_EQ(PackMeshRings(links, 8, 0b10101010).rings, 2);
  // GPUs 1 and 4 share no NVLink and no member to relay through: one ring through the host.
  const MeshRings host = PackMeshRings(links, 8, 0b00010010);
  EXPECT_TRUE(host.host);
  EXPECT_EQ(host.rings, 1);
  EXPECT_EQ(host.orders, (std::vector<std::vector<int>>{{1, 4}}));
  EXPECT_EQ(PackMeshRings(links, 8, 0b1).rings, 0);  // one GPU: nothing to move
}

TEST(MeshRingsTest, FullyConnectedMeshesDecomposeExceptOnFourAndSix) {
  // Eight GPUs with one link per pair (an MI300X-like mesh): its 56 links make 7 rings, as the
  // complete symmetric digraph on n vertices splits into n − 1 Hamiltonian cycles for every n
  // but 4 and 6 (Tillson, 1980), where 2 and 4 fit.
  std::vector<int> links(64, 1);
  for (int g = 0; g < 8; ++g) links[static_cast<size_t>(g * 9)] = 0;
  const std::vector<int> expected = {0, 0, 1, 2, 2, 4, 4, 6, 7};
  for (int gpus = 2; gpus <= 8; ++gpus) {
    EXPECT_EQ(PackMeshRings(links, 8, FirstGpus(gpus)).rings, expected[static_cast<size_t>(gpus)])
        << gpus << " GPUs";
  }
}

TEST(MeshRingsTest, ManyLinksAPairStayCheap) {
  // 64 links a pair: the map is 64 times the single-link one, so 64 × 7 rings, found without
  // searching 448 rings' packings (which took half a minute before the common factor).
  std::vector<int> links(64, 64);
  for (int g = 0; g < 8; ++g) links[static_cast<size_t>(g * 9)] = 0;
  const MeshRings rings = PackMeshRings(links, 8, 0xFF);
  EXPECT_EQ(rings.rings, 448);
  EXPECT_EQ(rings.orders.size(), 448U);
  // Uneven links (1 or 2 a pair) and more than 8 rings possible: a greedy packing, each ring
  // within the links.
  links.assign(64, 0);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      links[static_cast<size_t>(a * 8 + b)] = links[static_cast<size_t>(b * 8 + a)] =
          1 + (a + b) % 2;
    }
  }
  const MeshRings greedy = PackMeshRings(links, 8, 0xFF);
  std::vector<int> used(64, 0);
  for (const std::vector<int>& order : greedy.orders) {
    for (size_t i = 0; i < order.size(); ++i) {
      ++used[static_cast<size_t>(order[i] * 8 + order[(i + 1) % order.size()])];
    }
  }
  for (size_t arc = 0; arc < used.size(); ++arc) EXPECT_LE(used[arc], links[arc]) << arc;
  EXPECT_GE(greedy.rings, 7);
}

DurationNs RingAllReduce(const std::vector<int32_t>& group, int64_t size) {
  const ClusterSpec cluster = *ClusterPreset("dgx1-v100");
  const CollectiveRequest request{.kind = graph::CommKind::kAllReduce,
                                  .size = Bytes(size),
                                  .shape = ShapeOfGroup(group, cluster),
                                  .cluster = &cluster,
                                  .ranks = group};
  return ChooseCollectiveAlgorithm(request, "ring")->time;
}

TEST(MeshRingsTest, ACollectiveMovesAtItsGpusRings) {
  const ClusterSpec cluster = *ClusterPreset("dgx1-v100");
  // A link: 150 GB/s / 6 links · 0.89 = 22.25 GB/s.
  EXPECT_DOUBLE_EQ(IntraGroupRate(cluster, Ranks(0, 2)), 22.25e9);
  EXPECT_DOUBLE_EQ(IntraGroupRate(cluster, Ranks(0, 4)), 4 * 22.25e9);
  EXPECT_DOUBLE_EQ(IntraGroupRate(cluster, Ranks(0, 8)), 6 * 22.25e9);
  EXPECT_DOUBLE_EQ(IntraGroupRate(cluster, std::vector<int32_t>{1, 4}), kMeshHostRate);
  // Two nodes, GPUs 0–3 of each: a ring is as fast as its slowest node's rings (4 on both).
  EXPECT_DOUBLE_EQ(IntraGroupRate(cluster, std::vector<int32_t>{0, 1, 2, 3, 8, 9, 10, 11}),
                   4 * 22.25e9);
  // 1e8 B over GPUs 0–1: 8.4 us + 2 steps · 3 us + 1e8 B / 22.25 GB/s (4494383 ns, rounded up)
  // = 4508783 ns; over all 8: 8.4 us + 14 · 3 us + 2 · 7/8 · 1e8 B / 133.5 GB/s (1310862 ns) =
  // 1361262 ns. As a switch of 150 GB/s both would take a ninth to a third less.
  EXPECT_EQ(RingAllReduce(Ranks(0, 2), 100'000'000).ns(), 4'508'783);
  EXPECT_EQ(RingAllReduce(Ranks(0, 8), 100'000'000).ns(), 1'361'262);
}

Expected<ClusterSpec> Mesh(const Json& nvlinks, int gpus_per_node = 4, int links = 3) {
  return ClusterFromJson(
      Json{{"gpus_per_node", gpus_per_node},
           {"intra_node",
            {{"topology", "mesh"},
             {"bandwidth", "75 GB/s"},
             {"links", links},
             {"latency", "3 us"},
             {"nvlinks", nvlinks}}},
           {"inter_node",
            {{"topology", "fat-tree"}, {"nic_bandwidth", "100 Gbps"}, {"latency", "5 us"}}}},
      "cluster");
}

TEST(MeshRingsTest, AConfigDescribesItsMesh) {
  const Json ring4 = Json::array({{0, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}});
  const Expected<ClusterSpec> cluster = Mesh(ring4);
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  // A 4-cycle of single links: one ring each way; 25 GB/s a link.
  EXPECT_DOUBLE_EQ(IntraGroupRate(*cluster, Ranks(0, 4)), 2 * 25e9);
  const auto error = [](const Expected<ClusterSpec>& result) {
    return result.ok() ? std::string("ok") : result.error().ToString();
  };
  EXPECT_THAT(error(Mesh(Json::array({{0, 1}, {1, 0}}))),
              HasSubstr("the NVLink map has 2 GPUs but a node has 4 (gpus_per_node)"));
  EXPECT_THAT(error(Mesh(Json::array({{0, 1, 0, 1}, {0, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}))),
              HasSubstr("cluster.intra_node.nvlinks[0][1]: NVLinks join two GPUs both ways"));
  EXPECT_THAT(error(Mesh(Json::array({{1, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}))),
              HasSubstr("cluster.intra_node.nvlinks[0][0]: a GPU has no NVLink to itself"));
  EXPECT_THAT(error(Mesh(Json::array({{0, 2, 0, 2}, {2, 0, 1, 0}, {0, 1, 0, 1}, {2, 0, 1, 0}}))),
              HasSubstr("GPU 0 has 4 NVLinks but intra_node.links is 3"));
  EXPECT_THAT(error(Mesh(Json::array({{0, 1, 0}, {1, 0, 1}, {0, 1, 0, 1}, {1, 0, 1, 0}}))),
              HasSubstr("cluster.intra_node.nvlinks[0]: expected a row of 4 NVLink counts"));
  EXPECT_THAT(error(Mesh(Json::array({{0, -1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}))),
              HasSubstr("cluster.intra_node.nvlinks[0][1]"));
  EXPECT_THAT(error(Mesh(Json(std::vector<std::vector<int>>(9, std::vector<int>(9, 0))), 9)),
              HasSubstr("expected an array of 2 to 8 rows"));
}

TEST(MeshRingsTest, APresetMeshOnFewerGpusKeepsTheLinksAmongThem) {
  // dgx1-v100 with 4 GPUs a node: GPUs 0–3 of the DGX-1, the fully connected quad (4 rings).
  const Expected<ClusterSpec> four =
      ClusterFromJson(Json{{"preset", "dgx1-v100"}, {"gpus_per_node", 4}}, "cluster");
  ASSERT_TRUE(four.ok()) << four.error().ToString();
  EXPECT_EQ(four->intra.mesh_links.size(), 16U);
  EXPECT_DOUBLE_EQ(IntraGroupRate(*four, Ranks(0, 4)), 4 * 22.25e9);
  // More GPUs than the map: the user must give theirs.
  const Expected<ClusterSpec> sixteen =
      ClusterFromJson(Json{{"preset", "dgx1-v100"}, {"gpus_per_node", 16}}, "cluster");
  ASSERT_FALSE(sixteen.ok());
  EXPECT_THAT(sixteen.error().ToString(),
              HasSubstr("the NVLink map has 8 GPUs but a node has 16 (gpus_per_node); a mesh "
                        "has at most 8 GPUs; set intra_node.topology to \"switch\""));
  // A config that makes the preset's node a switch drops the preset's map.
  const Expected<ClusterSpec> rewired = ClusterFromJson(
      Json{{"preset", "dgx1-v100"}, {"intra_node", {{"topology", "switch"}}}}, "cluster");
  ASSERT_TRUE(rewired.ok()) << rewired.error().ToString();
  EXPECT_TRUE(rewired->intra.mesh_links.empty());
  EXPECT_DOUBLE_EQ(IntraGroupRate(*rewired, Ranks(0, 2)), 150e9 * 0.89);
  // NVLink counts given for a switch are refused.
  const Expected<ClusterSpec> switched =
      ClusterFromJson(Json{{"preset", "dgx-a100"},
                           {"intra_node", {{"nvlinks", Json::array({{0, 1}, {1, 0}})}}},
                           {"gpus_per_node", 2}},
                      "cluster");
  ASSERT_FALSE(switched.ok());
  EXPECT_THAT(switched.error().ToString(),
              HasSubstr("NVLink counts describe a mesh, not a switch"));
}

}  // namespace
}  // namespace dtsim::network
