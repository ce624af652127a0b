#include "sim/base/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace dtsim {
namespace {

TEST(ParallelForTest, EveryIndexOnceOnAtMostTheThreadsAsked) {
  for (const int threads : {1, 3, 8}) {
    std::vector<std::atomic<int>> calls(1000);
    std::mutex mutex;
    std::set<std::thread::id> ids;
    ParallelFor(calls.size(), threads, [&](size_t i) {
      ++calls[i];
      const std::lock_guard<std::mutex> lock(mutex);
      ids.insert(std::this_thread::get_id());
    });
    for (const std::atomic<int>& count : calls) ASSERT_EQ(count, 1);
    EXPECT_LE(ids.size(), static_cast<size_t>(threads));
  }
  ParallelFor(0, 4, [](size_t) { FAIL() << "no index to call"; });
}

// A Python caller's threads=100000 (the command line refuses it) starts kMaxThreads at most.
// The first kMaxThreads + 1 indices hold their threads (up to a second) until that many
// distinct threads have taken one: with the cap they never do and the test takes a second;
// without it the next thread started breaks the wait, and the count fails the test.
TEST(ParallelForTest, NoMoreThanKMaxThreadsStart) {
  constexpr size_t kIndices = 3000;
  const size_t over = static_cast<size_t>(kMaxThreads) + 1;
  std::atomic<size_t> started{0};
  std::mutex mutex;
  std::condition_variable more;
  std::set<std::thread::id> ids;
  ParallelFor(kIndices, 100000, [&](size_t index) {
    std::unique_lock<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
    more.notify_all();
    if (index < over) {
      more.wait_for(lock, std::chrono::seconds(1), [&] { return ids.size() >= over; });
    }
    ++started;
  });
  EXPECT_EQ(started, kIndices);
  EXPECT_LE(ids.size(), static_cast<size_t>(kMaxThreads));
  EXPECT_GE(kMaxThreads, 1);
  // A negative or zero count of threads runs on the caller's thread alone.
  std::set<std::thread::id> alone;
  ParallelFor(10, -5, [&](size_t) { alone.insert(std::this_thread::get_id()); });
  EXPECT_EQ(alone, std::set<std::thread::id>{std::this_thread::get_id()});
}

}  // namespace
}  // namespace dtsim
