// The injection library (libdtsim_inject.so) that `dtsim profile` names in
// CUDA_INJECTION64_PATH: the CUDA driver loads it at cuInit and calls InitializeInjection,
// which starts a CuptiSession; an atexit handler finishes it and writes the Kineto JSON trace
// (docs/profiler.md). Configured by the environment `dtsim profile` sets
// (profiler/injection_environment.h):
//   DTSIM_PROFILE_OUTPUT   the trace to write (required); a process other than the one
//                          `dtsim profile` started (a data-loader worker, a child) writes
//                          OUTPUT with ".pid<N>" before its extension
//   DTSIM_PROFILE_PARENT_PID  the pid of `dtsim profile`: its child writes OUTPUT
//   DTSIM_PROFILE_KINDS    activity kinds ("kernel,memcpy,...", "all" or "default";
//                          default: default)
//   DTSIM_PROFILE_MAX_BUFFER_MB  the cap on record buffers (default 256)
//   DTSIM_PROFILE_ALL_API_CALLS  "1": record the query API calls too
//   DTSIM_PROFILE_CAPTURE_RANGE  "whole" (default) or "cuda_profiler_api": record only between
//                          cudaProfilerStart and cudaProfilerStop
//   DTSIM_PROFILE_PROGRAM  the command line, for the trace's metadata
//   DTSIM_PROFILE_STATUS   a file to which each process appends "ok PATH" or "error MESSAGE"
// Inside InitializeInjection only CUPTI may be called, never the CUDA runtime or driver.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <cupti.h>
#include <dlfcn.h>

#include "profiler/cupti/cupti_session.h"
#include "profiler/injection_environment.h"
#include "profiler/kineto_writer.h"

namespace dtsim::profiler {
namespace {

namespace environment = profiler::environment;

std::unique_ptr<CuptiSession> g_session;
std::once_flag g_started;

std::string Environment(const char* name, const char* fallback = "") {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

int32_t EnvironmentInt(const char* name, int32_t fallback) {
  const std::string text = Environment(name);
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' ? fallback : static_cast<int32_t>(value);
}

// Appends one line to the status file (small O_APPEND writes do not interleave).
void Report(const std::string& line) {
  const std::string path = Environment(environment::kStatus);
  if (path.empty()) {
    std::fprintf(stderr, "dtsim profile: %s\n", line.c_str());
    return;
  }
  if (FILE* file = std::fopen(path.c_str(), "a")) {
    std::fprintf(file, "%s\n", line.c_str());
    std::fclose(file);
  }
}

std::string OutputPath() {
  std::string output = Environment(environment::kOutput);
  if (EnvironmentInt(environment::kParentPid, -1) == getppid()) return output;
  const size_t dot = output.rfind('.');
  const size_t slash = output.rfind('/');
  const bool has_extension =
      dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_extension ? output.substr(0, dot) : output;
  return fmt::format("{}.pid{}{}", stem, getpid(), has_extension ? output.substr(dot) : "");
}

void FinishAtExit() {
  if (!g_session) return;
  Expected<Profile> profile = g_session->Finish();
  g_session.reset();
  if (!profile.ok()) {
    Report("error " + profile.error().ToString());
    return;
  }
  if (profile->capture_windows == 0) {
    Report(
        "error the program never called cudaProfilerStart (or cuProfilerStart), so "
        "--capture-range cuda-profiler-api captured nothing and no trace was written");
    return;
  }
  profile->program = Environment(environment::kProgram);
  profile->process = static_cast<uint32_t>(getpid());
  profile->rank = EnvironmentInt("RANK", -1);
  profile->world_size = EnvironmentInt("WORLD_SIZE", -1);
  const std::string path = OutputPath();
  const Status written = WriteKinetoTraceFile(path, *profile);
  Report(written.ok() ? "ok " + path : "error " + written.error().ToString());
}

// NVTX ranges reach CUPTI only when NVTX is injected with the libcupti in use. NVTX reads
// NVTX_INJECTION64_PATH at the program's first NVTX call; setting it here, at cuInit, catches
// the ranges opened after the first CUDA call (PyTorch's emit_nvtx ranges are). A path the
// user set is kept.
void InjectNvtx() {
  if (std::getenv("NVTX_INJECTION64_PATH") != nullptr) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
  }
}

void Start() {
  if (Environment(environment::kOutput).empty()) {
    Report("error DTSIM_PROFILE_OUTPUT is not set: run the program through `dtsim profile`");
    return;
  }
  SessionOptions options;
  if (const std::string kinds = Environment(environment::kKinds); !kinds.empty()) {
    Expected<ActivityKinds> parsed = ParseActivityKinds(kinds);
    if (!parsed.ok()) {
      Report("error DTSIM_PROFILE_KINDS: " + parsed.error().ToString());
      return;
    }
    options.kinds = *parsed;
  }
  options.all_api_calls = Environment(environment::kAllApiCalls) == "1";
  const std::string range = Environment(environment::kCaptureRange, environment::kCaptureWhole);
  if (range != environment::kCaptureWhole && range != environment::kCaptureProfilerApi) {
    Report(fmt::format("error {}: unknown capture range '{}'", environment::kCaptureRange, range));
    return;
  }
  options.capture_profiler_api = range == environment::kCaptureProfilerApi;
  options.max_buffer_bytes =
      static_cast<size_t>(
          std::max(1, EnvironmentInt(environment::kMaxBufferMb, environment::kDefaultMaxBufferMb)))
      << 20;
  Expected<std::unique_ptr<CuptiSession>> session = CuptiSession::Start(options);
  if (!session.ok()) {
    Report("error " + session.error().ToString());
    return;
  }
  g_session = std::move(session).value();
  if (options.kinds.Has(ActivityKind::kNvtx)) InjectNvtx();
  std::atexit(FinishAtExit);
}

}  // namespace
}  // namespace dtsim::profiler

// Called by the CUDA driver at cuInit; returns 1 (success) even when profiling could not start,
// so the program runs unprofiled rather than failing — the status file says why.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  std::call_once(dtsim::profiler::g_started, dtsim::profiler::Start);
  return 1;
}
