// The real traces in ../shared/traces that tests read (their README says what each one is).
#pragma once

#include <cctype>
#include <fstream>
#include <iterator>
#include <string>

#include <zlib.h>

namespace dtsim::traces {

inline constexpr const char* kAlexnetTrace =
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz";
inline constexpr const char* kEventSyncTrace =
    "critical_path__cuda_event_sync__event_sync_trace.json.gz";
inline constexpr const char* kEventSyncMultiStreamTrace =
    "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz";
inline constexpr const char* kSimpleAddTrace =
    "critical_path__simple_add__benchmark_result_493459_1694039959_trace.json.gz";
inline constexpr const char* kCuptiProfilerTrace =
    "cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz";
inline constexpr const char* kExecutionTraceDeviceTrace =
    "execution_trace__benchmark_simple_add_trace.json.gz";
inline constexpr const char* kExecutionTraceHost =
    "execution_trace__benchmark_simple_add_et.json.gz";
inline constexpr const char* kSampledRank0Trace = "timeline_analysis__sampled_rank-0.json.gz";
inline constexpr const char* kSampledRank1Trace = "trace_filter__sampled_rank-1.json.gz";
inline constexpr const char* kTritonTrace = "triton_example__triton_example.json.gz";

// Every shared Kineto trace with GPU events (the replay and fuzz tests walk these).
inline constexpr const char* kReplayableTraces[] = {kAlexnetTrace,
                                                    kEventSyncTrace,
                                                    kEventSyncMultiStreamTrace,
                                                    kSimpleAddTrace,
                                                    kExecutionTraceDeviceTrace,
                                                    kSampledRank0Trace,
                                                    kSampledRank1Trace,
                                                    kTritonTrace};

inline constexpr const char* kChakraEt = "chakra.0.et";
inline constexpr const char* kChakraWorkloadJson = "chakra.0.json.gz";
inline constexpr const char* kSmallChakraJson = "small_chakra.0.json";

inline std::string SharedKineto(const std::string& file) {
  return std::string(DTSIM_SHARED_DIR) + "/traces/kineto/" + file;
}

inline std::string SharedChakra(const std::string& file) {
  return std::string(DTSIM_SHARED_DIR) + "/traces/chakra/" + file;
}

// A gtest parameter name for a trace file: its first 40 letters and digits.
inline std::string TraceTestName(const std::string& file) {
  std::string name;
  for (const char c : file) {
    if (std::isalnum(static_cast<unsigned char>(c))) name.push_back(c);
    if (name.size() == 40) break;
  }
  return name;
}

// A file's text, gunzipped when it is gzip (zlib reads plain files as they are).
inline std::string GunzipFile(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) return {};
  std::string text;
  char block[1 << 16];
  int got = 0;
  while ((got = gzread(gz, block, sizeof block)) > 0) text.append(block, static_cast<size_t>(got));
  gzclose(gz);
  return text;
}

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace dtsim::traces
