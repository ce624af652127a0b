#include "network/cluster.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <optional>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim::network {
namespace {

constexpr std::array<std::string_view, 4> kIntraNames = {"switch", "ring", "mesh", "pcie"};
constexpr std::array<std::string_view, 5> kInterNames = {"fat-tree", "rail-optimized", "ring",
                                                         "torus-2d", "torus-3d"};
constexpr std::array<std::string_view, 2> kPlacementNames = {"dedicated", "colocated"};
constexpr int kMaxNodes = 1 << 20;

struct Preset {
  std::string_view name;
  int gpus_per_node;
  IntraNodeSpec intra;
  InterNodeSpec inter;
  DurationNs collective_latency;
};

Bandwidth Rate(std::string_view text) { return ParseBandwidth(text).value(); }
DurationNs Time(std::string_view text) { return ParseDuration(text).value(); }

// Sources and the reasoning behind each number: docs/network.md, "Presets".
const std::array<Preset, 10>& Presets() {
  // NCCL's tuning model charges a ring all-reduce with the Simple protocol 8.4 us before its
  // per-hop latencies (src/graph/tuning.cc, baseLat), whatever the fabric.
  static const DurationNs kNcclBaseLatency = Time("8.4 us");
  // NVLink SHARP on NVSwitch (NVLink 4 and 5): NCCL's NVLS latency on NVLink, the efficiency
  // fitted on DGX H100, NvlsSpec's channels (Hopper's 16) and chunk overhead (docs/network.md);
  // a Blackwell NVLink domain runs NCCL's 24 NVLS channels.
  static const NvlsSpec kNvls{true, Time("23 us"), 0.686};
  static const NvlsSpec kNvls5 = [] {
    NvlsSpec nvls = kNvls;
    nvls.channels = 24;
    return nvls;
  }();
  // NVLink 4 on NVSwitch (18 links × 25 GB/s per GPU per direction) with the DGX H100's
  // efficiency and NVLS; NVLink 5 (18 × 50 GB/s) with the same, assumed, on 24 NVLS channels.
  static const IntraNodeSpec kNvlink4{
      IntraTopology::kSwitch, Rate("450 GB/s"), 18, Time("2 us"), 0.822, kNvls};
  static const IntraNodeSpec kNvlink5{
      IntraTopology::kSwitch, Rate("900 GB/s"), 18, Time("2 us"), 0.822, kNvls5};
  // Eight 400 Gb/s ConnectX-7 rails (DGX H100 SuperPOD: 32 nodes per leaf), at the DGX H100's
  // NIC efficiency; and one NIC per GPU of `rate` into a non-blocking fat-tree.
  static const InterNodeSpec kCx7Rails{.topology = InterTopology::kRailOptimized,
                                       .nics_per_node = 8,
                                       .nic_bandwidth = Rate("400 Gbps"),
                                       .latency = Time("5 us"),
                                       .nodes_per_leaf = 32,
                                       .efficiency = 0.97};
  // DGX-1's hybrid cube-mesh (DGX-1 with Tesla V100 System Architecture white paper;
  // nvidia-smi topo -m on a DGX-1V): two fully connected quads, 0–3 and 4–7, joined GPU g to
  // g + 4; 8 of the 16 joined pairs bonded by two NVLinks; six links per GPU.
  static const std::vector<int> kDgx1Nvlinks = {0, 1, 1, 2, 2, 0, 0, 0,  //
                                                1, 0, 2, 1, 0, 2, 0, 0,  //
                                                1, 2, 0, 2, 0, 0, 1, 0,  //
                                                2, 1, 2, 0, 0, 0, 0, 1,  //
                                                2, 0, 0, 0, 0, 1, 1, 2,  //
                                                0, 2, 0, 0, 1, 0, 2, 1,  //
                                                0, 0, 1, 0, 1, 2, 0, 2,  //
                                                0, 0, 0, 1, 2, 1, 2, 0};
  const auto fat_tree = [](int nics, std::string_view rate) {
    return InterNodeSpec{.topology = InterTopology::kFatTree,
                         .nics_per_node = nics,
                         .nic_bandwidth = Rate(rate),
                         .latency = Time("5 us"),
                         .efficiency = 0.97};
  };
  static const std::array<Preset, 10> kPresets = {{
      // Efficiencies: measured nccl-tests bus bandwidth / line rate (docs/network.md).
      {"dgx-a100",
       8,
       {IntraTopology::kSwitch, Rate("300 GB/s"), 12, Time("2 us"), 0.775},
       {.topology = InterTopology::kRailOptimized,
        .nics_per_node = 8,
        .nic_bandwidth = Rate("200 Gbps"),
        .latency = Time("5 us"),
        .nodes_per_leaf = 32,
        .efficiency = 0.96},
       kNcclBaseLatency},
      {"dgx-h100", 8, kNvlink4, kCx7Rails, kNcclBaseLatency},
      // Same NVLink 4 NVSwitch fabric and ConnectX-7 NICs as the DGX H100: its efficiencies.
      {"dgx-h200", 8, kNvlink4, kCx7Rails, kNcclBaseLatency},
      // NVLink 5 (18 links × 50 GB/s) on NVSwitch, 8 × 400 Gb/s ConnectX-7; efficiencies
      // assumed equal to the DGX H100's (same NCCL protocols and NICs), not measured.
      {"dgx-b200", 8, kNvlink5, kCx7Rails, kNcclBaseLatency},
      // A GB200 NVL72 rack as one 72-GPU NVLink 5 domain (18 compute trays of 4 GPUs through
      // 9 NVLink switch trays), one 400 Gb/s ConnectX-7 per GPU into a non-blocking fabric;
      // efficiencies assumed equal to the DGX H100's, not measured.
      {"gb200-nvl72", 72, kNvlink5, fat_tree(72, "400 Gbps"), kNcclBaseLatency},
      // Cloud H100 nodes: the DGX H100's NVLink 4 NVSwitch fabric and efficiencies; their
      // networks from the providers' specifications (docs/network.md, "Presets"). Azure ND H100
      // v5: 8 × 400 Gb/s NDR InfiniBand (ConnectX-7), one per GPU.
      {"azure-nd-h100-v5", 8, kNvlink4, fat_tree(8, "400 Gbps"), kNcclBaseLatency},
      // AWS p5.48xlarge: 3,200 Gb/s of EFA (32 × 100 Gb/s devices, four per GPU, which NCCL's
      // EFA plugin stripes: one 400 Gb/s rail per GPU); EFA's latency and efficiency are not
      // published: InfiniBand's assumed.
      {"aws-p5", 8, kNvlink4, fat_tree(8, "400 Gbps"), kNcclBaseLatency},
      // GCP A3 Mega (a3-megagpu-8g): 8 × 200 Gb/s GPU NICs (1,600 Gb/s, GPUDirect-TCPXO) beside
      // the host's; TCPXO's latency and efficiency are not published: InfiniBand's assumed.
      {"gcp-a3-mega", 8, kNvlink4, fat_tree(8, "200 Gbps"), kNcclBaseLatency},
      {"dgx1-v100",
       8,
       {IntraTopology::kMesh, Rate("150 GB/s"), 6, Time("3 us"), 0.89, {}, kDgx1Nvlinks},
       {.topology = InterTopology::kFatTree,
        .nics_per_node = 4,
        .nic_bandwidth = Rate("100 Gbps"),
        .latency = Time("5 us"),
        .nodes_per_leaf = 16,
        .efficiency = 1.0},
       kNcclBaseLatency},
      {"ethernet-25g",
       8,
       {IntraTopology::kPcie, Rate("12 GB/s"), 1, Time("5 us"), 1.0},
       {.topology = InterTopology::kFatTree,
        .nics_per_node = 1,
        .nic_bandwidth = Rate("25 Gbps"),
        .latency = Time("25 us"),
        .nodes_per_leaf = 32,
        .efficiency = 1.0},
       kNcclBaseLatency},
  }};
  return kPresets;
}

std::vector<std::string_view> PresetNameList() {
  std::vector<std::string_view> names;
  for (const Preset& preset : Presets()) names.push_back(preset.name);
  return names;
}

template <typename Enum, size_t N>
Expected<Enum> ReadEnum(JsonObjectReader& reader, std::string_view key,
                        const std::array<std::string_view, N>& names, std::string_view what) {
  DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String(key));
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return Error(
      fmt::format("unknown {}{}; registered: {}", what, DidYouMean(name, names), JoinQuoted(names)),
      JsonChildPath(reader.path(), key), Quote(name));
}

