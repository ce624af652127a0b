#include "sim/base/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace dtsim {

int DefaultThreads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t index = next++; index < count; index = next++) body(index);
  };
  const size_t helpers =
      std::min(count, static_cast<size_t>(std::clamp(threads, 1, kMaxThreads))) - (count > 0);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t i = 0; i < helpers; ++i) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace dtsim
