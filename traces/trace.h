// What dtsim keeps of a profiler trace of one process (docs/formats/kineto.md): host events
// (framework ops, annotations, CUDA API calls) per CPU thread, device events (kernels, copies,
// sets) per CUDA stream, CUDA synchronization records, ProfilerStep iterations, NCCL
// collectives with their kind, size and group, and import statistics. Times are int64
// nanoseconds on the trace's own clock (absolute as the trace wrote them). Readers fill it;
// the replay-graph builder and the op-table aggregation read it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/time.h"
#include "sim/base/units.h"
#include "sim/graph/string_table.h"
#include "sim/graph/task.h"

namespace dtsim::traces {

inline constexpr uint32_t kNone = UINT32_MAX;

enum class HostEventKind : uint8_t {
  kOp,          // cpu_op: an ATen/dispatcher op
  kAnnotation,  // user_annotation: record_function ranges, ProfilerStep#N, nccl:*
  kRuntime,     // cuda_runtime: a CUDA runtime API call
  kDriver,      // cuda_driver: a CUDA driver API call (cuLaunchKernel from Triton, ...)
  kOther,       // any other duration event on a CPU thread (plain Chrome traces)
};

enum class DeviceEventKind : uint8_t { kKernel, kMemcpy, kMemset };

enum class SyncKind : uint8_t { kStreamSync, kEventSync, kContextSync, kStreamWaitEvent };

struct HostThread {
  int64_t pid = 0;
  int64_t tid = 0;
};

struct HostEvent {
  TimeNs start;
  DurationNs duration;
  int64_t correlation = -1;  // CUPTI correlation id of an API call
  int64_t external_id = -1;
  int64_t record_function = -1;  // "Record function id": a host execution trace's rf_id
  graph::NameId name;
  uint32_t thread = 0;      // index into Trace::threads
  uint32_t shapes = kNone;  // index into Trace::shapes (ops recorded with record_shapes)
  HostEventKind kind = HostEventKind::kOp;
  TimeNs end() const { return start + duration; }
};

// Whether a host event is a CUDA runtime or driver API call.
inline bool IsApiCall(const HostEvent& event) {
  return event.kind == HostEventKind::kRuntime || event.kind == HostEventKind::kDriver;
}

struct DeviceEvent {
  TimeNs start;
  DurationNs duration;
  int64_t correlation = -1;  // the launching API call's correlation id
  int64_t stream = 0;
  Bytes bytes;  // memcpy / memset size
  graph::NameId name;
  int32_t device = 0;
  uint32_t collective = kNone;  // index into Trace::collectives for NCCL kernels
  DeviceEventKind kind = DeviceEventKind::kKernel;
  TimeNs end() const { return start + duration; }
};

// A cuda_sync record. For event waits and syncs, the event was recorded by the API call with
// correlation `record_correlation` on stream `wait_on_stream` (-1 when unknown).
struct SyncEvent {
  TimeNs start;
  DurationNs duration;
  int64_t correlation = -1;  // the API call that synchronized
  int64_t stream = -1;       // the waiting stream (Stream Wait Event, Stream Sync)
  int64_t wait_on_stream = -1;
  int64_t record_correlation = -1;
  int32_t device = 0;
  SyncKind kind = SyncKind::kStreamSync;
};

// An NCCL kernel seen as a collective. Its kind and size come from the kernel's collective
// args when Kineto copied them there (recent PyTorch), otherwise from the kernel name and the
// enclosing nccl:* annotation's input shape, and are then marked inferred.
struct CollectiveInfo {
  graph::CommKind kind = graph::CommKind::kAllReduce;
  Bytes bytes;                // bytes per rank (the input message)
  int32_t element_bytes = 0;  // of the message's dtype; 0 when unknown
  int32_t group_size = 0;     // 0 when unknown
  std::string process_group;  // "Process Group Name" when known
  std::vector<int32_t> group_ranks;
  bool size_inferred = false;
  bool size_unknown = false;  // neither args nor an annotation gave a size
};

// The shapes and types of a host op's inputs, as the trace's JSON text ("[[8, 16], []]").
struct OpShapes {
  std::string input_dims;
  std::string input_types;
};

struct ProfilerStep {
  int64_t number = 0;
  uint32_t thread = 0;
  TimeNs start;
  DurationNs duration;
};

struct ImportStats {
  uint64_t bytes = 0;       // uncompressed bytes parsed
  uint64_t file_bytes = 0;  // the file's size on disk
  bool gzip = false;
  int64_t events = 0;                         // entries of traceEvents
  std::map<std::string, int64_t> categories;  // events per "ph/cat"
  int64_t host_ops = 0;
  int64_t annotations = 0;
  int64_t api_calls = 0;
  int64_t kernels = 0;
  int64_t memcpys = 0;
  int64_t memsets = 0;
  int64_t syncs = 0;
  int64_t flows = 0;
  int64_t collectives = 0;
  int64_t collectives_inferred = 0;        // kind or size taken from names and annotations
  int64_t launches_without_gpu_op = 0;     // kernel/copy API calls whose GPU op is absent
  int64_t gpu_ops_without_launch = 0;      // GPU ops whose API call is absent
  int64_t zero_timestamp_gpu_ops = 0;      // start == end == 0: CUPTI lost the timestamps
  std::map<std::string, int64_t> dropped;  // events left out, by reason
};

struct Trace {
  std::string file;
  std::string format;  // "kineto", "chrome"
  int32_t rank = -1;   // distributedInfo.rank, -1 when absent
  int32_t world_size = 0;
  std::string backend;
  std::string gpu_name;                 // deviceProperties[0].name
  std::optional<int64_t> base_time_ns;  // baseTimeNanoseconds (newer traces)

  graph::StringTable names;
  std::vector<HostThread> threads;
  std::vector<HostEvent> host;      // in file order
  std::vector<DeviceEvent> device;  // in file order
  std::vector<SyncEvent> syncs;
  std::vector<CollectiveInfo> collectives;
  std::vector<OpShapes> shapes;
  std::vector<ProfilerStep> steps;  // sorted by start
  ImportStats stats;

  std::string_view Name(graph::NameId id) const { return names.Get(id); }
  // Distinct (device, stream) pairs with at least one device event.
  int64_t StreamCount() const;
};

}  // namespace dtsim::traces