// The optional readers below leave `out` as it is (a preset's value) when the key is absent,
// and register the key as known either way.
Status ReadPositiveRate(JsonObjectReader& reader, std::string_view key, Bandwidth& out) {
  reader.Allow(key);
  if (!reader.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(out, reader.Rate(key));
  if (out.bits_per_second() == 0) {
    return Error("bandwidth must be positive", JsonChildPath(reader.path(), key),
                 JsonValueForError(*reader.Find(key)));
  }
  return Status::Ok();
}

Status ReadDuration(JsonObjectReader& reader, DurationNs& out, std::string_view key = "latency") {
  reader.Allow(key);
  if (!reader.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(out, reader.Duration(key));
  return Status::Ok();
}

Status ReadFraction(JsonObjectReader& reader, std::string_view key, double low, double high,
                    bool low_inclusive, double& out) {
  reader.Allow(key);
  if (!reader.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(out, reader.Number(key));
  if (out > high || out < low || (!low_inclusive && out == low)) {
    return Error(fmt::format("must be in {}{}, {}]", low_inclusive ? "[" : "(", low, high),
                 JsonChildPath(reader.path(), key), JsonValueForError(*reader.Find(key)));
  }
  return Status::Ok();
}

Status ReadCount(JsonObjectReader& reader, std::string_view key, int64_t max, int& out) {
  const Json* value = reader.Find(key);
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const int64_t count,
                         JsonToInt(*value, JsonChildPath(reader.path(), key), 1, max));
  out = static_cast<int>(count);
  return Status::Ok();
}

// Without a preset to fall back on, a section must give these keys.
Status RequireUnlessPreset(const JsonObjectReader& reader, bool preset,
                           std::initializer_list<const char*> keys) {
  if (preset) return Status::Ok();
  for (const char* key : keys) {
    if (!reader.Has(key)) return Error("missing required field", JsonChildPath(reader.path(), key));
  }
  return Status::Ok();
}

// The section's "topology", when given, replaces `topology`.
template <typename Enum, size_t N>
Status ReadTopology(JsonObjectReader& reader, const std::array<std::string_view, N>& names,
                    std::string_view what, Enum& topology) {
  reader.Allow("topology");
  if (!reader.Has("topology")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(topology, (ReadEnum<Enum>(reader, "topology", names, what)));
  return Status::Ok();
}

// "nvls": {"latency", "efficiency", "channels", "chunk_overhead"} turns NVLink SHARP on (a
// preset's values fill what is not given; without a preset the first two are required, the
// others default to Hopper's), false turns it off.
Status ReadNvls(JsonObjectReader& parent, NvlsSpec& nvls) {
  const Json* value = parent.Find("nvls");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(parent.path(), "nvls");
  if (value->is_boolean() && !value->get<bool>()) {
    nvls.enabled = false;
    return Status::Ok();
  }
  if (!value->is_object()) {
    return Error("expected {\"latency\", \"efficiency\"} or false", path,
                 JsonValueForError(*value));
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(*value, path));
  DTSIM_RETURN_IF_ERROR(RequireUnlessPreset(reader, nvls.enabled, {"latency", "efficiency"}));
  nvls.enabled = true;
  DTSIM_RETURN_IF_ERROR(ReadDuration(reader, nvls.latency));
  DTSIM_RETURN_IF_ERROR(ReadFraction(reader, "efficiency", 0, 1, false, nvls.efficiency));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "channels", 64, nvls.channels));
  DTSIM_RETURN_IF_ERROR(ReadDuration(reader, nvls.chunk_overhead, "chunk_overhead"));
  return reader.Finish();
}

// "nvlinks": a square array of link counts between a mesh's GPUs (checked against the node
// by CheckMesh once gpus_per_node is known).
Status ReadNvlinks(JsonObjectReader& reader, IntraNodeSpec& intra) {
  const Json* value = reader.Find("nvlinks");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), "nvlinks");
  if (!value->is_array() || value->empty() || value->size() > kMaxMeshGpus) {
    return Error(fmt::format("expected an array of 2 to {} rows of NVLink counts, one per GPU",
                             kMaxMeshGpus),
                 path, JsonValueForError(*value));
  }
  const size_t gpus = value->size();
  intra.mesh_links.assign(gpus * gpus, 0);
  for (size_t i = 0; i < gpus; ++i) {
    const Json& row = (*value)[i];
    const std::string row_path = JsonIndexPath(path, i);
    if (!row.is_array() || row.size() != gpus) {
      return Error(fmt::format("expected a row of {} NVLink counts", gpus), row_path,
                   JsonValueForError(row));
    }
    for (size_t j = 0; j < gpus; ++j) {
      DTSIM_ASSIGN_OR_RETURN(const int64_t count,
                             JsonToInt(row[j], JsonIndexPath(row_path, j), 0, 64));
      intra.mesh_links[i * gpus + j] = static_cast<int>(count);
    }
  }
  return Status::Ok();
}

