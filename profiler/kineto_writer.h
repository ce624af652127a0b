// Writes a Profile as a Kineto-compatible JSON trace (docs/formats/profile.md): the
// `{"traceEvents": [...]}` object PyTorch's profiler writes, so Perfetto, HTA and dtsim's own
// reader (`dtsim replay`, `dtsim ops`) open it.
//
//  - API calls: `cuda_runtime` / `cuda_driver` complete events on (pid, tid) of their thread,
//    args `cbid`, `correlation`, `External id`.
//  - GPU ops: `kernel`, `gpu_memcpy`, `gpu_memset` on (pid = device, tid = stream), args as
//    Kineto writes them (device, context, stream, correlation, grid, block, registers per
//    thread, shared memory, bytes, memory bandwidth); kernel names demangled; an `ac2g` flow
//    from each launch to its op.
//  - Syncs: `cuda_sync` events with `cuda_sync_kind`, and for event syncs and stream waits
//    `wait_on_stream` and `wait_on_cuda_event_record_corr_id`.
//  - NVTX ranges: `user_annotation` events on their thread (a range named ProfilerStep#N is a
//    step to `dtsim replay`); a range in the form PyTorch's emit_nvtx writes ("aten::mm, seq =
//    3, op_id = 7, sizes = [[2, 3], [3, 4]]") is a `cpu_op` named by its op, with `Input Dims`.
//  - Metadata: `otherData` first (format `dtsim.profile`, version, CUPTI version, program,
//    kinds, every record count and every dropped, declined, invalid or unlinked count),
//    `deviceProperties`, `distributedInfo` (from RANK / WORLD_SIZE), `baseTimeNanoseconds`.
// Timestamps are microseconds after baseTimeNanoseconds with three decimals: exact nanoseconds.
#pragma once

#include <ostream>
#include <string>

#include "profiler/profile.h"
#include "sim/base/file_format.h"
#include "sim/base/status.h"

namespace dtsim::profiler {

// 1.1: device memory (records.memory, device_memory_peaks, the "C" counter track per device).
inline constexpr FileFormat kProfileFormat{"dtsim.profile", 1, 1, "not a dtsim profile"};

void WriteKinetoTrace(std::ostream& out, const Profile& profile);

// Writes to `path` atomically (a failed write leaves any previous file in place).
Status WriteKinetoTraceFile(const std::string& path, const Profile& profile);

// "void foo<int>(int*)" for "_Z3fooIiEvPT_"; the name itself when it is not a mangled name.
std::string DemangledName(const std::string& name);

}  // namespace dtsim::profiler
