#include "profiler/cupti/cupti_session.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <span>
#include <string>

#include <cupti.h>

#include "profiler/cupti/cupti_call.h"
#include "profiler/cupti/cupti_records.h"

namespace dtsim::profiler {
namespace {

// The process's session, for CUPTI's plain-function callbacks.
std::atomic<CuptiSession*> g_session{nullptr};

constexpr size_t kBufferAlignment = 8;  // CUPTI requires 8-byte aligned buffers

// Per dtsim kind, the CUPTI kinds it enables.
std::vector<CUpti_ActivityKind> CuptiKinds(ActivityKinds kinds) {
  constexpr std::array<CUpti_ActivityKind, kActivityKindCount> kMap = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
      CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_RUNTIME,
      CUPTI_ACTIVITY_KIND_DRIVER,
      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
      CUPTI_ACTIVITY_KIND_CUDA_EVENT,
      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_MARKER,
      CUPTI_ACTIVITY_KIND_OVERHEAD,
      CUPTI_ACTIVITY_KIND_MEMORY2};
  // Device properties and the context -> device map are always wanted.
  std::vector<CUpti_ActivityKind> enabled = {CUPTI_ACTIVITY_KIND_DEVICE,
                                             CUPTI_ACTIVITY_KIND_CONTEXT};
  for (size_t k = 0; k < kActivityKindCount; ++k) {
    if (kinds.Has(static_cast<ActivityKind>(k))) enabled.push_back(kMap[k]);
  }
  return enabled;
}

Status EnableKind(CUpti_ActivityKind kind) {
  const CUptiResult result = cuptiActivityEnable(kind);
  if (result == CUPTI_SUCCESS) return Status::Ok();
  Error error =
      CuptiError(fmt::format("cuptiActivityEnable({})", ActivityKindNameOf(kind)).c_str(), result);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
      result == CUPTI_ERROR_NOT_COMPATIBLE) {
    return Error(error.message() +
                 "; another profiler (Nsight Systems, torch.profiler, ...) already traces this "
                 "process: CUPTI allows one");
  }
  return error;
}