// The map of a mesh's first `gpus` GPUs.
std::vector<int> LeadingMesh(const std::vector<int>& links, size_t from, size_t gpus) {
  std::vector<int> out;
  for (size_t i = 0; i < gpus; ++i) {
    out.insert(out.end(), links.begin() + static_cast<std::ptrdiff_t>(i * from),
               links.begin() + static_cast<std::ptrdiff_t>(i * from + gpus));
  }
  return out;
}

// A mesh's NVLink map against its node: one row per GPU, symmetric, none to itself, no GPU
// with more links than `links`; then every subset's rings. A preset's map (`given` false) on
// a node of fewer GPUs keeps the links among its first gpus_per_node GPUs.
Status CheckMesh(ClusterSpec& cluster, const std::string& path, bool given) {
  IntraNodeSpec& intra = cluster.intra;
  const std::string where = JsonChildPath(JsonChildPath(path, "intra_node"), "nvlinks");
  if (intra.mesh_links.empty()) {
    intra.mesh_rings.reset();
    return Status::Ok();
  }
  if (intra.topology != IntraTopology::kMesh) {
    if (!given) {  // the preset's map, for a topology the config replaced
      intra.mesh_links.clear();
      intra.mesh_rings.reset();
      return Status::Ok();
    }
    return Error(fmt::format("NVLink counts describe a mesh, not a {}; set \"topology\": "
                             "\"mesh\" or remove them",
                             IntraTopologyName(intra.topology)),
                 where);
  }
  auto gpus = static_cast<size_t>(std::lround(std::sqrt(intra.mesh_links.size())));
  const auto per_node = static_cast<size_t>(cluster.gpus_per_node);
  if (!given && per_node < gpus) {
    intra.mesh_links = LeadingMesh(intra.mesh_links, gpus, per_node);
    gpus = per_node;
  }
  if (gpus != per_node) {
    const std::string fix =
        per_node > static_cast<size_t>(kMaxMeshGpus)
            ? fmt::format(
                  "a mesh has at most {} GPUs; set intra_node.topology to \"switch\" "
                  "or \"pcie\" for a larger node",
                  kMaxMeshGpus)
            : fmt::format("give a {} × {} intra_node.nvlinks", per_node, per_node);
    return Error(fmt::format("the NVLink map has {} GPUs but a node has {} (gpus_per_node); {}",
                             gpus, per_node, fix),
                 where);
  }
  const auto at = [&](size_t i, size_t j) { return intra.mesh_links[i * gpus + j]; };
  for (size_t i = 0; i < gpus; ++i) {
    int total = 0;
    for (size_t j = 0; j < gpus; ++j) {
      const std::string cell = JsonIndexPath(JsonIndexPath(where, i), j);
      if (i == j && at(i, j) != 0) return Error("a GPU has no NVLink to itself", cell);
      if (at(i, j) != at(j, i)) {
        return Error(fmt::format("NVLinks join two GPUs both ways: [{}][{}] is {}, [{}][{}] {}", i,
                                 j, at(i, j), j, i, at(j, i)),
                     cell);
      }
      total += at(i, j);
    }
    if (total > intra.links) {
      return Error(
          fmt::format("GPU {} has {} NVLinks but intra_node.links is {}", i, total, intra.links),
          JsonIndexPath(where, i));
    }
  }
  intra.mesh_rings = BuildMeshRingTable(intra.mesh_links, static_cast<int>(gpus));
  return Status::Ok();
}

