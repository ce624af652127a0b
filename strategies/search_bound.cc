#include "strategies/search_bound.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace dtsim::strategies {
namespace {

// ns × ratio, at most the largest time.
int64_t Scaled(int64_t ns, double ratio) {
  const double scaled = static_cast<double>(ns) * ratio;
  return scaled >= 9.0e18 ? std::numeric_limits<int64_t>::max()
                          : static_cast<int64_t>(std::llround(scaled));
}

}  // namespace

SpreadOrder::SpreadOrder(size_t n) : n_(n) {
  if (n < 3) return;
  stride_ = static_cast<uint64_t>(static_cast<double>(n) * 0.6180339887498949);
  while (std::gcd(stride_, n_) != 1) ++stride_;
}

TopTimes::TopTimes(size_t k) : k_(std::max<size_t>(k, 1)) {}

void TopTimes::Add(int64_t ns) {
  const std::lock_guard lock(mutex_);
  const auto at = std::lower_bound(times_.begin(), times_.end(), ns);
  if (at != times_.end() && *at == ns) return;
  times_.insert(at, ns);
  if (times_.size() > k_) times_.pop_back();
  if (times_.size() == k_) kth_.store(times_.back(), std::memory_order_relaxed);
}

std::vector<int64_t> TopTimes::Times() const {
  const std::lock_guard lock(mutex_);
  return times_;
}

SimulationForecast::SimulationForecast(std::vector<int64_t> bounds) : bounds_(std::move(bounds)) {}

void SimulationForecast::Simulated(int64_t bound_ns, int64_t time_ns) {
  if (bound_ns <= 0) return;
  const double ratio = static_cast<double>(time_ns) / static_cast<double>(bound_ns);
  const std::lock_guard lock(mutex_);
  ratios_.insert(std::upper_bound(ratios_.begin(), ratios_.end(), ratio), ratio);
}

double SimulationForecast::TypicalRatio() const {
  const std::lock_guard lock(mutex_);
  if (ratios_.empty()) return 1.0;
  return ratios_[(ratios_.size() - 1) / 4];
}

size_t SimulationForecast::StillToSimulate(size_t reached, const TopTimes& best) const {
  reached = std::min(reached, bounds_.size());
  const auto next = bounds_.begin() + static_cast<std::ptrdiff_t>(reached);
  // The K-th smallest of the times so far and the next plans' predicted times (ascending, as
  // their bounds are), merged.
  const std::vector<int64_t> times = best.Times();
  const double ratio = TypicalRatio();
  int64_t kth = best.Kth();
  size_t taken = 0;
  auto time = times.begin();
  auto bound = next;
  while (taken < best.k() && (time != times.end() || bound != bounds_.end())) {
    const int64_t predicted =
        bound != bounds_.end() ? Scaled(*bound, ratio) : std::numeric_limits<int64_t>::max();
    int64_t smallest = predicted;
    if (time != times.end() && *time <= predicted) {
      smallest = *time++;
    } else {
      ++bound;
    }
    if (++taken == best.k()) kth = std::min(kth, smallest);
  }
  return static_cast<size_t>(std::upper_bound(next, bounds_.end(), kth) - next);
}

}  // namespace dtsim::strategies
