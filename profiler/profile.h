// What dtsim's CUPTI profiler captures of one process, as typed records that know nothing of
// CUPTI (docs/profiler.md): profiler/cupti/ converts CUPTI's activity records into these, and
// everything past that — linking, op attribution, the Kineto JSON writer — works on them, so it
// is tested on CPU-only machines with synthetic records.
//
// Times are int64 nanoseconds on CUPTI's clock (CLOCK_REALTIME on Linux unless replaced), for
// CPU (API calls, NVTX markers) and GPU (kernels, copies) records alike. Ids are CUPTI's:
// correlation ids tie an API call to the GPU work it launched; external correlation ids tie
// API calls to the framework op that made them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/base/time.h"

namespace dtsim::profiler {

enum class ApiDomain : uint8_t { kRuntime, kDriver };

// A CUDA runtime or driver API call on a CPU thread.
struct ApiRecord {
  ApiDomain domain = ApiDomain::kRuntime;
  uint32_t cbid = 0;  // CUPTI's callback id of the function
  std::string name;   // "cudaLaunchKernel", "cuLaunchKernel", ...
  uint32_t process = 0;
  uint64_t thread = 0;
  TimeNs start;
  TimeNs end;
  uint32_t correlation = 0;
};

struct KernelRecord {
  std::string name;  // as CUPTI reports it (mangled); the writer demangles
  TimeNs start;
  TimeNs end;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
  std::array<int32_t, 3> grid = {0, 0, 0};
  std::array<int32_t, 3> block = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  int64_t static_shared_memory = 0;   // bytes per block
  int64_t dynamic_shared_memory = 0;  // bytes per block
  uint32_t graph_id = 0;              // the CUDA graph that launched it, 0 if none
};

// CUPTI's memcpy and memory kinds (CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind), in
// their enum order so the adapter maps them by value.
enum class CopyKind : uint8_t {
  kUnknown,
  kHtoD,
  kDtoH,
  kHtoA,
  kAtoH,
  kAtoA,
  kAtoD,
  kDtoA,
  kDtoD,
  kHtoH,
  kPtoP
};
enum class MemoryKind : uint8_t {
  kUnknown,
  kPageable,
  kPinned,
  kDevice,
  kArray,
  kManaged,
  kDeviceStatic,
  kManagedStatic
};

struct MemcpyRecord {
  TimeNs start;
  TimeNs end;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;          // the driver API call's
  uint32_t runtime_correlation = 0;  // the runtime API call's (0: none)
  uint64_t bytes = 0;
  CopyKind kind = CopyKind::kUnknown;
  MemoryKind source = MemoryKind::kUnknown;
  MemoryKind destination = MemoryKind::kUnknown;
};

struct MemsetRecord {
  TimeNs start;
  TimeNs end;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
  uint64_t bytes = 0;
  uint32_t value = 0;
};

// The correlation id of the API call that launched a GPU op: a copy's runtime call when it has
// one (its own correlation id is the driver call's, which is not recorded unless DRIVER is).
inline uint32_t LaunchCorrelation(const KernelRecord& kernel) { return kernel.correlation; }
inline uint32_t LaunchCorrelation(const MemcpyRecord& copy) {
  return copy.runtime_correlation != 0 ? copy.runtime_correlation : copy.correlation;
}
inline uint32_t LaunchCorrelation(const MemsetRecord& set) { return set.correlation; }

// CUpti_ActivitySynchronizationType, in its enum order.
enum class SyncType : uint8_t {
  kUnknown,
  kEventSynchronize,
  kStreamWaitEvent,
  kStreamSynchronize,
  kContextSynchronize
};

// A host wait (stream, event or context synchronize) or a GPU-side wait (cudaStreamWaitEvent).
struct SyncRecord {
  SyncType type = SyncType::kUnknown;
  TimeNs start;
  TimeNs end;
  uint32_t correlation = 0;
  uint32_t context = 0;
  uint32_t stream = 0;      // the synchronized or waiting stream
  uint32_t cuda_event = 0;  // the event waited on (event syncs and stream waits)
};

// A cudaEventRecord: which stream the event captured, and the API call that recorded it.
struct CudaEventRecord {
  uint32_t correlation = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t cuda_event = 0;
  uint32_t device = 0;
};

// CUPTI_EXTERNAL_CORRELATION_KIND_*: CUSTOM0 is what PyTorch pushes per op, CUSTOM1 per
// record_function scope; dtsim's own programs push CUSTOM2.
struct ExternalCorrelationRecord {
  uint32_t kind = 0;
  uint64_t external_id = 0;
  uint32_t correlation = 0;
};

// Device memory allocated or released through the CUDA runtime or driver (cudaMalloc,
// cuMemAlloc, cuMemCreate, ...): what PyTorch's caching allocator reserves — its segments — and
// what libraries allocate themselves.
struct MemoryRecord {
  TimeNs time;
  uint32_t device = 0;
  uint64_t address = 0;
  int64_t bytes = 0;  // > 0 allocated, < 0 released
};

enum class MarkerPhase : uint8_t { kStart, kEnd, kInstant };

// An NVTX range start or end, or an instantaneous mark. A range's end record has its id and
// usually no name.
struct MarkerRecord {
  MarkerPhase phase = MarkerPhase::kInstant;
  uint64_t id = 0;
  TimeNs time;
  std::string name;
  std::string domain;
  uint32_t process = 0;
  uint64_t thread = 0;
};

struct DeviceInfo {
  uint32_t id = 0;
  std::string name;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  uint64_t global_memory = 0;  // bytes
  uint32_t multiprocessors = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t max_threads_per_multiprocessor = 0;
  uint32_t max_registers_per_block = 0;
  uint32_t max_shared_memory_per_block = 0;
  uint32_t warp_size = 0;
};

// What the session knows it lost or could not read: every count is written into the trace's
// metadata (STYLE §16), never only logged.
struct ProfileCounters {
  int64_t buffers = 0;           // activity buffers completed by CUPTI
  int64_t buffer_bytes = 0;      // valid bytes in them
  int64_t declined_buffers = 0;  // requests refused because the buffer cap was reached
  int64_t dropped_records =
      0;  // records CUPTI reported dropped (cuptiActivityGetNumDroppedRecords)
  int64_t invalid_records = 0;         // buffers whose walk stopped at an invalid record
  int64_t zero_timestamp_records = 0;  // GPU records whose timestamps CUPTI could not collect
  std::map<std::string, int64_t> unhandled_kinds;  // activity kinds read but not converted
  int64_t overhead_records = 0;
  DurationNs overhead;  // CUPTI- and driver-reported profiling overhead (OVERHEAD records)
};

// Everything captured in one process: records in the order they were read (buffers arrive in
// no global order), device properties and session facts.
struct Profile {
  std::vector<ApiRecord> api_calls;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<SyncRecord> syncs;
  std::vector<CudaEventRecord> cuda_events;
  std::vector<ExternalCorrelationRecord> external_correlations;
  std::vector<MarkerRecord> markers;
  std::vector<MemoryRecord> memory;
  std::vector<DeviceInfo> devices;
  // context id -> device id, from CONTEXT records (sync records name only the context).
  std::map<uint32_t, uint32_t> context_devices;
  // The device of a context, 0 when no CONTEXT record named it.
  uint32_t DeviceOfContext(uint32_t context) const {
    const auto it = context_devices.find(context);
    return it == context_devices.end() ? 0 : it->second;
  }
  ProfileCounters counters;

  // The session.
  std::string program;  // the profiled command line, as the CLI passed it
  uint32_t process = 0;
  uint32_t cupti_version = 0;  // cuptiGetVersion() at run time
  std::string enabled_kinds;   // "kernel,memcpy,..."
  // Runtime and driver API calls whose records were switched off (query calls that launch,
  // copy, set, sync or record nothing; kQuietApiCalls in the CUPTI session), by name. Empty
  // when every call was recorded (`dtsim profile --all-api-calls`).
  std::vector<std::string> api_calls_not_recorded;
  // "whole" (cuInit to exit) or "cuda_profiler_api" (cuProfilerStart to cuProfilerStop), and
  // the windows opened.
  std::string capture_range = "whole";
  int32_t capture_windows = 0;
  // Whether the session could hook cudaDeviceReset (the callback API was free) to flush the
  // records of the contexts it destroys, and how often it did.
  bool flush_before_device_reset = false;
  int32_t device_reset_flushes = 0;
  TimeNs session_start;
  TimeNs session_end;
  // Distributed job facts from the environment (RANK, WORLD_SIZE), -1 when absent.
  int32_t rank = -1;
  int32_t world_size = -1;
};

}  // namespace dtsim::profiler