Status ReadIntra(const Json& value, const std::string& path, bool preset, IntraNodeSpec& intra) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  DTSIM_RETURN_IF_ERROR(RequireUnlessPreset(reader, preset, {"topology", "bandwidth", "latency"}));
  DTSIM_RETURN_IF_ERROR(ReadTopology(reader, kIntraNames, "intra-node topology", intra.topology));
  DTSIM_RETURN_IF_ERROR(ReadPositiveRate(reader, "bandwidth", intra.bandwidth));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "links", 1024, intra.links));
  DTSIM_RETURN_IF_ERROR(ReadDuration(reader, intra.latency));
  DTSIM_RETURN_IF_ERROR(ReadFraction(reader, "efficiency", 0, 1, false, intra.efficiency));
  DTSIM_RETURN_IF_ERROR(ReadNvls(reader, intra.nvls));
  DTSIM_RETURN_IF_ERROR(ReadNvlinks(reader, intra));
  if (intra.nvls.enabled && intra.topology != IntraTopology::kSwitch) {
    return Error(fmt::format("NVLink SHARP needs an NVSwitch (topology \"switch\"), not a {}; "
                             "set \"nvls\": false",
                             IntraTopologyName(intra.topology)),
                 JsonChildPath(path, "nvls"));
  }
  return reader.Finish();
}

Status ReadDimensions(JsonObjectReader& reader, InterNodeSpec& inter) {
  const Json* value = reader.Find("dimensions");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), "dimensions");
  if (!value->is_array() || value->empty()) {
    return Error("expected a non-empty array of node counts", path, JsonValueForError(*value));
  }
  inter.dimensions.clear();
  for (size_t i = 0; i < value->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t extent,
                           JsonToInt((*value)[i], JsonIndexPath(path, i), 1, kMaxNodes));
    inter.dimensions.push_back(static_cast<int>(extent));
  }
  return Status::Ok();
}

