// `dtsim replay` and `dtsim ops` on a PyTorch profiler (Kineto) or Chrome trace: the streamed
// reader (plain, or gzip when the input's first byte is odd), then what the commands do next:
// the replay graph, its simulation when small, and the op-cost table aggregated from the trace.
// A trace with collectives is also replayed as a two-rank job with itself, so that matching
// collectives across ranks and aligning their clocks see what the reader lets through. A plain
// input is also checked against nlohmann: read without a syntax error exactly when valid JSON.
#include "sim/base/check.h"
#include "sim/base/json_reader.h"
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
  if (!gzip) {
    // The streamed reader (a splitter and simdjson) accepts exactly the JSON nlohmann's strict
    // parser accepts; its other errors (limits, not a trace) say nothing either way. nlohmann
    // takes a NUL byte for the end of its input (C strings), so "0\0garbage" passes there; JSON
    // allows no NUL byte anywhere outside a string's \u0000 escape, and the reader refuses one.
    const std::string_view text = fuzz::Text(data + 1, size - 1);
    const bool valid = text.find('\0') == std::string_view::npos && Json::accept(text);
    if (trace.ok()) DTSIM_CHECK(valid, "read a trace nlohmann rejects");
    if (!trace.ok() && trace.error().message().starts_with("JSON syntax error")) {
      DTSIM_CHECK(!valid, trace.error().ToString());
    }
  }
  if (!fuzz::Succeeded(trace)) return 0;
  (void)fuzz::Succeeded(traces::BuildOpProfile(*trace));
  const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(*trace);
  if (!fuzz::Succeeded(replay)) return 0;
  if (replay->graph.task_count() > 20000) return 0;
  (void)fuzz::Succeeded(strategies::SimulateReplay(*replay));
  if (trace->collectives.empty()) return 0;
  const traces::Trace* job[] = {&*trace, &*trace};
  const Expected<traces::ReplayGraph> together = traces::BuildReplayGraph(job);
  if (fuzz::Succeeded(together)) (void)fuzz::Succeeded(strategies::SimulateReplay(*together));
  return 0;
}
