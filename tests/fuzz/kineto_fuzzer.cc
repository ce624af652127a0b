// `dtsim replay` and `dtsim ops` on a PyTorch profiler (Kineto) or Chrome trace: the streamed
// reader (plain, or gzip when the input's first byte is odd), then what the commands do next:
// the replay graph, its simulation when small, and the op-cost table aggregated from the trace.
#include "strategies/replay.h"
#include "tests/fuzz/fuzz_support.h"
#include "traces/kineto_reader.h"
#include "traces/op_profile.h"
#include "traces/replay_graph.h"
#include "traces/trace_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  if (size == 0) return 0;
  const bool gzip = (data[0] & 1) != 0;
  const std::string path = fuzz::ScratchFile("trace.json", fuzz::Text(data + 1, size - 1), gzip);
  (void)fuzz::Succeeded(traces::DetectTraceFormat(path));
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
  if (!fuzz::Succeeded(trace)) return 0;
  (void)fuzz::Succeeded(traces::BuildOpProfile(*trace));
  const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(*trace);
  if (!fuzz::Succeeded(replay)) return 0;
  if (replay->graph.task_count() > 20000) return 0;
  (void)fuzz::Succeeded(strategies::SimulateReplay(*replay));
  return 0;
}