Status ReadInter(const Json& value, const std::string& path, bool preset, InterNodeSpec& inter) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  DTSIM_RETURN_IF_ERROR(
      RequireUnlessPreset(reader, preset, {"topology", "nic_bandwidth", "latency"}));
  DTSIM_RETURN_IF_ERROR(ReadTopology(reader, kInterNames, "inter-node topology", inter.topology));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "nics_per_node", 1024, inter.nics_per_node));
  DTSIM_RETURN_IF_ERROR(ReadPositiveRate(reader, "nic_bandwidth", inter.nic_bandwidth));
  DTSIM_RETURN_IF_ERROR(ReadDuration(reader, inter.latency));
  DTSIM_RETURN_IF_ERROR(
      ReadFraction(reader, "oversubscription", 1, 1e6, true, inter.oversubscription));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "nodes_per_leaf", kMaxNodes, inter.nodes_per_leaf));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "nodes_per_pod", kMaxNodes, inter.nodes_per_pod));
  DTSIM_RETURN_IF_ERROR(
      ReadFraction(reader, "pod_oversubscription", 1, 1e6, true, inter.pod_oversubscription));
  DTSIM_RETURN_IF_ERROR(ReadDimensions(reader, inter));
  DTSIM_RETURN_IF_ERROR(ReadFraction(reader, "efficiency", 0, 1, false, inter.efficiency));
  return reader.Finish();
}

// {"count", "placement", "nic_bandwidth", "partition"}; a dedicated server's NIC defaults to
// the workers' NIC bandwidth (resolved by the caller, which knows the inter-node spec).
Status ReadServers(const Json& value, const std::string& path, ServerSpec& servers) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  if (!reader.Has("count")) return Error("missing required field", JsonChildPath(path, "count"));
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "count", kMaxNodes, servers.count));
  reader.Allow("placement");
  if (reader.Has("placement")) {
    DTSIM_ASSIGN_OR_RETURN(
        servers.placement,
        (ReadEnum<ServerPlacement>(reader, "placement", kPlacementNames, "server placement")));
  }
  DTSIM_RETURN_IF_ERROR(ReadPositiveRate(reader, "nic_bandwidth", servers.nic_bandwidth));
  if (servers.placement == ServerPlacement::kColocated && reader.Has("nic_bandwidth")) {
    return Error("colocated servers use their node's NICs; nic_bandwidth is for dedicated ones",
                 JsonChildPath(path, "nic_bandwidth"));
  }
  reader.Allow("partition");
  if (reader.Has("partition")) {
    DTSIM_ASSIGN_OR_RETURN(servers.partition, reader.Size("partition"));
    if (servers.partition.count() <= 0) {
      return Error("must be positive", JsonChildPath(path, "partition"),
                   JsonValueForError(*reader.Find("partition")));
    }
  }
  return reader.Finish();
}

// NCCL reads its chunk as an int (src/init.cc NCCL_PARAM).
constexpr int64_t kMaxNcclChunk = (int64_t{1} << 31) - 1;

Status ReadNccl(const Json& value, const std::string& path, NcclSettings& nccl) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  reader.Allow("p2p_net_chunk_size");
  if (reader.Has("p2p_net_chunk_size")) {
    DTSIM_ASSIGN_OR_RETURN(nccl.p2p_net_chunk_size, reader.Size("p2p_net_chunk_size"));
    const int64_t chunk = nccl.p2p_net_chunk_size.count();
    if (chunk <= 0 || chunk > kMaxNcclChunk) {
      return Error(
          fmt::format("must be positive and at most {} bytes (NCCL reads an int)", kMaxNcclChunk),
          JsonChildPath(path, "p2p_net_chunk_size"),
          JsonValueForError(*reader.Find("p2p_net_chunk_size")));
    }
  }
  return reader.Finish();
}

// Colocated servers run on the first `count` nodes, so there must be that many.
Status CheckColocatedServers(const ClusterSpec& cluster, const std::string& path) {
  const ServerSpec& servers = cluster.servers;
  if (servers.placement != ServerPlacement::kColocated || cluster.nodes == 0 ||
      servers.count <= cluster.nodes) {
    return Status::Ok();
  }
  return Error(fmt::format("{} colocated servers need as many nodes, but the cluster has {}",
                           servers.count, cluster.nodes),
               JsonChildPath(JsonChildPath(path, "servers"), "count"),
               std::to_string(servers.count));
}

