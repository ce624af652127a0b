// A task graph's Chakra export made rank by rank (chakra_graph.h says what each node holds):
// each rank's nodes are built one at a time from an index of that rank's streams, so exporting
// 28 M tasks keeps one rank's task list and one node in memory, not every rank's trace.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/graph/task_graph.h"
#include "traces/chakra_trace.h"
#include "traces/chakra_wire.h"

namespace dtsim::traces {

class ChakraExporter {
 public:
  explicit ChakraExporter(const graph::TaskGraph& graph);

  int32_t rank_count() const { return graph_.rank_count(); }
  // The GlobalMetadata of `rank`'s file: the schema version, the producer, dtsim's format and
  // version, the rank and the rank count.
  ChakraMetadata Metadata(int32_t rank) const;
  // Calls visit(node) for every node of `rank`'s trace in file order (task order; a shift's
  // sending node right after its receiving one). The node is reused from call to call: copy it
  // to keep it. Safe to call for different ranks on different threads.
  void ForEachNode(int32_t rank, const std::function<void(const ChakraNode&)>& visit) const;

 private:
  const graph::TaskGraph& graph_;
  std::vector<std::vector<graph::StreamId>> streams_of_rank_;
};

}  // namespace dtsim::traces
