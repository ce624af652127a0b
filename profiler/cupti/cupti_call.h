// The one checked way to call CUPTI: DTSIM_CUPTI_CALL(cuptiX(...)) evaluates the call and, on
// failure, returns an Error naming the call and CUPTI's own error string from the enclosing
// function (which must return Status or Expected<T>). Only profiler/cupti/ includes <cupti.h>.
#pragma once

#include <cstdint>
#include <string>

#include <cupti.h>

#include "sim/base/status.h"

namespace dtsim::profiler {

// "cuptiActivityEnable(...) failed: CUPTI_ERROR_NOT_INITIALIZED (…)".
Error CuptiError(const char* call, CUptiResult result);

// The CUPTI API version of the library loaded at run time (cuptiGetVersion). Needs no GPU.
Expected<uint32_t> CuptiRuntimeVersion();

// The CUPTI API version this code was compiled against.
constexpr uint32_t CuptiHeaderVersion() { return CUPTI_API_VERSION; }

}  // namespace dtsim::profiler

#define DTSIM_CUPTI_CALL(call)                                          \
  do {                                                                  \
    const CUptiResult dtsim_cupti_result_ = (call);                     \
    if (dtsim_cupti_result_ != CUPTI_SUCCESS) {                         \
      return ::dtsim::profiler::CuptiError(#call, dtsim_cupti_result_); \
    }                                                                   \
  } while (false)
