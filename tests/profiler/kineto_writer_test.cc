// The profiler's Kineto JSON, written from a synthetic profile (tests/profiler/
// synthetic_profile.h) and read back by dtsim's own Kineto reader: every record arrives with
// its links, the counts of what could not be linked are in the metadata, and the trace replays
// its step exactly.
#include "profiler/kineto_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "profiler/device_memory.h"
#include "profiler/profile_linker.h"
#include "sim/base/json_reader.h"
#include "strategies/replay.h"
#include "tests/profiler/synthetic_profile.h"
#include "tests/testing/temp_dir.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::profiler {
namespace {

using testing::HasSubstr;

TEST(ProfileLinker, LinksLaunchesExternalIdsRangesAndEventWaits) {
  const Profile profile = SyntheticProfile();
  const LinkedProfile linked = LinkProfile(profile);
  ASSERT_EQ(linked.ranges.size(), 2u);
  EXPECT_EQ(linked.ranges[1].parent, 0u);      // aten::mm inside ProfilerStep#1
  EXPECT_EQ(linked.api_external_id[0], 513u);  // CUSTOM0 wins over CUSTOM1's 9
  EXPECT_EQ(linked.api_range[0], 1u);          // launch 1 is inside aten::mm
  EXPECT_EQ(linked.api_range[1], 0u);          // the copy only inside the step
  EXPECT_EQ(linked.Launch(2), 1u);             // a copy links by its runtime correlation
  ASSERT_TRUE(linked.sync_event_origin[0].has_value());
  EXPECT_EQ(linked.sync_event_origin[0]->stream, 7u);
  EXPECT_EQ(linked.sync_event_origin[0]->correlation, 3u);
  EXPECT_FALSE(linked.sync_event_origin[1].has_value());  // a stream sync names no event
  EXPECT_EQ(linked.stats.gpu_ops, 5);
  EXPECT_EQ(linked.stats.gpu_ops_without_launch, 1);
  EXPECT_EQ(linked.stats.gpu_ops_in_ranges, 4);
  EXPECT_EQ(linked.stats.external_ids_without_api, 1);
  EXPECT_EQ(linked.stats.marker_ends_without_start, 1);
  EXPECT_EQ(linked.stats.ranges_left_open, 0);
  EXPECT_EQ(linked.stats.waits_without_event_record, 0);
}

TEST(ProfileLinker, OpenRangesEndWithTheSessionAndNestByTime) {
  Profile profile = SyntheticProfile();
  profile.markers.pop_back();
  profile.markers.pop_back();  // ProfilerStep#1 never ends
  const LinkedProfile linked = LinkProfile(profile);
  EXPECT_EQ(linked.stats.ranges_left_open, 1);
  EXPECT_EQ(linked.ranges[0].end, profile.session_end);
  EXPECT_FALSE(linked.ranges[0].closed);
}

class KinetoWriterTest : public testing_support::TempDirTest {};

TEST_F(KinetoWriterTest, DtsimsReaderReadsEveryRecordAndItsLinks) {
  const Profile profile = SyntheticProfile();
  const std::string path = Path("profile.json");
  ASSERT_TRUE(WriteKinetoTraceFile(path, profile).ok());
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->format, "kineto");
  EXPECT_EQ(trace->gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(trace->base_time_ns, kSyntheticT0.ns());
  EXPECT_EQ(trace->stats.kernels, 3);
  EXPECT_EQ(trace->stats.memcpys, 1);
  EXPECT_EQ(trace->stats.memsets, 1);
  EXPECT_EQ(trace->stats.api_calls, 7);
  EXPECT_EQ(trace->stats.syncs, 2);
  EXPECT_EQ(trace->stats.gpu_ops_without_launch, 1);
  EXPECT_EQ(trace->stats.flows, 8);  // start and finish per linked GPU op
  EXPECT_TRUE(trace->stats.dropped.empty());
  ASSERT_EQ(trace->steps.size(), 1u);
  EXPECT_EQ(trace->steps[0].number, 1);
  EXPECT_EQ(trace->steps[0].duration, Microseconds(100));
  // Exact nanoseconds: the copy starts 30 µs after t0 (the reader keeps times relative to
  // baseTimeNanoseconds, as the trace writes them).
  bool copy_seen = false;
  bool gemm_seen = false;
  for (const traces::DeviceEvent& op : trace->device) {
    if (op.kind == traces::DeviceEventKind::kMemcpy) {
      copy_seen = true;
      EXPECT_EQ(op.start - TimeNs::Zero(), SyntheticAt(30) - kSyntheticT0);
      EXPECT_EQ(op.bytes, Bytes(1 << 20));
      EXPECT_EQ(op.correlation, 2);
      EXPECT_EQ(trace->Name(op.name), "Memcpy HtoD (Pinned -> Device)");
    }
    if (trace->Name(op.name) == "gemm(float*, float*, float*)") gemm_seen = true;
  }
  EXPECT_TRUE(copy_seen);
  EXPECT_TRUE(gemm_seen);  // demangled
  // The emit_nvtx range became the op aten::mm with its input dims; the launch in it has the
  // op's external id.
  bool mm_seen = false;
  for (const traces::HostEvent& event : trace->host) {
    if (trace->Name(event.name) == "aten::mm") {
      mm_seen = true;
      EXPECT_EQ(event.kind, traces::HostEventKind::kOp);
      ASSERT_NE(event.shapes, traces::kNone);
      EXPECT_EQ(trace->shapes[event.shapes].input_dims, "[[64,32],[32,16]]");
    }
    if (event.correlation == 1) {
      EXPECT_EQ(event.external_id, 513);
    }
  }
  EXPECT_TRUE(mm_seen);
  // The stream wait names the stream and launch its event captured.
  const auto wait = std::find_if(trace->syncs.begin(), trace->syncs.end(), [](const auto& s) {
    return s.kind == traces::SyncKind::kStreamWaitEvent;
  });
  ASSERT_NE(wait, trace->syncs.end());
  EXPECT_EQ(wait->wait_on_stream, 7);
  EXPECT_EQ(wait->record_correlation, 3);

  const Json other = (*ReadJsonFile(path))["otherData"];
  EXPECT_EQ(other["format"], kProfileFormat.name);
  EXPECT_EQ(other["version"], "1.1");
  EXPECT_EQ(other["cupti_version"], 130001);
  EXPECT_EQ(other["api_calls_not_recorded"], Json({"cudaGetDevice", "cuDevicePrimaryCtxGetState"}));
  EXPECT_EQ(other["capture_range"], "whole");
  EXPECT_EQ(other["capture_windows"], 1);
  EXPECT_EQ(other["flush_before_device_reset"], true);
  EXPECT_EQ(other["device_reset_flushes"], 0);
  EXPECT_EQ(other["records"]["kernels"], 3);
  EXPECT_EQ(other["unlinked"]["gpu_ops_without_launch"], 1);
  EXPECT_EQ(other["unlinked"]["external_ids_without_api"], 1);
  EXPECT_EQ(other["unlinked"]["marker_ends_without_start"], 1);
  EXPECT_EQ(other["lost"]["dropped_records"], 0);
}

// The step replays exactly: every edge the replay graph needs (launches, the stream wait, the
// stream sync) is in the written trace.
TEST_F(KinetoWriterTest, TheWrittenTraceReplaysItsStepExactly) {
  const std::string path = Path("profile.json");
  ASSERT_TRUE(WriteKinetoTraceFile(path, SyntheticProfile()).ok());
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok());
  const Expected<traces::ReplayGraph> graph = traces::BuildReplayGraph(*trace);
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  EXPECT_EQ(graph->stats.launch_edges, 4);
  EXPECT_EQ(graph->stats.stream_wait_edges, 1);
  EXPECT_EQ(graph->stats.sync_edges, 1);
  const Expected<strategies::ReplayResult> replay = strategies::SimulateReplay(*graph);
  ASSERT_TRUE(replay.ok()) << replay.error().ToString();
  ASSERT_EQ(replay->steps.size(), 1u);
  EXPECT_EQ(replay->steps[0].simulated, Microseconds(100));
  EXPECT_EQ(replay->max_start_drift, DurationNs::Zero());
}

