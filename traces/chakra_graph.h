// Chakra execution traces as task graphs, both ways (docs/formats/chakra.md).
//
// Export: every task of a dtsim task graph becomes a node in its rank's trace, in task order,
// with node id = task index. data_deps hold everything a simulator must respect: the task's
// dependencies and its stream predecessor (ASTRA-sim's feeder reads nothing else). Collectives
// are COMM_COLL_NODEs with comm_type, comm_size (bytes per rank) and pg_name; sends and recvs
// are COMM_SEND/RECV_NODEs with comm_src, comm_dst, comm_tag and comm_size. Attributes under
// "dtsim." keep what Chakra has no field for (stream, kind, category, exact nanoseconds, group,
// priced group, root, algorithm, labels), so that reading the files back gives the same graph.
//
// Import: a file written by dtsim ("dtsim.format" in its metadata) is rebuilt exactly. Any
// other trace is read the way ASTRA-sim runs it: on ready-first streams (graph::StreamOrder),
// which start, whenever free, the ready node of lowest id — CPU ops on a stream per thread
// ("cpu tid N"), GPU ops on a stream per CUDA stream ("gpu stream N", from the `stream` or
// `tid` attribute), or, where a trace names neither, computation on "gpu" and communication on
// "gpu comm" (ASTRA-sim's two resources); receives on an unbounded stream beside (they hold no
// resource in ASTRA-sim). Durations from duration_micros. GPU COMM_COLL_NODEs become
// collectives over the comm group their pg_name attribute names in a comm group file
// (ASTRA-sim's --comm-group-configuration), else over every rank given (ASTRA-sim's default),
// matched across the group's ranks by their order (each rank's topological order of data_deps,
// ties by node id); a group with ranks whose traces are not given becomes a collective of the
// given ones priced as the whole group. Their measured durations are kept for replay. CPU ops
// are delay tasks (host time), metadata nodes zero-length delays.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/graph/task_graph.h"
#include "traces/chakra_conventions.h"
#include "traces/chakra_trace.h"

namespace dtsim::traces {

// Named in each exported trace's metadata ("dtsim.format", "dtsim.format_version").
inline constexpr FileFormat kChakraExportFormat{"dtsim.chakra", 1, 1, "not a dtsim Chakra export"};

// ASTRA-sim's comm group file: {"<pg_name>": [rank, ...], ...}.
using ChakraCommGroups = std::map<std::string, std::vector<int32_t>>;

// How other tools' traces are read beside what they record.
struct ChakraImportOptions {
  // `comm_groups` apply to other tools' traces (dtsim's own files name their groups).
  ChakraCommGroups comm_groups;
  // Prices a compute node that recorded no duration from its num_ops and tensor_size (a GPU's
  // roofline); without it such nodes take no time, as recorded.
  std::function<DurationNs(const ChakraComputeWork&)> price_compute;
  // Bytes an element, for traces whose sizes count elements (ChakraConventions):
  // kDefaultChakraElementBytes when not given. Given for a trace whose sizes count bytes, it
  // is an error rather than ignored.
  std::optional<int64_t> element_bytes;
};

inline constexpr int64_t kDefaultChakraElementBytes = 2;  // bf16
inline constexpr int64_t kMaxChakraElementBytes = 16;     // complex128, the widest dtype

struct ChakraGraphStats {
  int64_t nodes = 0;
  int64_t gpu_tasks = 0;
  int64_t host_tasks = 0;
  int64_t collectives = 0;  // collectives of the graph (one per matched set of nodes)
  int64_t point_to_point = 0;
  int64_t dependencies = 0;
  int64_t dangling_dependencies = 0;       // data_deps naming no node of the file: dropped
  int64_t collectives_outside_groups = 0;  // nodes whose pg_name the comm groups do not list
  int64_t compute_priced = 0;    // compute nodes without a duration priced from their num_ops
  int64_t compute_unpriced = 0;  // such nodes left at zero: no pricer given
};

// Reads a comm group file; errors name the file, the group and the bad value.
Expected<ChakraCommGroups> ReadChakraCommGroups(const std::string& path);

struct ChakraGraph {
  graph::TaskGraph graph;
  // Per CommId: the longest duration the collective's nodes recorded (zero for dtsim's own
  // files, whose communication the network model prices).
  std::vector<DurationNs> comm_durations;
  bool written_by_dtsim = false;
  ChakraConventions conventions;  // of the traces' producer (all ranks agree)
  int64_t element_bytes = 0;      // bytes an element where its sizes count elements, else 0
  ChakraGraphStats stats;
};

// One trace per rank; a trace's rank is its "rank" metadata attribute, else its index.
Expected<ChakraGraph> BuildChakraGraph(std::span<const ChakraTrace> ranks,
                                       const ChakraImportOptions& options = {});

// One trace per rank of `graph`, in rank order. A shift (context parallelism's ring step, which
// Chakra's collectives lack) becomes a COMM_RECV_NODE from the previous member and a
// COMM_SEND_NODE to the next, as NCCL runs it (grouped send/recv); dtsim's reader rebuilds it.
std::vector<ChakraTrace> ChakraTracesFromGraph(const graph::TaskGraph& graph);

// A group's pg_name in an export and its comm-group file: its id counted from 1, as ASTRA-sim's
// workload layer requires (it rejects communicator id 0).
std::string ChakraGroupName(graph::GroupId group);

}  // namespace dtsim::traces
