// One CUPTI activity-tracing session in this process (docs/profiler.md): registers the buffer
// callbacks, enables the chosen activity kinds, and at Finish() force-flushes, disables them
// and converts every completed buffer into a Profile. Buffers are handed out up to a cap;
// a request past it is declined and counted (CUPTI then drops records, also counted). The
// completion callback only queues the buffer: records are parsed after the run, off CUPTI's
// worker thread (Kineto's practice).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "profiler/activity_kinds.h"
#include "profiler/injection_environment.h"
#include "profiler/profile.h"
#include "sim/base/status.h"

namespace dtsim::profiler {

struct SessionOptions {
  ActivityKinds kinds = ActivityKinds::Default();
  size_t buffer_bytes = size_t{4} << 20;  // CUPTI recommends 1 to 10 MiB
  // The cap on host memory for records.
  size_t max_buffer_bytes = size_t{environment::kDefaultMaxBufferMb} << 20;
  // Record the query API calls too (cudaGetDevice, cuDevicePrimaryCtxGetState, ...). Off by
  // default: PyTorch makes ~12 of them per kernel it launches, and their records cost more
  // host time than everything else the session records.
  bool all_api_calls = false;
  // Record only between cuProfilerStart and cuProfilerStop (cudaProfilerStart/Stop), as many
  // windows as the program opens, instead of from cuInit to exit.
  bool capture_profiler_api = false;
};

class CuptiSession {
 public:
  // At most one session per process (CUPTI's callbacks are process-wide). Errors name the
  // CUPTI call and, when another tool holds CUPTI, say so.
  static Expected<std::unique_ptr<CuptiSession>> Start(const SessionOptions& options);
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  // Flushes every buffer (forced), disables the kinds and returns what was captured. The
  // session captures nothing after it.
  Expected<Profile> Finish();

 private:
  explicit CuptiSession(const SessionOptions& options) : options_(options) {}
  Status Enable();
  // Enables or disables the kinds (and switches off the query calls' records).
  Status EnableKinds();
  void DisableKinds();
  // Switches off the records of the query API calls; returns the names switched off.
  std::vector<std::string> QuietQueryCalls();
  // The callback API: cuProfilerStart/Stop windows, and a flush before cudaDeviceReset
  // destroys the contexts whose records are still on the GPU.
  Status Subscribe();
  static void OnApiCall(void* userdata, uint32_t domain, uint32_t id, const void* data);
  void Disable();

  static void RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CompleteBuffer(void* context, uint32_t stream, uint8_t* buffer, size_t size,
                             size_t valid_size);

  SessionOptions options_;
  std::mutex mutex_;  // guards the fields below; never held while calling CUPTI
  std::vector<std::pair<uint8_t*, size_t>> completed_;  // (buffer, valid bytes)
  size_t allocated_bytes_ = 0;
  int64_t declined_buffers_ = 0;
  int64_t dropped_records_ = 0;
  bool finished_ = false;
  TimeNs start_;
  std::vector<std::string> quiet_calls_;  // guarded by mutex_
  void* subscriber_ = nullptr;            // CUpti_SubscriberHandle; null when another tool holds it
  // Touched by the application's threads inside their CUDA calls.
  std::atomic<bool> capturing_{false};  // the kinds are enabled
  std::atomic<int32_t> capture_windows_{0};
  std::atomic<int32_t> reset_flushes_{0};
  std::vector<std::string> capture_errors_;  // guarded by mutex_
  bool flush_armed_ = false;                 // cudaDeviceReset is hooked
};

}  // namespace dtsim::profiler
