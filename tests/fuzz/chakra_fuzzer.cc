// `dtsim replay` on a Chakra execution trace: the protobuf stream (.et) and its JSON forms
// (chakra_jsonizer, workload_graph, PyTorch host execution traces), plain or gzip (odd first
// byte), detected by content; then the graph of the rank and its simulation when small.
#include "strategies/replay.h"
#include "tests/fuzz/fuzz_support.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_reader.h"
#include "traces/trace_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  if (size == 0) return 0;
  const bool gzip = (data[0] & 1) != 0;
  const std::string path = fuzz::ScratchFile("trace.0.et", fuzz::Text(data + 1, size - 1), gzip);
  (void)fuzz::Succeeded(traces::DetectTraceFormat(path));
  Expected<traces::ChakraTrace> trace = traces::ReadChakraTrace(path);
  if (!fuzz::Succeeded(trace)) return 0;
  const std::vector<traces::ChakraTrace> ranks = {std::move(trace).value()};
  const Expected<traces::ChakraGraph> graph = traces::BuildChakraGraph(ranks);
  if (!fuzz::Succeeded(graph)) return 0;
  if (graph->graph.task_count() > 20000) return 0;
  (void)fuzz::Succeeded(strategies::SimulateMeasured(graph->graph, graph->comm_durations));
  return 0;
}
