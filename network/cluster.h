// Cluster and network specs (docs/network.md): GPUs per node, the intra-node fabric and the
// inter-node fabric, read strictly from JSON with quantities in units, or from a preset.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "network/mesh_rings.h"
#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim::network {

enum class IntraTopology { kSwitch, kRing, kMesh, kPcie };
enum class InterTopology { kFatTree, kRailOptimized, kRing, kTorus2d, kTorus3d };

std::string_view IntraTopologyName(IntraTopology topology);
std::string_view InterTopologyName(InterTopology topology);
// Whether an inter-node fabric connects nodes directly (ring, torus) rather than by switches.
bool IsDirectConnected(InterTopology topology);

// NVLink SHARP (NVLS): an NVSwitch that reduces in the switch (third generation, H100), which
// NCCL's `nvls` all-reduce uses inside a node (docs/network.md, "Presets" and "Analytical
// model").
// src/include/device.h NCCL_MAX_NVLS_ARITY: the most heads (GPUs of a node) an NVLS
// communicator has.
inline constexpr int kNvlsMaxHeads = 32;

struct NvlsSpec {
  bool enabled = false;
  DurationNs latency;  // the algorithm's latency, on top of the collective latency
  // Fraction of the intra-node bandwidth it achieves (0, 1] with NCCL's full 128 KiB chunks;
  // smaller messages run on smaller chunks, each paying `chunk_overhead`.
  double efficiency = 1.0;
  // NCCL's NVLS channels (NVLS_NCHANNELS: 16 on Hopper, 24 on a Blackwell NVLink domain).
  int channels = 16;
  // What each chunk costs a channel beyond moving its bytes: the synchronization between the
  // GPUs' multimem loads and stores. 640 ns: fitted on the HGX H100 8-GPU all-reduce of
  // ../shared/network/measured-collectives.json, 32 MiB–1 GiB (docs/network.md, "NVLS chunks").
  DurationNs chunk_overhead = DurationNs(640);
};

struct IntraNodeSpec {
  IntraTopology topology = IntraTopology::kSwitch;
  Bandwidth bandwidth;  // what one GPU can send to its peers, per direction
  // The links that bandwidth is made of (NVLinks per GPU: 18 on H100): one NCCL channel
  // drives one link, so a point-to-point transfer on few channels gets a share of it.
  int links = 1;
  DurationNs latency;
  double efficiency = 1.0;  // fraction of `bandwidth` collectives achieve (0, 1]
  NvlsSpec nvls;
  // A mesh's NVLinks (`nvlinks`): the links between local GPUs i and j at
  // [i · gpus_per_node + j], symmetric; each link moves bandwidth / links. Empty: the mesh is
  // priced as a switch. Set, a collective on some of a node's GPUs moves at the rate of the
  // rings their links hold (mesh_rings.h; IntraGroupRate in collective_algorithms.h).
  std::vector<int> mesh_links;
  std::shared_ptr<const MeshRingTable> mesh_rings;  // every subset's rings (PrepareMesh)
};

struct InterNodeSpec {
  InterTopology topology = InterTopology::kFatTree;
  int nics_per_node = 1;
  Bandwidth nic_bandwidth;  // per NIC, per direction
  DurationNs latency;
  double oversubscription = 1.0;  // fat-tree: leaf down-links / up-links (>= 1)
  int nodes_per_leaf = 0;         // fat-tree / rail-optimized: nodes under one leaf switch
  // A third switch tier: pods of `nodes_per_pod` nodes (whole leaves) joined by a core tier
  // whose up-links carry 1 / pod_oversubscription of what the pod's leaves send up (Llama 3's
  // 24k-GPU cluster: full bisection within 3,072-GPU pods, 1:7 between them).
  int nodes_per_pod = 0;  // 0: no pods (two tiers at most)
  double pod_oversubscription = 1.0;
  std::vector<int> dimensions;  // torus: nodes along each dimension (product = nodes)
  double efficiency = 1.0;
};

enum class ServerPlacement { kDedicated, kColocated };
std::string_view ServerPlacementName(ServerPlacement placement);

// Parameter servers, BytePS-style summation servers: the `parameter_server` all-reduce pushes
// gradient partitions to them and pulls the sums back (docs/network.md, "Parameter servers").
// Dedicated: CPU machines of their own, one NIC each, attached to the spine of a switched
// fabric. Colocated: a server process on each of the first `count` nodes, using that node's
// NICs. In the flow model server s is endpoint gpu_count() + s.
struct ServerSpec {
  int count = 0;  // 0: none
  ServerPlacement placement = ServerPlacement::kDedicated;
  Bandwidth nic_bandwidth;           // dedicated: one server's NIC, per direction
  Bytes partition = Bytes(4096000);  // the push/pull unit (BytePS's BYTEPS_PARTITION_BYTES)
};

