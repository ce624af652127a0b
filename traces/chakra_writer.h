// Writes Chakra execution traces in the binary protobuf stream form that ASTRA-sim and
// Chakra's tools read (docs/formats/chakra.md): [varint length][GlobalMetadata], then one
// [varint length][Node] per node. Every file is written atomically: a failed write leaves any
// previous file in place.
#pragma once

#include <string>
#include <vector>

#include "sim/base/status.h"
#include "sim/graph/task_graph.h"
#include "traces/chakra_trace.h"

namespace dtsim::traces {

// The framed bytes of `trace`.
std::string SerializeChakraTrace(const ChakraTrace& trace);
Status WriteChakraTrace(const ChakraTrace& trace, const std::string& path);

// Exports `graph` as "<prefix>.<rank>.et", one file per rank (ASTRA-sim's naming), plus
// "<prefix>.comm_groups.json" mapping each collective's pg_name to its ranks (the form of
// ASTRA-sim's comm-group file). Returns the paths written.
Expected<std::vector<std::string>> WriteChakraGraph(const graph::TaskGraph& graph,
                                                    const std::string& prefix);

// What an export of `graph` cannot say in Chakra's own terms, one line per kind: collectives
// forced to one of dtsim's algorithms (a parameter server's push and pull through servers that
// are not ranks; any other named algorithm) are written as the plain collective with the name in
// `dtsim.algorithm`, which a tool reading only Chakra's fields (ASTRA-sim) ignores, running its
// own algorithm. Empty when the export says everything.
std::vector<std::string> ChakraExportCaveats(const graph::TaskGraph& graph);

}  // namespace dtsim::traces
