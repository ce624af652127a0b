// The search's branch and bound, apart from the plans it is over: the K best times so far (a
// plan whose lower bound exceeds the K-th cannot enter the top K) and a forecast of how many
// plans the bound will still let through, for the progress line (docs/search.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

namespace dtsim::strategies {

// A permutation of [0, n) that visits it evenly: k ↦ k·s mod n, the stride s coprime to n and
// near n/φ (the golden ratio), so any prefix of the order samples the whole range.
class SpreadOrder {
 public:
  explicit SpreadOrder(size_t n);
  size_t operator()(size_t k) const { return n_ == 0 ? k : static_cast<size_t>(k * stride_ % n_); }

 private:
  uint64_t n_;
  uint64_t stride_ = 1;
};

// The K best times seen so far, shared by the threads simulating.
class TopTimes {
 public:
  explicit TopTimes(size_t k);

  int64_t Kth() const { return kth_.load(std::memory_order_relaxed); }

  // One slot per time: plans that simulate alike (the same time) are one row of the ranking
  // (RankPlans), so the K slots must hold K distinct times for the distinct top K to be exact.
  void Add(int64_t ns);

  // The times held, best first.
  std::vector<int64_t> Times() const;

  size_t k() const { return k_; }

 private:
  size_t k_;
  mutable std::mutex mutex_;
  std::vector<int64_t> times_;
  std::atomic<int64_t> kth_{std::numeric_limits<int64_t>::max()};
};

// How many plans the search will simulate, forecast while it runs. Plans are reached in order
// of their lower bound; one is simulated if its bound is at most the K-th best time when it is
// reached. The K-th best only falls, so counting the plans not yet reached whose bound is under
// the K-th best now over-counts until the best plans have been simulated — many times over
// when the best come late. The forecast predicts each plan not yet reached at its bound times
// the lower quartile of the ratios of simulated time to bound so far, takes the K-th best of those
// predictions and the times simulated, and counts the plans not yet reached whose bound is
// under it (never more than under the K-th best now). An estimate, not a bound: the total it
// gives may rise as well as fall.
class SimulationForecast {
 public:
  // `bounds`: every plan's lower bound, in the order the search reaches them (ascending).
  explicit SimulationForecast(std::vector<int64_t> bounds);

  // A plan was simulated: `time_ns` against its `bound_ns`.
  void Simulated(int64_t bound_ns, int64_t time_ns);

  // Of the plans after the first `reached`, how many will be simulated, given the K best times
  // so far.
  size_t StillToSimulate(size_t reached, const TopTimes& best) const;

 private:
  // The lower quartile of simulated time over bound so far (1 before any): the best plans are
  // those the bound comes closest to, so the top K is drawn from the low ratios.
  double TypicalRatio() const;

  std::vector<int64_t> bounds_;
  mutable std::mutex mutex_;
  std::vector<double> ratios_;  // sorted
};

}  // namespace dtsim::strategies
