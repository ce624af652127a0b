// NCCL's rings on an NVLink mesh: GPUs wired to each other by a few NVLinks per pair, no
// switch (DGX-1's hybrid cube-mesh of eight V100s: 1 or 2 links between 16 of the 28 pairs).
// A collective's ring bandwidth there depends on which GPUs of the node it runs on: NCCL's
// topology search (src/graph/search.cc) builds its ring channels out of the NVLinks that join
// the communicator's GPUs, each link carrying one ring per direction. So a ring collective
// among a node's members moves  rings × one link's bandwidth, where `rings` is the most
// directed rings through all members that the links hold (docs/network.md, "NVLink meshes").
//
// The rings are searched as NCCL relaxes its path types (ncclTopoCompute's typeIntra): over
// direct NVLinks first (PATH_NVL); if no ring through every member exists, over NVLink through
// one intermediate member (PATH_NVB: GPU i reaches j through m, using links i–m and m–j);
// failing that, through the host (PCIe and the CPUs, NCCL's SHM transport: one ring at
// kMeshHostRate).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace dtsim::network {

// The most GPUs a mesh node may have: rings are found by enumerating Hamiltonian cycles.
inline constexpr int kMaxMeshGpus = 8;

// What one ring through the host moves, bytes per second: a PCIe 3.0 x16 link's ~12 GB/s, the
// rate NCCL's SHM transport reaches between GPUs without a peer path (docs/network.md).
inline constexpr double kMeshHostRate = 12e9;

struct MeshRings {
  int rings = 0;         // directed rings (NCCL ring channels before duplication)
  bool relayed = false;  // some hop runs through an intermediate GPU (PATH_NVB)
  bool host = false;     // no NVLink ring exists: one ring through the host
  // Each ring's members in ring order, as local GPU indices: the packing itself, which tests
  // check against the links (both models use only the count: the flow model caps a group's
  // on-node transfers at its rings' rate rather than routing each ring).
  std::vector<std::vector<int>> orders;
};

// The rings through the members of `members` (bit g: local GPU g) of a mesh of `gpus` GPUs
// whose pair (i, j) has links[i·gpus + j] NVLinks (symmetric, zero diagonal). One member:
// no ring (nothing to move). Deterministic and bounded: links in a common multiple g are
// packed as the map over g, g times; up to 8 rings by branch and bound (the best found within
// 200,000 steps), more greedily (DGX-1's and evenly linked maps come out exact).
MeshRings PackMeshRings(std::span<const int> links, int gpus, uint32_t members);

// Every subset's rings, computed once per mesh (2^gpus entries, index = member bits); the
// subsets share 4,000,000 branch-and-bound steps, the rest packed greedily.
using MeshRingTable = std::vector<MeshRings>;
std::shared_ptr<const MeshRingTable> BuildMeshRingTable(std::span<const int> links, int gpus);

}  // namespace dtsim::network