// NCCL's environment as the run sets it, where dtsim's costs depend on it (docs/network.md,
// "NCCL settings"). Defaults: NCCL's own.
struct NcclSettings {
  // NCCL_P2P_NET_CHUNKSIZE (src/init.cc): the step in which point-to-point traffic (sends,
  // receives, all-to-alls) crosses the network. NCCL 2.19 and later use at most an eighth of
  // the Simple protocol's 4 MiB buffer (P2pNetChunkBytes, nccl_p2p.h).
  Bytes p2p_net_chunk_size = Bytes(int64_t{128} * 1024);
};

struct ClusterSpec {
  std::string name;  // the preset's name, or "custom"
  int nodes = 0;     // 0: not given; FitCluster sizes it to the workload
  int gpus_per_node = 1;
  IntraNodeSpec intra;
  InterNodeSpec inter;
  ServerSpec servers;
  NcclSettings nccl;
  // Charged once per collective before its first step: the kernel launch and the set-up
  // NCCL's tuning model calls its base latency (docs/network.md, "Presets").
  DurationNs collective_latency;
  // What a custom cluster (no preset) left out and dtsim assumed, as sentences naming the key:
  // an efficiency of 1 (the line rate), no collective latency. Results repeat them as warnings.
  std::vector<std::string> assumed;
  // Whether every GPU of a node communicates off-node at once, as a training step's parallel
  // groups do (set for simulations of training configs; not for replayed traces or collectives
  // priced alone): the analytical model then gives a group's members on a node only their GPUs'
  // share of its NICs where it has fewer NICs than GPUs (docs/network.md, "Analytical model").
  bool gpus_share_nics = false;

  int gpu_count() const { return nodes * gpus_per_node; }
  int NodeOf(int32_t rank) const { return rank / gpus_per_node; }
  // Server s as a flow endpoint, and whether an endpoint is a server.
  int32_t ServerEndpoint(int server) const { return gpu_count() + server; }
  bool IsServer(int32_t endpoint) const { return endpoint >= gpu_count(); }
  // Whether nodes sit under more than one leaf switch (fat-tree, rail-optimized).
  bool HasLeafSwitches() const { return inter.nodes_per_leaf > 0 && inter.nodes_per_leaf < nodes; }
  // Whether leaves are grouped into more than one pod (a three-tier fabric).
  bool HasPods() const {
    return HasLeafSwitches() && inter.nodes_per_pod > 0 && inter.nodes_per_pod < nodes;
  }
  // A tier's up-link capacity as a fraction of the NIC bandwidth under it: 1 / oversubscription
  // at the leaves, 1 / (oversubscription × pod_oversubscription) at the pods.
  double LeafOversubscription() const { return inter.oversubscription; }
  double PodOversubscription() const { return inter.oversubscription * inter.pod_oversubscription; }
};

std::span<const std::string_view> ClusterPresetNames();
// A preset with `nodes` nodes (0: sized to the workload later). Errors list the presets.
Expected<ClusterSpec> ClusterPreset(std::string_view name, int nodes = 1);

// {"preset": "dgx-a100", "nodes": 4 (or "gpus": 32), "gpus_per_node": 8, "collective_latency",
//  "intra_node": {"topology", "bandwidth", "latency", "efficiency",
//                 "nvls": {"latency", "efficiency", "channels", "chunk_overhead"} or false},
//  "inter_node": {"topology", "nics_per_node", "nic_bandwidth", "latency", "oversubscription",
//                 "nodes_per_leaf", "nodes_per_pod", "pod_oversubscription", "dimensions",
//                 "efficiency"},
//  "servers": {"count", "placement" ("dedicated" | "colocated"), "nic_bandwidth", "partition"},
//  "nccl": {"p2p_net_chunk_size"}}
// Without a preset every field but the optional ones is required; with one, any field
// overrides the preset's. Errors carry the JSON path under `path`.
Expected<ClusterSpec> ClusterFromJson(const Json& value, const std::string& path);

// The spec as the custom form ClusterFromJson reads (no preset; every value resolved), for
// the provenance a result records and for configs dtsim writes. Reads back to the same spec.
OrderedJson ClusterSpecToJson(const ClusterSpec& cluster);

// Sizes a cluster with 0 nodes (none given) to `ranks`: ceil(ranks / gpus_per_node) nodes.
// Errors when the ranks do not fit on the cluster's GPUs, or colocated servers on its nodes.
Status FitCluster(ClusterSpec& cluster, int32_t ranks);

// A preset name, or a JSON file holding a cluster spec.
Expected<ClusterSpec> LoadCluster(const std::string& preset_or_path);

}  // namespace dtsim::network
