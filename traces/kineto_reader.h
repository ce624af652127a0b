// Reads PyTorch profiler (Kineto) traces and plain Chrome trace JSON (docs/formats/kineto.md):
// gzip or plain, detected by content. The document is streamed: a splitter
// (traces/json_splitter.h) cuts it into one traceEvents entry at a time, simdjson's on-demand
// parser validates and reads each (traces/kineto_event.h) and the assembler
// (traces/kineto_assembler.h) builds the compact Trace, so memory never holds the document.
// Both timestamp styles are read exactly: integer epoch microseconds, and relative
// microseconds with three decimals next to baseTimeNanoseconds; `ts`/`dur` go from their
// decimal text to integer nanoseconds, never through a double. The legacy 2021 schema
// (Operator/Runtime/Kernel categories, string tids like "stream 7") is mapped too.
//
// Errors name the file and, for JSON syntax, the line, column and byte (found by reading a
// malformed file a second time with nlohmann's parser): a truncated gzip stream, a truncated
// or malformed document, a document that is not a trace. Events that cannot be used (no
// timestamp, a complete event without duration, a negative duration, a GPU op whose timestamps
// CUPTI lost) are counted in ImportStats::dropped by reason, not fatal.
#pragma once

#include <string>

#include "sim/base/status.h"
#include "traces/trace.h"

namespace dtsim::traces {

// Limits with errors, not crashes: events are indexed with 32 bits (a 1 GB trace has ~2.7 M);
// one string (a name, an argument) is at most 16 MiB (the longest "Input Dims" seen are a few
// KiB), one event or metadata value's JSON 64 MiB (an array of metadata is read element by
// element); arrays and objects nest at most kMaxJsonDepth deep.
inline constexpr int64_t kMaxTraceEvents = int64_t{1} << 31;
inline constexpr size_t kMaxTraceStringBytes = size_t{16} << 20;
inline constexpr size_t kMaxTraceValueBytes = 4 * kMaxTraceStringBytes;

Expected<Trace> ReadKinetoTrace(const std::string& path);

// "123.456" µs → 123456 ns: exact for up to three decimals, rounded beyond; an exponent form
// goes through a double. Nothing when the text is not a number or does not fit.
std::optional<int64_t> MicrosecondsTextToNs(std::string_view text);

// The collective an NCCL kernel name performs ("ncclDevKernel_AllGather_RING_LL(...)",
// "ncclKernel_AllReduce_RING_LL_Sum_float(...)"); kSendRecv for point-to-point kernels,
// nothing when the name is not an NCCL kernel.
std::optional<graph::CommKind> NcclKernelKind(std::string_view kernel_name);

}  // namespace dtsim::traces
