// A parallel loop over indices on a fixed number of threads, for embarrassingly parallel work
// (`dtsim search` and `dtsim sweep` simulate one config per index). Indices are handed out in
// order from a shared counter, so cheap and expensive items balance themselves; the caller's
// thread takes part.
#pragma once

#include <cstddef>
#include <functional>

namespace dtsim {

// The most threads ParallelFor starts, whatever it is asked (a thread per index of a large
// search would exhaust the process's threads); the command line refuses more.
inline constexpr int kMaxThreads = 1024;

// Threads to use when the user gives none: the hardware's concurrency (at least 1).
int DefaultThreads();

// Calls body(index) once for every index in [0, count) on up to `threads` threads (at most
// kMaxThreads) and returns
// when all calls have returned. `body` must be safe to call concurrently; it must not throw.
void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body);

}  // namespace dtsim
