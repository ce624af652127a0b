#include "profiler/gpu_probe.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace dtsim::profiler {
namespace {

// The driver API's signatures, declared here so no CUDA header is needed (CUresult is an int
// enum; 0 is CUDA_SUCCESS).
using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using CuDriverGetVersion = int (*)(int*);
using CuGetErrorString = int (*)(int, const char**);

class DriverLibrary {
 public:
  explicit DriverLibrary(void* handle) : handle_(handle) {}
  ~DriverLibrary() { dlclose(handle_); }
  DriverLibrary(const DriverLibrary&) = delete;
  DriverLibrary& operator=(const DriverLibrary&) = delete;

  template <typename Function>
  Function Find(const char* name) const {
    return reinterpret_cast<Function>(dlsym(handle_, name));
  }

  // "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
  std::string Describe(int result) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (const auto get_name = Find<CuGetErrorString>("cuGetErrorName")) get_name(result, &name);
    if (const auto get_text = Find<CuGetErrorString>("cuGetErrorString")) get_text(result, &text);
    return fmt::format("{} ({}): {}", name ? name : "CUDA error", result,
                       text ? text : "no description");
  }

 private:
  void* handle_;
};

}  // namespace

Expected<CudaDriverInfo> ProbeCudaDriver(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    return Error(
        fmt::format("no NVIDIA driver: {} cannot be loaded ({}); is this a machine with "
                    "a GPU and its driver installed?",
                    library, reason ? reason : "unknown reason"));
  }
  const DriverLibrary driver(handle);
  const auto init = driver.Find<CuInit>("cuInit");
  const auto count = driver.Find<CuDeviceGetCount>("cuDeviceGetCount");
  const auto version = driver.Find<CuDriverGetVersion>("cuDriverGetVersion");
  if (init == nullptr || count == nullptr || version == nullptr) {
    return Error(fmt::format("{} is not a CUDA driver library (cuInit not found)", library));
  }
  if (const int result = init(0); result != 0) {
    return Error(fmt::format("the NVIDIA driver does not initialize: cuInit returned {}",
                             driver.Describe(result)));
  }
  CudaDriverInfo info;
  if (const int result = count(&info.devices); result != 0) {
    return Error(fmt::format("cuDeviceGetCount returned {}", driver.Describe(result)));
  }
  if (info.devices == 0) return Error("no CUDA-capable GPU: the driver sees 0 devices");
  version(&info.driver_version);
  return info;
}

}  // namespace dtsim::profiler
