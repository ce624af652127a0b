// Progress of long runs (`dtsim search`, `dtsim sweep`) on stderr: the step, done of total,
// rate and time left, redrawn in place at most a few times a second — and nothing at all when
// stderr is not a terminal (batch jobs and pipes get clean logs).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace dtsim::cli {

class Progress {
 public:
  // Draws on `stream` when `enabled`; ForTerminal() enables it when stderr is a terminal.
  Progress(std::FILE* stream, bool enabled) : stream_(stream), enabled_(enabled) {}
  static Progress ForTerminal();
  ~Progress() { Finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Safe to call from any thread. A new `phase` restarts the rate and the estimate.
  void Update(std::string_view phase, size_t done, size_t total);
  // Ends the line being redrawn.
  void Finish();

  // "12.3 s", "4 min 05 s", "1 h 02 min".
  static std::string FormatSeconds(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* stream_;
  bool enabled_;
  std::mutex mutex_;
  std::string phase_;
  Clock::time_point phase_start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
  size_t drawn_done_ = 0;  // what the line shows now
  size_t drawn_total_ = 0;
};

}  // namespace dtsim::cli