// API calls that only ask something: they launch, copy, set, synchronize and record nothing,
// so no GPU op, sync or stream wait links to them. PyTorch makes ~12 of them per kernel it
// launches (cudaGetDevice alone ~9, cuDevicePrimaryCtxGetState ~3: 535,370 API records for
// 25,507 kernels in a GPT-2 small run on an H100), and recording them is most of the
// session's host overhead. Their records are switched off unless --all-api-calls; the trace's
// metadata lists them (api_calls_not_recorded).
struct QuietCall {
  CUpti_CallbackId id;
  const char* name;
};
#define DTSIM_RUNTIME_QUERY(name, version) \
  { CUPTI_RUNTIME_TRACE_CBID_##name##_##version, #name }
constexpr QuietCall kQuietRuntimeCalls[] = {
    DTSIM_RUNTIME_QUERY(cudaGetDevice, v3020),
    DTSIM_RUNTIME_QUERY(cudaGetDeviceCount, v3020),
    DTSIM_RUNTIME_QUERY(cudaGetDeviceProperties, v3020),
    DTSIM_RUNTIME_QUERY(cudaDeviceGetAttribute, v5000),
    DTSIM_RUNTIME_QUERY(cudaDeviceGetStreamPriorityRange, v5050),
    DTSIM_RUNTIME_QUERY(cudaGetLastError, v3020),
    DTSIM_RUNTIME_QUERY(cudaPeekAtLastError, v3020),
    DTSIM_RUNTIME_QUERY(cudaGetErrorString, v3020),
    DTSIM_RUNTIME_QUERY(cudaGetErrorName, v6050),
    DTSIM_RUNTIME_QUERY(cudaDriverGetVersion, v3020),
    DTSIM_RUNTIME_QUERY(cudaRuntimeGetVersion, v3020),
    DTSIM_RUNTIME_QUERY(cudaGetDriverEntryPoint, v11030),
    DTSIM_RUNTIME_QUERY(cudaGetDriverEntryPointByVersion, v12050),
    DTSIM_RUNTIME_QUERY(cudaGetFuncBySymbol, v11000),
    DTSIM_RUNTIME_QUERY(cudaFuncGetAttributes, v3020),
    DTSIM_RUNTIME_QUERY(cudaPointerGetAttributes, v4000),
    DTSIM_RUNTIME_QUERY(cudaStreamIsCapturing, v10000),
    DTSIM_RUNTIME_QUERY(cudaStreamGetCaptureInfo, v10010),
    DTSIM_RUNTIME_QUERY(cudaStreamGetCaptureInfo_v2, v11030),
    DTSIM_RUNTIME_QUERY(cudaStreamGetPriority, v5050),
    DTSIM_RUNTIME_QUERY(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6000),
    DTSIM_RUNTIME_QUERY(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, v7000),
};
#undef DTSIM_RUNTIME_QUERY
#define DTSIM_DRIVER_QUERY(name) \
  { CUPTI_DRIVER_TRACE_CBID_##name, #name }
constexpr QuietCall kQuietDriverCalls[] = {
    DTSIM_DRIVER_QUERY(cuDevicePrimaryCtxGetState),
    DTSIM_DRIVER_QUERY(cuDeviceGet),
    DTSIM_DRIVER_QUERY(cuDeviceGetCount),
    DTSIM_DRIVER_QUERY(cuDeviceGetAttribute),
    DTSIM_DRIVER_QUERY(cuDriverGetVersion),
    DTSIM_DRIVER_QUERY(cuGetProcAddress),
    DTSIM_DRIVER_QUERY(cuGetProcAddress_v2),
    DTSIM_DRIVER_QUERY(cuGetErrorString),
    DTSIM_DRIVER_QUERY(cuGetErrorName),
    DTSIM_DRIVER_QUERY(cuCtxGetCurrent),
    DTSIM_DRIVER_QUERY(cuCtxGetDevice),
    DTSIM_DRIVER_QUERY(cuCtxGetDevice_v2),
    DTSIM_DRIVER_QUERY(cuCtxGetId),
    DTSIM_DRIVER_QUERY(cuCtxGetLimit),
    DTSIM_DRIVER_QUERY(cuCtxGetStreamPriorityRange),
    DTSIM_DRIVER_QUERY(cuKernelGetName),
    DTSIM_DRIVER_QUERY(cuKernelGetAttribute),
    DTSIM_DRIVER_QUERY(cuFuncGetName),
    DTSIM_DRIVER_QUERY(cuFuncGetAttribute),
    DTSIM_DRIVER_QUERY(cuPointerGetAttribute),
    DTSIM_DRIVER_QUERY(cuPointerGetAttributes),
    DTSIM_DRIVER_QUERY(cuStreamIsCapturing),
    DTSIM_DRIVER_QUERY(cuStreamIsCapturing_ptsz),
    DTSIM_DRIVER_QUERY(cuStreamGetCaptureInfo),
    DTSIM_DRIVER_QUERY(cuStreamGetCaptureInfo_v2),
    DTSIM_DRIVER_QUERY(cuStreamGetCaptureInfo_v3),
    DTSIM_DRIVER_QUERY(cuStreamGetPriority),
    DTSIM_DRIVER_QUERY(cuStreamGetCtx),
    DTSIM_DRIVER_QUERY(cuStreamGetDevice),
    DTSIM_DRIVER_QUERY(cuStreamGetId),
    DTSIM_DRIVER_QUERY(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    DTSIM_DRIVER_QUERY(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
};
#undef DTSIM_DRIVER_QUERY

TimeNs CuptiNow() {
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  return TimeNs(static_cast<int64_t>(now));
}

}  // namespace

Expected<std::unique_ptr<CuptiSession>> CuptiSession::Start(const SessionOptions& options) {
  std::unique_ptr<CuptiSession> session(new CuptiSession(options));
  CuptiSession* expected = nullptr;
  if (!g_session.compare_exchange_strong(expected, session.get())) {
    return Error("a CUPTI session is already running in this process");
  }
  if (Status enabled = session->Enable(); !enabled.ok()) {
    session->Disable();
    g_session = nullptr;
    return std::move(enabled).error();
  }
  session->start_ = CuptiNow();
  return session;
}

Status CuptiSession::Enable() {
  DTSIM_CUPTI_CALL(cuptiActivityRegisterCallbacks(
      [](uint8_t** buffer, size_t* size, size_t* max_records) {
        RequestBuffer(buffer, size, max_records);
      },
      [](CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
        CompleteBuffer(context, stream, buffer, size, valid);
      }));
  DTSIM_RETURN_IF_ERROR(Subscribe());
  if (!options_.capture_profiler_api) {
    DTSIM_RETURN_IF_ERROR(EnableKinds());
    capture_windows_ = 1;
  }
  return Status::Ok();
}

Status CuptiSession::EnableKinds() {
  for (const CUpti_ActivityKind kind : CuptiKinds(options_.kinds)) {
    DTSIM_RETURN_IF_ERROR(EnableKind(kind));
  }
  if (!options_.all_api_calls) {
    std::vector<std::string> quiet = QuietQueryCalls();
    const std::lock_guard lock(mutex_);
    quiet_calls_ = std::move(quiet);
  }
  capturing_ = true;
  return Status::Ok();
}

void CuptiSession::DisableKinds() {
  for (const CUpti_ActivityKind kind : CuptiKinds(options_.kinds)) cuptiActivityDisable(kind);
  capturing_ = false;
}

Status CuptiSession::Subscribe() {
  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult result = cuptiSubscribe(
      &subscriber,
      [](void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
        OnApiCall(userdata, domain, id, data);
      },
      this);
  if (result != CUPTI_SUCCESS) {
    // Another tool holds the callback API. A whole-run capture only loses the flush before
    // cudaDeviceReset; a capture by the profiler API cannot work without it.
    if (!options_.capture_profiler_api) return Status::Ok();
    return CuptiError("cuptiSubscribe (for --capture-range cuda-profiler-api)", result);
  }
  subscriber_ = subscriber;
  flush_armed_ = true;
  DTSIM_CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                       CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
  if (options_.capture_profiler_api) {
    DTSIM_CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                         CUPTI_DRIVER_TRACE_CBID_cuProfilerStart));
    DTSIM_CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                         CUPTI_DRIVER_TRACE_CBID_cuProfilerStop));
  }
  return Status::Ok();
}

