// The CUPTI adapter on synthetic records: CUPTI's own structs, filled in as CUPTI would, turn
// into the typed records the rest of the profiler reads. Needs the CUPTI headers and library
// (for callback names), no GPU.
#include "profiler/cupti/cupti_records.h"

#include <gtest/gtest.h>

#include <cstring>

namespace dtsim::profiler {
namespace {

template <typename Record>
Record Zeroed(CUpti_ActivityKind kind) {
  Record record;
  std::memset(&record, 0, sizeof(record));
  record.kind = kind;
  return record;
}

const CUpti_Activity& AsActivity(const auto& record) {
  return reinterpret_cast<const CUpti_Activity&>(record);
}

TEST(CuptiRecords, KernelsCopiesAndSetsKeepTheirFields) {
  Profile profile;
  CuptiRecordConverter converter(profile);
  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 1'000;
  kernel.end = 5'000;
  kernel.deviceId = 1;
  kernel.contextId = 2;
  kernel.streamId = 7;
  kernel.correlationId = 42;
  kernel.gridX = 128;
  kernel.blockX = 256;
  kernel.registersPerThread = 32;
  kernel.staticSharedMemory = 1024;
  kernel.dynamicSharedMemory = 2048;
  kernel.name = "_Z4gemmPfS_S_";
  converter.Add(AsActivity(kernel));
  ASSERT_EQ(profile.kernels.size(), 1u);
  const KernelRecord& k = profile.kernels[0];
  EXPECT_EQ(k.name, "_Z4gemmPfS_S_");
  EXPECT_EQ(k.start, TimeNs(1'000));
  EXPECT_EQ(k.end, TimeNs(5'000));
  EXPECT_EQ(k.device, 1u);
  EXPECT_EQ(k.stream, 7u);
  EXPECT_EQ(k.correlation, 42u);
  EXPECT_EQ(k.grid[0], 128);
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.registers_per_thread, 32u);
  EXPECT_EQ(k.static_shared_memory + k.dynamic_shared_memory, 3072);

  auto copy = Zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.start = 6'000;
  copy.end = 7'000;
  copy.bytes = 1 << 20;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.correlationId = 1002;
  copy.runtimeCorrelationId = 43;
  converter.Add(AsActivity(copy));
  ASSERT_EQ(profile.memcpys.size(), 1u);
  EXPECT_EQ(profile.memcpys[0].kind, CopyKind::kHtoD);
  EXPECT_EQ(profile.memcpys[0].source, MemoryKind::kPinned);
  EXPECT_EQ(profile.memcpys[0].destination, MemoryKind::kDevice);
  EXPECT_EQ(LaunchCorrelation(profile.memcpys[0]), 43u);

  auto set = Zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  set.start = 8'000;
  set.end = 8'500;
  set.bytes = 4096;
  converter.Add(AsActivity(set));
  ASSERT_EQ(profile.memsets.size(), 1u);
  EXPECT_EQ(profile.memsets[0].bytes, 4096u);
}

// MEMORY2: device memory allocated (+bytes) and released (−bytes); pinned host memory and
// memory-pool operations other than allocation and release are not device memory records.
TEST(CuptiRecords, DeviceMemoryAllocationsAndReleases) {
  Profile profile;
  CuptiRecordConverter converter(profile);
  auto memory = Zeroed<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
  memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memory.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  memory.bytes = 2 << 20;
  memory.timestamp = 5'000;
  memory.deviceId = 1;
  memory.address = 0x7000;
  converter.Add(AsActivity(memory));
  memory.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  memory.timestamp = 6'000;
  converter.Add(AsActivity(memory));
  memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  converter.Add(AsActivity(memory));
  ASSERT_EQ(profile.memory.size(), 2u);
  EXPECT_EQ(profile.memory[0].bytes, 2 << 20);
  EXPECT_EQ(profile.memory[0].device, 1u);
  EXPECT_EQ(profile.memory[0].address, 0x7000u);
  EXPECT_EQ(profile.memory[0].time, TimeNs(5'000));
  EXPECT_EQ(profile.memory[1].bytes, -(2 << 20));
  EXPECT_TRUE(profile.counters.unhandled_kinds.empty());
}

TEST(CuptiRecords, LostTimestampsAndUnusedKindsAreCountedNotKept) {
  Profile profile;
  CuptiRecordConverter converter(profile);
  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.name = "k";
  converter.Add(AsActivity(kernel));  // start == end == 0
  auto other = Zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_NAME);
  converter.Add(AsActivity(other));
  converter.Add(AsActivity(other));
  EXPECT_TRUE(profile.kernels.empty());
  EXPECT_EQ(profile.counters.zero_timestamp_records, 1);
  EXPECT_EQ(profile.counters.unhandled_kinds["NAME"], 2);
}

TEST(CuptiRecords, ApiCallsSyncsEventsMarkersAndDevices) {
  Profile profile;
  CuptiRecordConverter converter(profile);
  auto api = Zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  api.start = 100;
  api.end = 200;
  api.processId = 4242;
  api.threadId = 17;
  api.correlationId = 42;
  converter.Add(AsActivity(api));
  ASSERT_EQ(profile.api_calls.size(), 1u);
  EXPECT_EQ(profile.api_calls[0].name, "cudaLaunchKernel");  // the version suffix dropped
  EXPECT_EQ(profile.api_calls[0].domain, ApiDomain::kRuntime);
  EXPECT_EQ(profile.api_calls[0].thread, 17u);

  auto sync = Zeroed<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  sync.streamId = 9;
  sync.cudaEventId = 5;
  converter.Add(AsActivity(sync));
  ASSERT_EQ(profile.syncs.size(), 1u);
  EXPECT_EQ(profile.syncs[0].type, SyncType::kStreamWaitEvent);
  EXPECT_EQ(profile.syncs[0].cuda_event, 5u);

  auto event = Zeroed<CUpti_ActivityCudaEvent2>(CUPTI_ACTIVITY_KIND_CUDA_EVENT);
  event.eventId = 5;
  event.streamId = 7;
  event.correlationId = 41;
  converter.Add(AsActivity(event));
  ASSERT_EQ(profile.cuda_events.size(), 1u);
  EXPECT_EQ(profile.cuda_events[0].stream, 7u);

  auto external =
      Zeroed<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  external.externalId = 513;
  external.correlationId = 42;
  converter.Add(AsActivity(external));
  ASSERT_EQ(profile.external_correlations.size(), 1u);
  EXPECT_EQ(profile.external_correlations[0].kind, 3u);

  auto marker = Zeroed<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  marker.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  marker.id = 9;
  marker.timestamp = 50;
  marker.name = "ProfilerStep#3";
  marker.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  marker.objectId.pt.processId = 4242;
  marker.objectId.pt.threadId = 17;
  converter.Add(AsActivity(marker));
  marker.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  marker.name = nullptr;
  marker.timestamp = 900;
  converter.Add(AsActivity(marker));
  ASSERT_EQ(profile.markers.size(), 2u);
  EXPECT_EQ(profile.markers[0].phase, MarkerPhase::kStart);
  EXPECT_EQ(profile.markers[0].name, "ProfilerStep#3");
  EXPECT_EQ(profile.markers[1].phase, MarkerPhase::kEnd);
  EXPECT_EQ(profile.markers[1].thread, 17u);

  auto device = Zeroed<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
  device.name = "NVIDIA H100 80GB HBM3";
  device.numMultiprocessors = 132;
  device.numThreadsPerWarp = 32;
  device.maxWarpsPerMultiprocessor = 64;
  device.computeCapabilityMajor = 9;
  converter.Add(AsActivity(device));
  ASSERT_EQ(profile.devices.size(), 1u);
  EXPECT_EQ(profile.devices[0].max_threads_per_multiprocessor, 2048u);
  auto context = Zeroed<CUpti_ActivityContext3>(CUPTI_ACTIVITY_KIND_CONTEXT);
  context.contextId = 2;
  context.deviceId = 1;
  converter.Add(AsActivity(context));
  EXPECT_EQ(profile.context_devices.at(2), 1u);
}

}  // namespace
}  // namespace dtsim::profiler
