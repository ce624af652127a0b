#include "strategies/stage_balance.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "strategies/pass_times.h"

namespace dtsim::strategies {

// Contiguous layers per stage minimizing the slowest stage's work per micro-batch (its
// forward, backward and recompute on the compute stream plus a grid's SUMMA traffic), the
// embedding on the first stage and the output layer on the last: the linear partition problem,
// solved exactly by dynamic programming over (stage, layers so far), O(p·L²). Each stage gets at
// least one layer; among equally slow splits the one giving earlier stages fewer layers wins
// (under 1F1B they hold more micro-batches' activations).
Expected<std::vector<int>> BalanceStageLayers(const ResolvedConfig& config,
                                              const models::OpCostModel& cost) {
  const models::TransformerSpec& spec = config.model.transformer;
  const int p = config.plan.pipeline;
  const int layers = spec.layers;
  if (p > layers) {
    return Error(fmt::format("{} pipeline stages need at least as many layers ({})", p, layers),
                 "parallelism.pipeline.layers", "balanced");
  }
  ResolvedConfig uniform = config;  // the same plan with uniform stages (still resolved)
  uniform.plan.layer_split = ParallelPlan::LayerSplit::kUniform;
  uniform.plan.chunk_layers.clear();
  DTSIM_ASSIGN_OR_RETURN(const PassTimes times, PricePassTimes(uniform, cost));
  // A piece's time on the stage: its compute stream's (on a grid, with the SUMMA waits in it),
  // or its "tp" stream's where that is longer.
  const auto work = [](const PieceTimes& piece) {
    return std::max(piece.forward + piece.backward + piece.recompute,
                    piece.forward_grid + piece.backward_grid + piece.recompute_grid)
        .ns();
  };
  std::vector<int64_t> prefix(static_cast<size_t>(layers) + 1, 0);
  for (int i = 0; i < layers; ++i) {
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + work(times.Layer(spec, i));
  }
  const int64_t embedding = work(times.embedding);
  // The multi-token-prediction modules run with the output layer on the last stage.
  int64_t output = work(times.output);
  for (int index = layers; index < spec.AllLayers(); ++index)
    output += work(times.Layer(spec, index));
  // slowest[s][i]: the least possible slowest stage when stages 0..s hold layers [0, i);
  // cut[s][i]: where stage s starts in that split.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  const auto n = static_cast<size_t>(layers) + 1;
  std::vector<std::vector<int64_t>> slowest(static_cast<size_t>(p), std::vector<int64_t>(n, kNone));
  std::vector<std::vector<int>> cut(static_cast<size_t>(p), std::vector<int>(n, 0));
  const auto stage_work = [&](int s, int from, int to) {
    return prefix[static_cast<size_t>(to)] - prefix[static_cast<size_t>(from)] +
           (s == 0 ? embedding : 0) + (s == p - 1 ? output : 0);
  };
  for (int i = 1; i <= layers; ++i) slowest[0][static_cast<size_t>(i)] = stage_work(0, 0, i);
  for (int s = 1; s < p; ++s) {
    for (int i = s + 1; i <= layers - (p - 1 - s); ++i) {
      for (int j = s; j < i; ++j) {  // stage s holds [j, i); the first j wins a tie
        const int64_t before = slowest[static_cast<size_t>(s - 1)][static_cast<size_t>(j)];
        if (before == kNone) continue;
        const int64_t slow = std::max(before, stage_work(s, j, i));
        if (slow < slowest[static_cast<size_t>(s)][static_cast<size_t>(i)]) {
          slowest[static_cast<size_t>(s)][static_cast<size_t>(i)] = slow;
          cut[static_cast<size_t>(s)][static_cast<size_t>(i)] = j;
        }
      }
    }
  }
  std::vector<int> counts(static_cast<size_t>(p));
  int end = layers;
  for (int s = p - 1; s > 0; --s) {
    const int start = cut[static_cast<size_t>(s)][static_cast<size_t>(end)];
    counts[static_cast<size_t>(s)] = end - start;
    end = start;
  }
  counts[0] = end;
  return counts;
}

}  // namespace dtsim::strategies
