#include "profiler/cupti/cupti_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

namespace dtsim::profiler {
namespace {

#if CUPTI_API_VERSION < 130000
#error "dtsim's CUPTI adapter reads the CUDA 13 record structs; build against CUDA 13 or later"
#endif
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using MemsetActivity = CUpti_ActivityMemset4;
using SyncActivity = CUpti_ActivitySynchronization2;
using CudaEventActivity = CUpti_ActivityCudaEvent2;
using MarkerActivity = CUpti_ActivityMarker2;
using DeviceActivity = CUpti_ActivityDevice5;
using ContextActivity = CUpti_ActivityContext3;
using OverheadActivity = CUpti_ActivityOverhead3;
using MemoryActivity = CUpti_ActivityMemory4;

// The prefix dtsim reads has not moved since Kernel4 and Memcpy5 (docs/profiler.md); a CUPTI
// that moves it must fail here, not misread records.
static_assert(offsetof(KernelActivity, start) == 16);
static_assert(offsetof(KernelActivity, end) == 24);
static_assert(offsetof(KernelActivity, deviceId) == 40);
static_assert(offsetof(KernelActivity, streamId) == 48);
static_assert(offsetof(KernelActivity, correlationId) == 92);
static_assert(offsetof(KernelActivity, name) == 104);
static_assert(offsetof(MemcpyActivity, start) == 16);
static_assert(offsetof(MemcpyActivity, correlationId) == 44);

TimeNs Ns(uint64_t timestamp) { return TimeNs(static_cast<int64_t>(timestamp)); }

bool LostTimestamps(uint64_t start, uint64_t end) { return start == 0 && end == 0; }

}  // namespace

std::string ActivityKindNameOf(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
      return "KERNEL";
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "DRIVER";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
      return "CUDA_EVENT";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_MARKER:
      return "MARKER";
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      return "MARKER_DATA";
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return "OVERHEAD";
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return "DEVICE";
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      return "CONTEXT";
    case CUPTI_ACTIVITY_KIND_NAME:
      return "NAME";
    case CUPTI_ACTIVITY_KIND_STREAM:
      return "STREAM";
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return "MEMORY2";
    default:
      return fmt::format("kind {}", static_cast<int>(kind));
  }
}

const std::string& CuptiRecordConverter::ApiName(CUpti_ActivityKind kind, uint32_t cbid) {
  const auto key = std::make_pair(static_cast<int>(kind), cbid);
  if (const auto it = api_names_.find(key); it != api_names_.end()) return it->second;
  const CUpti_CallbackDomain domain = kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                          ? CUPTI_CB_DOMAIN_RUNTIME_API
                                          : CUPTI_CB_DOMAIN_DRIVER_API;
  const char* name = nullptr;
  std::string text =
      cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name
          ? std::string(name)
          : fmt::format("{} API {}", kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "runtime" : "driver",
                        cbid);
  // The runtime's names carry a version suffix ("cudaLaunchKernel_v7000"); Kineto drops it.
  if (const size_t suffix = text.find("_v");
      suffix != std::string::npos &&
      text.find_first_not_of("0123456789", suffix + 2) == std::string::npos) {
    text.resize(suffix);
  }
  return api_names_.emplace(key, std::move(text)).first->second;
}