// "nodes", or "gpus" (the total, which must divide into nodes of gpus_per_node), not both.
Status ReadNodes(JsonObjectReader& reader, ClusterSpec& cluster) {
  if (reader.Has("nodes") && reader.Has("gpus")) {
    return Error("give either \"nodes\" or \"gpus\", not both", reader.path());
  }
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "nodes", kMaxNodes, cluster.nodes));
  int gpus = 0;
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "gpus", int64_t{kMaxNodes} * 8, gpus));
  if (gpus == 0) return Status::Ok();
  if (gpus % cluster.gpus_per_node != 0) {
    return Error(fmt::format("{} GPUs do not divide into nodes of {} (gpus_per_node)", gpus,
                             cluster.gpus_per_node),
                 JsonChildPath(reader.path(), "gpus"), std::to_string(gpus));
  }
  cluster.nodes = gpus / cluster.gpus_per_node;
  return Status::Ok();
}

// A custom cluster's optional fields that flatter when left out: efficiencies of 1 (collectives
// at the line rate) and no collective latency. Each one taken goes into `cluster.assumed`, with
// what the presets carry instead (their sources: docs/network.md, "Presets").
void NoteAssumedDefaults(const Json& value, const std::string& path, ClusterSpec& cluster) {
  const auto lacks = [&value](const char* section, const char* key) {
    const auto it = value.find(section);
    return it != value.end() && it->is_object() && !it->contains(key);
  };
  const auto note = [&](const std::string& key, std::string_view taken, std::string_view presets) {
    cluster.assumed.push_back(
        fmt::format("{} not given: {} assumed ({})", JsonChildPath(path, key), taken, presets));
  };
  if (lacks("intra_node", "efficiency")) {
    note("intra_node.efficiency", "1",
         "collectives at the line rate; the presets' NVLink fabrics achieve 0.775-0.89 of it");
  }
  if (lacks("inter_node", "efficiency")) {
    note("inter_node.efficiency", "1",
         "the line rate; the presets' InfiniBand NICs achieve 0.96-0.97 of it");
  }
  if (!value.contains("collective_latency")) {
    note("collective_latency", "0",
         "every preset charges NCCL's 8.4 us base latency once per collective");
  }
}

// Pods group whole leaves of a switched fabric (docs/network.md, "Switch tiers").
Status CheckPods(const InterNodeSpec& inter, const std::string& path) {
  const std::string inter_path = JsonChildPath(path, "inter_node");
  const std::string pods_path = JsonChildPath(inter_path, "nodes_per_pod");
  if (inter.nodes_per_pod == 0) {
    if (inter.pod_oversubscription != 1) {
      return Error("applies between pods; set inter_node.nodes_per_pod",
                   JsonChildPath(inter_path, "pod_oversubscription"),
                   fmt::format("{}", inter.pod_oversubscription));
    }
    return Status::Ok();
  }
  const std::string pods = std::to_string(inter.nodes_per_pod);
  if (IsDirectConnected(inter.topology)) {
    return Error(fmt::format("pods are a switch tier of a fat-tree or rail-optimized fabric, "
                             "not of a {}",
                             InterTopologyName(inter.topology)),
                 pods_path, pods);
  }
  if (inter.nodes_per_leaf == 0) {
    return Error("a pod groups leaf switches; set inter_node.nodes_per_leaf too", pods_path, pods);
  }
  if (inter.nodes_per_pod <= inter.nodes_per_leaf ||
      inter.nodes_per_pod % inter.nodes_per_leaf != 0) {
    return Error(fmt::format("must be a multiple of nodes_per_leaf ({}) larger than it: a pod "
                             "holds whole leaves",
                             inter.nodes_per_leaf),
                 pods_path, pods);
  }
  return Status::Ok();
}

// Checks that need the whole spec: pods against leaves; torus dimensions against the node
// count; a torus given without a node count takes it from its dimensions.
Status CheckConsistent(ClusterSpec& cluster, const std::string& path) {
  const InterNodeSpec& inter = cluster.inter;
  DTSIM_RETURN_IF_ERROR(CheckPods(inter, path));
  if (cluster.servers.count > 0 && cluster.servers.placement == ServerPlacement::kDedicated &&
      IsDirectConnected(inter.topology)) {
    return Error(fmt::format("dedicated parameter servers attach to a switched fabric "
                             "(fat-tree or rail-optimized), not a {}; colocate them instead",
                             InterTopologyName(inter.topology)),
                 JsonChildPath(JsonChildPath(path, "servers"), "placement"), "\"dedicated\"");
  }
  if (cluster.servers.count > 0 && cluster.servers.nic_bandwidth.bits_per_second() == 0) {
    cluster.servers.nic_bandwidth = inter.nic_bandwidth;
  }
  DTSIM_RETURN_IF_ERROR(CheckColocatedServers(cluster, path));
  const bool torus =
      inter.topology == InterTopology::kTorus2d || inter.topology == InterTopology::kTorus3d;
  const std::string dims_path = JsonChildPath(JsonChildPath(path, "inter_node"), "dimensions");
  if (!torus) {
    if (!inter.dimensions.empty()) {
      return Error(
          fmt::format("only a torus has dimensions, not a {}", InterTopologyName(inter.topology)),
          dims_path);
    }
    return Status::Ok();
  }
  const size_t rank = inter.topology == InterTopology::kTorus2d ? 2 : 3;
  if (inter.dimensions.size() != rank) {
    return Error(fmt::format("a {} needs {} dimensions", InterTopologyName(inter.topology), rank),
                 dims_path, fmt::format("[{}]", fmt::join(inter.dimensions, ", ")));
  }
  int64_t product = 1;
  for (int extent : inter.dimensions) product *= extent;
  if (product != cluster.nodes && cluster.nodes != 0) {
    return Error(fmt::format("the torus dimensions multiply to {} nodes, but the cluster has {}",
                             product, cluster.nodes),
                 dims_path, fmt::format("[{}]", fmt::join(inter.dimensions, ", ")));
  }
  cluster.nodes = static_cast<int>(product);  // a torus's dimensions give its node count
  return CheckColocatedServers(cluster, path);
}

}  // namespace

