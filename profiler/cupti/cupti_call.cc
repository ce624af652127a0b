#include "profiler/cupti/cupti_call.h"

namespace dtsim::profiler {

Error CuptiError(const char* call, CUptiResult result) {
  const char* reason = nullptr;
  if (cuptiGetResultString(result, &reason) != CUPTI_SUCCESS || reason == nullptr) {
    reason = "unknown CUPTI error";
  }
  return Error(std::string(call) + " failed: " + reason);
}

Expected<uint32_t> CuptiRuntimeVersion() {
  uint32_t version = 0;
  DTSIM_CUPTI_CALL(cuptiGetVersion(&version));
  return version;
}

}  // namespace dtsim::profiler
