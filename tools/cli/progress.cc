#include "tools/cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

namespace dtsim::cli {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(200);

}  // namespace

Progress Progress::ForTerminal() { return Progress(stderr, isatty(fileno(stderr)) == 1); }

std::string Progress::FormatSeconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 3600) return fmt::format("{} min {:02d} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02d} min", whole / 3600, whole % 3600 / 60);
}

void Progress::Update(std::string_view phase, size_t done, size_t total) {
  if (!enabled_) return;
  const std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  if (phase != phase_) {
    if (drawn_) std::fputc('\n', stream_);
    phase_ = phase;
    phase_start_ = now;
    drawn_ = false;
  } else if ((done < total && now - last_draw_ < kRedrawInterval) ||
             (done == drawn_done_ && total == drawn_total_)) {
    return;  // throttled; the end of a step is drawn at once, but once
  }
  last_draw_ = now;
  drawn_done_ = done;
  drawn_total_ = total;
  const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const double left = rate > 0 ? static_cast<double>(total - done) / rate : NAN;
  const std::string line = fmt::format(
      "\r{}: {} of {} ({:.0f}%), {:.1f}/s, {} left\033[K", phase_, done, total,
      total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0, rate,
      done >= total ? FormatSeconds(0) : FormatSeconds(left));
  std::fputs(line.c_str(), stream_);
  std::fflush(stream_);
  drawn_ = true;
}

void Progress::Finish() {
  if (!enabled_) return;
  const std::lock_guard lock(mutex_);
  if (drawn_) std::fputc('\n', stream_);
  drawn_ = false;
  phase_.clear();
}

}  // namespace dtsim::cli