std::string_view IntraTopologyName(IntraTopology topology) {
  return kIntraNames[static_cast<size_t>(topology)];
}

std::string_view InterTopologyName(InterTopology topology) {
  return kInterNames[static_cast<size_t>(topology)];
}

bool IsDirectConnected(InterTopology topology) {
  return topology == InterTopology::kRing || topology == InterTopology::kTorus2d ||
         topology == InterTopology::kTorus3d;
}

std::string_view ServerPlacementName(ServerPlacement placement) {
  return kPlacementNames[static_cast<size_t>(placement)];
}

std::span<const std::string_view> ClusterPresetNames() {
  static const std::vector<std::string_view> kNames = PresetNameList();
  return kNames;
}

Expected<ClusterSpec> ClusterPreset(std::string_view name, int nodes) {
  for (const Preset& preset : Presets()) {
    if (preset.name != name) continue;
    ClusterSpec cluster{.name = std::string(name),
                        .nodes = nodes,
                        .gpus_per_node = preset.gpus_per_node,
                        .intra = preset.intra,
                        .inter = preset.inter,
                        .collective_latency = preset.collective_latency};
    DTSIM_RETURN_IF_ERROR(CheckMesh(cluster, "", false));
    return cluster;
  }
  return Error(
      fmt::format("unknown cluster preset{}; presets: {}", DidYouMean(name, ClusterPresetNames()),
                  JoinQuoted(ClusterPresetNames())),
      "", Quote(name));
}

Expected<ClusterSpec> ClusterFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ClusterSpec cluster{.name = "custom"};
  const bool preset = reader.Has("preset");
  if (preset) {
    DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("preset"));
    Expected<ClusterSpec> base = ClusterPreset(name);
    if (!base.ok()) return std::move(base).error().Under(JsonChildPath(path, "preset"));
    cluster = std::move(base).value();
  }
  cluster.nodes = 0;  // unless given: sized to the workload (FitCluster)
  reader.Allow("preset");
  if (!preset && !reader.Has("gpus_per_node")) {
    return Error("missing required field (or give a \"preset\")",
                 JsonChildPath(path, "gpus_per_node"));
  }
  DTSIM_RETURN_IF_ERROR(ReadCount(reader, "gpus_per_node", 1024, cluster.gpus_per_node));
  DTSIM_RETURN_IF_ERROR(ReadNodes(reader, cluster));
  reader.Allow("collective_latency");
  if (reader.Has("collective_latency")) {
    DTSIM_ASSIGN_OR_RETURN(cluster.collective_latency, reader.Duration("collective_latency"));
  }
  const Json* intra = reader.Find("intra_node");
  const Json* inter = reader.Find("inter_node");
  for (const char* key : {"intra_node", "inter_node"}) {
    if (!preset && !reader.Has(key))
      return Error("missing required field", JsonChildPath(path, key));
  }
  if (intra != nullptr) {
    DTSIM_RETURN_IF_ERROR(
        ReadIntra(*intra, JsonChildPath(path, "intra_node"), preset, cluster.intra));
  }
  if (inter != nullptr) {
    DTSIM_RETURN_IF_ERROR(
        ReadInter(*inter, JsonChildPath(path, "inter_node"), preset, cluster.inter));
  }
  if (const Json* servers = reader.Find("servers")) {
    DTSIM_RETURN_IF_ERROR(ReadServers(*servers, JsonChildPath(path, "servers"), cluster.servers));
  }
  if (const Json* nccl = reader.Find("nccl")) {
    DTSIM_RETURN_IF_ERROR(ReadNccl(*nccl, JsonChildPath(path, "nccl"), cluster.nccl));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  if (!preset) NoteAssumedDefaults(value, path, cluster);
  DTSIM_RETURN_IF_ERROR(CheckConsistent(cluster, path));
  DTSIM_RETURN_IF_ERROR(CheckMesh(
      cluster, path, intra != nullptr && intra->is_object() && intra->contains("nvlinks")));
  return cluster;
}