// On the application's thread, inside its CUDA call: only CUPTI may be called here.
void CuptiSession::OnApiCall(void* userdata, uint32_t domain, uint32_t id, const void* data) {
  auto* session = static_cast<CuptiSession*>(userdata);
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
      id == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
    // The reset destroys the contexts: take their records first (also those of a window that
    // has closed but whose buffers CUPTI still holds).
    if (call->callbackSite == CUPTI_API_ENTER) {
      cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      ++session->reset_flushes_;
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && call->callbackSite == CUPTI_API_EXIT &&
      !session->capturing_) {
    if (Status enabled = session->EnableKinds(); enabled.ok()) {
      ++session->capture_windows_;
    } else {
      session->DisableKinds();
      const std::lock_guard lock(session->mutex_);
      session->capture_errors_.push_back(enabled.error().ToString());
    }
  } else if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop &&
             call->callbackSite == CUPTI_API_ENTER && session->capturing_) {
    session->DisableKinds();
  }
}

// After the RUNTIME and DRIVER kinds are enabled (enabling a kind again would undo this). A
// call CUPTI refuses to switch off stays recorded and is not listed.
std::vector<std::string> CuptiSession::QuietQueryCalls() {
  std::vector<std::string> quiet;
  const auto switch_off = [&](std::span<const QuietCall> calls, auto disable) {
    for (const QuietCall& call : calls) {
      if (disable(call.id, 0) == CUPTI_SUCCESS) quiet.emplace_back(call.name);
    }
  };
  if (options_.kinds.Has(ActivityKind::kRuntime)) {
    switch_off(kQuietRuntimeCalls, cuptiActivityEnableRuntimeApi);
  }
  if (options_.kinds.Has(ActivityKind::kDriver)) {
    switch_off(kQuietDriverCalls, cuptiActivityEnableDriverApi);
  }
  return quiet;
}

void CuptiSession::Disable() {
  if (subscriber_ != nullptr) {
    cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_));
    subscriber_ = nullptr;
  }
  DisableKinds();
}

CuptiSession::~CuptiSession() {
  if (!finished_) Disable();
  for (const auto& [buffer, valid] : completed_) std::free(buffer);
  g_session = nullptr;
}

void CuptiSession::RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  CuptiSession* session = g_session.load();
  if (session == nullptr) return;
  const size_t bytes = session->options_.buffer_bytes;
  {
    const std::lock_guard lock(session->mutex_);
    if (session->allocated_bytes_ + bytes > session->options_.max_buffer_bytes) {
      ++session->declined_buffers_;
      return;
    }
    session->allocated_bytes_ += bytes;
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, bytes));
  if (*buffer != nullptr) {
    *size = bytes;
    return;
  }
  const std::lock_guard lock(session->mutex_);  // out of memory: declined after all
  session->allocated_bytes_ -= bytes;
  ++session->declined_buffers_;
}

void CuptiSession::CompleteBuffer(void* context, uint32_t stream, uint8_t* buffer, size_t,
                                  size_t valid_size) {
  CuptiSession* session = g_session.load();
  if (session == nullptr) {
    std::free(buffer);
    return;
  }
  // Asked before taking our lock: CUPTI's own lock is held while it requests buffers, which
  // takes ours (Kineto's ABBA deadlock).
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(static_cast<CUcontext>(context), stream, &dropped);
  const std::lock_guard lock(session->mutex_);
  session->dropped_records_ += static_cast<int64_t>(dropped);
  session->completed_.emplace_back(buffer, valid_size);
}

Expected<Profile> CuptiSession::Finish() {
  DTSIM_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  Disable();
  finished_ = true;
  Profile profile;
  profile.session_start = start_;
  profile.session_end = CuptiNow();
  profile.enabled_kinds = options_.kinds.ToString();
  profile.capture_range = options_.capture_profiler_api ? "cuda_profiler_api" : "whole";
  profile.capture_windows = capture_windows_;
  profile.flush_before_device_reset = flush_armed_;
  profile.device_reset_flushes = reset_flushes_;
  {
    const std::lock_guard lock(mutex_);
    profile.api_calls_not_recorded = quiet_calls_;
    if (!capture_errors_.empty()) {
      return Error(fmt::format("at cuProfilerStart: {}", fmt::join(capture_errors_, "; ")));
    }
  }
  DTSIM_ASSIGN_OR_RETURN(profile.cupti_version, CuptiRuntimeVersion());
  std::vector<std::pair<uint8_t*, size_t>> completed;
  {
    const std::lock_guard lock(mutex_);
    completed.swap(completed_);
    profile.counters.declined_buffers = declined_buffers_;
    profile.counters.dropped_records = dropped_records_;
  }
  CuptiRecordConverter converter(profile);
  for (const auto& [buffer, valid] : completed) {
    converter.AddBuffer(buffer, valid);
    std::free(buffer);
  }
  return profile;
}

}  // namespace dtsim::profiler