TEST(KinetoWriter, LostRecordsAndDistributedFactsAreInTheMetadata) {
  Profile profile = SyntheticProfile();
  profile.counters.dropped_records = 12;
  profile.counters.declined_buffers = 2;
  profile.counters.zero_timestamp_records = 3;
  profile.counters.unhandled_kinds["MEMORY2"] = 4;
  profile.rank = 3;
  profile.world_size = 8;
  std::ostringstream out;
  WriteKinetoTrace(out, profile);
  const Json json = Json::parse(out.str());
  EXPECT_TRUE(out.str().starts_with(R"({"otherData":{"format":"dtsim.profile","version":"1.1")"))
      << out.str().substr(0, 80);  // the format comes first
  EXPECT_EQ(json["otherData"]["lost"]["dropped_records"], 12);
  EXPECT_EQ(json["otherData"]["lost"]["declined_buffers"], 2);
  EXPECT_EQ(json["otherData"]["lost"]["zero_timestamp_records"], 3);
  EXPECT_EQ(json["otherData"]["lost"]["unhandled_kinds"]["MEMORY2"], 4);
  EXPECT_EQ(json["distributedInfo"]["rank"], 3);
  EXPECT_EQ(json["distributedInfo"]["world_size"], 8);
}

// Device memory through CUDA (MEMORY2): per device, the running total after each record, in
// time order with a release before an allocation at the same time, never below zero (a release
// of what was allocated before the capture), and the peak: on device 0, 1 GiB, then 3 GiB at
// 20 us, a 1 GiB release and a 1.5 GiB allocation at 30 us (3.5 GiB: the release first), then a
// 4 GiB release (0); on device 1, a release first (0) and 0.5 GiB.
TEST_F(KinetoWriterTest, DeviceMemoryIsACounterTrackWithItsPeak) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const std::vector<MemoryRecord> records = {
      {SyntheticAt(10), 0, 0x1000, kGiB},         {SyntheticAt(20), 0, 0x2000, 2 * kGiB},
      {SyntheticAt(30), 0, 0x3000, 3 * kGiB / 2}, {SyntheticAt(30), 0, 0x1000, -kGiB},
      {SyntheticAt(40), 0, 0x2000, -4 * kGiB},    {SyntheticAt(5), 1, 0x9000, -kGiB},
      {SyntheticAt(15), 1, 0x9000, kGiB / 2}};
  const DeviceMemory memory = DeviceMemoryOf(records);
  std::vector<int64_t> totals;
  for (const DeviceMemoryPoint& point : memory.timeline) totals.push_back(point.bytes);
  EXPECT_EQ(totals, (std::vector<int64_t>{kGiB, 3 * kGiB, 2 * kGiB, 7 * kGiB / 2, 0, 0, kGiB / 2}));
  ASSERT_EQ(memory.peaks.size(), 2u);
  EXPECT_EQ(memory.peaks[0].bytes, 7 * kGiB / 2);
  EXPECT_EQ(memory.peaks[0].time, SyntheticAt(30));
  EXPECT_EQ(memory.peaks[1].device, 1u);
  EXPECT_EQ(memory.peaks[1].bytes, kGiB / 2);
  // In the trace: the counts, the peaks (µs from the base time, the session start), and one
  // counter event per record; dtsim's reader takes the trace as before.
  Profile profile = SyntheticProfile();
  profile.memory = records;
  const std::string path = Path("memory.json");
  ASSERT_TRUE(WriteKinetoTraceFile(path, profile).ok());
  const Expected<Json> read = ReadJsonFile(path);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  const Json& json = *read;
  EXPECT_EQ(json["otherData"]["records"]["memory"], 7);
  EXPECT_EQ(json["otherData"]["device_memory_peaks"][0],
            Json({{"device", 0}, {"bytes", 7 * kGiB / 2}, {"at_us", 30.0}}));
  int counters = 0;
  for (const Json& event : json["traceEvents"]) {
    if (event["ph"] == "C") {
      ++counters;
      EXPECT_EQ(event["name"], "device memory allocated through CUDA");
    }
  }
  EXPECT_EQ(counters, 7);
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->stats.kernels, 3);
}

TEST(KinetoWriter, DemanglesKernelNamesAndKeepsOthers) {
  EXPECT_EQ(DemangledName("_Z4gemmPfS_S_"), "gemm(float*, float*, float*)");
  EXPECT_EQ(DemangledName("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
  EXPECT_EQ(DemangledName("_Znot a name"), "_Znot a name");
}

}  // namespace
}  // namespace dtsim::profiler