OrderedJson ClusterSpecToJson(const ClusterSpec& cluster) {
  const IntraNodeSpec& intra = cluster.intra;
  const InterNodeSpec& inter = cluster.inter;
  OrderedJson intra_json = {{"topology", IntraTopologyName(intra.topology)},
                            {"bandwidth", FormatBandwidthExact(intra.bandwidth, false)},
                            {"links", intra.links},
                            {"latency", FormatDurationExact(intra.latency)},
                            {"efficiency", intra.efficiency}};
  intra_json["nvls"] = false;
  if (intra.nvls.enabled) {
    intra_json["nvls"] = {{"latency", FormatDurationExact(intra.nvls.latency)},
                          {"efficiency", intra.nvls.efficiency},
                          {"channels", intra.nvls.channels},
                          {"chunk_overhead", FormatDurationExact(intra.nvls.chunk_overhead)}};
  }
  if (!intra.mesh_links.empty()) {
    const auto per_node = static_cast<size_t>(cluster.gpus_per_node);
    OrderedJson rows = OrderedJson::array();
    for (size_t i = 0; i < per_node; ++i) {
      rows.push_back(
          std::vector<int>(intra.mesh_links.begin() + static_cast<ptrdiff_t>(i * per_node),
                           intra.mesh_links.begin() + static_cast<ptrdiff_t>((i + 1) * per_node)));
    }
    intra_json["nvlinks"] = std::move(rows);
  }
  OrderedJson inter_json = {{"topology", InterTopologyName(inter.topology)},
                            {"nics_per_node", inter.nics_per_node},
                            {"nic_bandwidth", FormatBandwidthExact(inter.nic_bandwidth, true)},
                            {"latency", FormatDurationExact(inter.latency)},
                            {"oversubscription", inter.oversubscription},
                            {"efficiency", inter.efficiency}};
  if (inter.nodes_per_leaf > 0) inter_json["nodes_per_leaf"] = inter.nodes_per_leaf;
  if (inter.nodes_per_pod > 0) {
    inter_json["nodes_per_pod"] = inter.nodes_per_pod;
    inter_json["pod_oversubscription"] = inter.pod_oversubscription;
  }
  if (!inter.dimensions.empty()) inter_json["dimensions"] = inter.dimensions;
  OrderedJson json = {{"gpus_per_node", cluster.gpus_per_node}};
  if (cluster.nodes > 0) json["nodes"] = cluster.nodes;
  json["collective_latency"] = FormatDurationExact(cluster.collective_latency);
  json["intra_node"] = std::move(intra_json);
  json["inter_node"] = std::move(inter_json);
  if (cluster.servers.count > 0) {
    const ServerSpec& servers = cluster.servers;
    OrderedJson servers_json = {{"count", servers.count},
                                {"placement", ServerPlacementName(servers.placement)}};
    if (servers.placement == ServerPlacement::kDedicated &&
        servers.nic_bandwidth.bits_per_second() > 0) {
      servers_json["nic_bandwidth"] = FormatBandwidthExact(servers.nic_bandwidth, true);
    }
    servers_json["partition"] = fmt::format("{} B", servers.partition.count());
    json["servers"] = std::move(servers_json);
  }
  json["nccl"] = {
      {"p2p_net_chunk_size", fmt::format("{} B", cluster.nccl.p2p_net_chunk_size.count())}};
  return json;
}

Status FitCluster(ClusterSpec& cluster, int32_t ranks) {
  if (cluster.nodes == 0) {
    cluster.nodes = std::max(1, (ranks + cluster.gpus_per_node - 1) / cluster.gpus_per_node);
  }
  if (ranks > cluster.gpu_count()) {
    return Error(fmt::format("the graph has {} ranks but the cluster has {} GPUs ({} nodes of {})",
                             ranks, cluster.gpu_count(), cluster.nodes, cluster.gpus_per_node));
  }
  return CheckColocatedServers(cluster, "");
}

Expected<ClusterSpec> LoadCluster(const std::string& preset_or_path) {
  const bool is_preset =
      !preset_or_path.ends_with(".json") && !std::filesystem::exists(preset_or_path);
  if (is_preset) return ClusterPreset(preset_or_path, 0);
  DTSIM_ASSIGN_OR_RETURN(const Json document, ReadJsonFile(preset_or_path));
  Expected<ClusterSpec> cluster = ClusterFromJson(document, "");
  if (!cluster.ok()) return std::move(cluster).error().InFile(preset_or_path);
  return cluster;
}

}  // namespace dtsim::network