void CuptiRecordConverter::Add(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = reinterpret_cast<const KernelActivity&>(record);
      if (LostTimestamps(k.start, k.end)) break;
      profile_.kernels.push_back({.name = k.name ? k.name : "(unnamed kernel)",
                                  .start = Ns(k.start),
                                  .end = Ns(k.end),
                                  .device = k.deviceId,
                                  .context = k.contextId,
                                  .stream = k.streamId,
                                  .correlation = k.correlationId,
                                  .grid = {k.gridX, k.gridY, k.gridZ},
                                  .block = {k.blockX, k.blockY, k.blockZ},
                                  .registers_per_thread = k.registersPerThread,
                                  .static_shared_memory = k.staticSharedMemory,
                                  .dynamic_shared_memory = k.dynamicSharedMemory,
                                  .graph_id = k.graphId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const MemcpyActivity&>(record);
      if (LostTimestamps(m.start, m.end)) break;
      profile_.memcpys.push_back({.start = Ns(m.start),
                                  .end = Ns(m.end),
                                  .device = m.deviceId,
                                  .context = m.contextId,
                                  .stream = m.streamId,
                                  .correlation = m.correlationId,
                                  .runtime_correlation = m.runtimeCorrelationId,
                                  .bytes = m.bytes,
                                  .kind = static_cast<CopyKind>(m.copyKind),
                                  .source = static_cast<MemoryKind>(m.srcKind),
                                  .destination = static_cast<MemoryKind>(m.dstKind)});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      // Device memory allocated or released (pinned host and managed memory left out).
      const auto& m = reinterpret_cast<const MemoryActivity&>(record);
      const bool allocation =
          m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      if (m.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ||
          (!allocation && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)) {
        return;
      }
      const auto bytes = static_cast<int64_t>(std::min<uint64_t>(m.bytes, uint64_t{1} << 62));
      profile_.memory.push_back({.time = Ns(m.timestamp),
                                 .device = m.deviceId,
                                 .address = m.address,
                                 .bytes = allocation ? bytes : -bytes});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = reinterpret_cast<const MemsetActivity&>(record);
      if (LostTimestamps(m.start, m.end)) break;
      profile_.memsets.push_back({.start = Ns(m.start),
                                  .end = Ns(m.end),
                                  .device = m.deviceId,
                                  .context = m.contextId,
                                  .stream = m.streamId,
                                  .correlation = m.correlationId,
                                  .bytes = m.bytes,
                                  .value = m.value});
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& a = reinterpret_cast<const CUpti_ActivityAPI&>(record);
      profile_.api_calls.push_back({.domain = record.kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                                  ? ApiDomain::kRuntime
                                                  : ApiDomain::kDriver,
                                    .cbid = a.cbid,
                                    .name = ApiName(record.kind, a.cbid),
                                    .process = a.processId,
                                    .thread = a.threadId,
                                    .start = Ns(a.start),
                                    .end = Ns(a.end),
                                    .correlation = a.correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const SyncActivity&>(record);
      profile_.syncs.push_back({.type = static_cast<SyncType>(s.type),
                                .start = Ns(s.start),
                                .end = Ns(s.end),
                                .correlation = s.correlationId,
                                .context = s.contextId,
                                .stream = s.streamId,
                                .cuda_event = s.cudaEventId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
      const auto& e = reinterpret_cast<const CudaEventActivity&>(record);
      profile_.cuda_events.push_back({.correlation = e.correlationId,
                                      .context = e.contextId,
                                      .stream = e.streamId,
                                      .cuda_event = e.eventId,
                                      .device = e.deviceId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      profile_.external_correlations.push_back({.kind = static_cast<uint32_t>(e.externalKind),
                                                .external_id = e.externalId,
                                                .correlation = e.correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto& m = reinterpret_cast<const MarkerActivity&>(record);
      const MarkerPhase phase = (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) ? MarkerPhase::kStart
                                : (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
                                    ? MarkerPhase::kEnd
                                    : MarkerPhase::kInstant;
      const bool thread = m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD;
      profile_.markers.push_back({.phase = phase,
                                  .id = m.id,
                                  .time = Ns(m.timestamp),
                                  .name = m.name ? m.name : "",
                                  .domain = m.domain ? m.domain : "",
                                  .process = thread ? m.objectId.pt.processId : 0,
                                  .thread = thread ? m.objectId.pt.threadId : 0});
      return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto& d = reinterpret_cast<const DeviceActivity&>(record);
      profile_.devices.push_back(
          {.id = d.id,
           .name = d.name ? d.name : "",
           .compute_major = static_cast<int32_t>(d.computeCapabilityMajor),
           .compute_minor = static_cast<int32_t>(d.computeCapabilityMinor),
           .global_memory = d.globalMemorySize,
           .multiprocessors = d.numMultiprocessors,
           .max_threads_per_block = d.maxThreadsPerBlock,
           .max_threads_per_multiprocessor = d.maxWarpsPerMultiprocessor * d.numThreadsPerWarp,
           .max_registers_per_block = d.maxRegistersPerBlock,
           .max_shared_memory_per_block = d.maxSharedMemoryPerBlock,
           .warp_size = d.numThreadsPerWarp});
      return;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      const auto& c = reinterpret_cast<const ContextActivity&>(record);
      profile_.context_devices[c.contextId] = c.deviceId;
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto& o = reinterpret_cast<const OverheadActivity&>(record);
      ++profile_.counters.overhead_records;
      if (o.end > o.start)
        profile_.counters.overhead += DurationNs(static_cast<int64_t>(o.end - o.start));
      return;
    }
    default:
      ++profile_.counters.unhandled_kinds[ActivityKindNameOf(record.kind)];
      return;
  }
  ++profile_.counters.zero_timestamp_records;  // the GPU cases that broke out
}

void CuptiRecordConverter::AddBuffer(uint8_t* buffer, size_t valid_size) {
  ++profile_.counters.buffers;
  profile_.counters.buffer_bytes += static_cast<int64_t>(valid_size);
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult result = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) return;
    if (result != CUPTI_SUCCESS) {
      ++profile_.counters.invalid_records;
      return;
    }
    Add(*record);
  }
}

}  // namespace dtsim::profiler
