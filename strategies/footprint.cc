#include "strategies/footprint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace dtsim::strategies {

Footprint EstimateFootprint(const ResolvedConfig& config) {
  const ParallelPlan& plan = config.plan;
  const bool transformer = config.model.family == models::ModelFamily::kTransformer;
  Footprint footprint;
  // Symmetric ranks simulate one data-parallel replica and one tensor-parallel peer per stage.
  footprint.simulated_ranks =
      config.ranks == RanksMode::kSymmetric ? int64_t{plan.pipeline} : int64_t{plan.world()};
  footprint.microbatches = config.Microbatches();
  // Each rank of a stage runs that stage's layers: summed over the stages, every layer once
  // per rank of a stage.
  const double layers = transformer ? std::max(1, config.model.transformer.layers) : 1;
  const double ranks_per_stage =
      static_cast<double>(footprint.simulated_ranks) / std::max(1, transformer ? plan.pipeline : 1);
  footprint.tasks = ranks_per_stage * static_cast<double>(footprint.microbatches) * 2 * layers;
  footprint.bytes = footprint.tasks * kBytesPerTask;
  return footprint;
}

int64_t DefaultMaxMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{16} << 30;
  return static_cast<int64_t>(pages) * page_size / 4 * 3;
}

Status CheckFootprint(const ResolvedConfig& config, int64_t max_memory) {
  if (max_memory <= 0) max_memory = DefaultMaxMemory();
  const Footprint footprint = EstimateFootprint(config);
  if (footprint.bytes <= static_cast<double>(max_memory)) return Status::Ok();
  const double gib = static_cast<double>(int64_t{1} << 30);
  return Error(
      fmt::format("the simulation would need at least {:.4g} GiB, over the {:.3g} GiB allowed "
                  "(--max-memory): {} simulated ranks × {} micro-batches × forward and backward "
                  "of their layers make at least {:.3g} tasks of ~{} bytes. Simulate \"ranks\": "
                  "\"symmetric\", fewer micro-batches (a larger micro_batch or a smaller "
                  "global_batch), or allow more memory",
                  footprint.bytes / gib, static_cast<double>(max_memory) / gib,
                  footprint.simulated_ranks, footprint.microbatches, footprint.tasks,
                  kBytesPerTask),
      "simulation");
}

}  // namespace dtsim::strategies
