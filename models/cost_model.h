// Op cost models, registered by name (docs/models.md, "Cost models"): measured (exact op
// signature in an op-cost table), interpolated (the same op family measured at nearby
// shapes), roofline (GPU peaks with efficiency curves), and the chain that tries them in that
// order and records which one priced each op.
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/gpu.h"
#include "models/ops.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "traces/op_cost_table.h"

namespace dtsim::models {

enum class CostSource : uint8_t { kMeasured, kInterpolated, kRoofline };
inline constexpr int kCostSourceCount = 3;
std::string_view CostSourceName(CostSource source);

struct OpCost {
  DurationNs duration;
  CostSource source = CostSource::kRoofline;
};

class OpCostModel {
 public:
  virtual ~OpCostModel() = default;
  virtual std::string_view name() const = 0;
  // The op's duration, or nullopt when this model cannot price it.
  virtual std::optional<OpCost> Price(const Op& op) const = 0;
  // Price, or an error naming the model, the op (as `what`, e.g. "op", "compression kernel")
  // and its signature.
  Expected<OpCost> PriceOrError(const Op& op, std::string_view what = "op") const;
  // Whether it prices from times taken inside a training run (an `in_run` op-cost table),
  // which already hold what the run's overlapped communication took from them (SM sharing).
  virtual bool TimedInRun() const { return false; }
};

// max(compute, memory) + launch overhead, where compute = FLOPs over the matrix peak of the
// op's dtype (the vector peak for non-matmul ops and dtypes without tensor-core support) times
// the GPU's power_limited_compute, and memory = bytes over HBM bandwidth, each through the
// GPU's efficiency curve.
class RooflineCostModel final : public OpCostModel {
 public:
  explicit RooflineCostModel(GpuSpec gpu) : gpu_(std::move(gpu)) {}
  std::string_view name() const override { return "roofline"; }
  std::optional<OpCost> Price(const Op& op) const override;
  const GpuSpec& gpu() const { return gpu_; }

 private:
  GpuSpec gpu_;
};

// Exact signature lookup. The table must outlive the model. A table timed in isolation
// (traces::OpTiming::kIsolated) ran at boost clocks: an op the roofline finds compute-bound is
// slowed to the GPU's power_limited_compute share of that speed, as in a training step.
class MeasuredCostModel final : public OpCostModel {
 public:
  MeasuredCostModel(GpuSpec gpu, const traces::OpCostTable& table)
      : gpu_(std::move(gpu)), table_(&table) {}
  std::string_view name() const override { return "measured"; }
  std::optional<OpCost> Price(const Op& op) const override;
  bool TimedInRun() const override { return table_->timing() == traces::OpTiming::kInRun; }

 private:
  GpuSpec gpu_;
  const traces::OpCostTable* table_;
};

// Within an op family (same op and dtype, same dimension names), interpolates the achieved
// throughput, work / time, over the measured points: inverse-squared-distance weights over the
// nearest four in log-dimension space, exact at a measured point. Work is the family's cost
// driver (GEMM m·n·k·batch, flash attention batch·heads·seq²·head_dim, convolution
// batch·in·out·(size/stride)²·kernel², otherwise the product of the dimensions). Only inside
// the measured range of every dimension: it never extrapolates (nullopt outside). Power
// limited as MeasuredCostModel is.
class InterpolatedCostModel final : public OpCostModel {
 public:
  InterpolatedCostModel(GpuSpec gpu, const traces::OpCostTable& table)
      : gpu_(std::move(gpu)), table_(&table) {}
  std::string_view name() const override { return "interpolated"; }
  std::optional<OpCost> Price(const Op& op) const override;
  bool TimedInRun() const override { return table_->timing() == traces::OpTiming::kInRun; }

 private:
  GpuSpec gpu_;
  const traces::OpCostTable* table_;
};

// Tries each model in order; the first that prices an op wins.
class ChainCostModel final : public OpCostModel {
 public:
  explicit ChainCostModel(std::vector<std::unique_ptr<OpCostModel>> models)
      : models_(std::move(models)) {}
  std::string_view name() const override { return "chain"; }
  std::optional<OpCost> Price(const Op& op) const override;
  // Any of its models: their ops run on one GPU together.
  bool TimedInRun() const override {
    return std::any_of(models_.begin(), models_.end(),
                       [](const auto& model) { return model->TimedInRun(); });
  }

 private:
  std::vector<std::unique_ptr<OpCostModel>> models_;
};

// Prices through `inner` and records every distinct signature asked about, with how often
// and the name of the first op that had it: the ops a plan needs measured (`dtsim simulate
// --op-list`, which tools/op_benchmark.py runs on a GPU). `inner` must outlive it.
class RecordingCostModel final : public OpCostModel {
 public:
  struct Recorded {
    traces::OpSignature signature;
    std::string example;  // the first op priced with it ("attn.qkv")
    int64_t count = 0;
  };

  explicit RecordingCostModel(const OpCostModel& inner) : inner_(&inner) {}
  std::string_view name() const override { return inner_->name(); }
  std::optional<OpCost> Price(const Op& op) const override;
  bool TimedInRun() const override { return inner_->TimedInRun(); }
  // In the order first asked about.
  const std::vector<Recorded>& recorded() const { return recorded_; }

 private:
  const OpCostModel* inner_;
  // Pricing is const for callers; recording is bookkeeping beside it.
  mutable std::vector<Recorded> recorded_;
  mutable std::unordered_map<std::string, size_t> index_;
};

// What share of the priced time each source priced (result.json's cost-source shares).
class CostSourceTally {
 public:
  void Add(const OpCost& cost, int64_t count = 1);
  DurationNs time(CostSource source) const { return time_[static_cast<size_t>(source)]; }
  int64_t ops(CostSource source) const { return ops_[static_cast<size_t>(source)]; }
  double Share(CostSource source) const;

 private:
  std::array<DurationNs, kCostSourceCount> time_{};
  std::array<int64_t, kCostSourceCount> ops_{};
};

// The cost models, one entry each: the config's `simulation.cost_model` is read against them
// and a model is made only from its entry (docs/models.md). "chain" (measured ▸ interpolated ▸
// roofline) is the default; without a table it has nothing to look up and is the roofline.
struct CostModelEntry {
  std::string_view name;
  std::string_view summary;
  bool needs_table = false;  // a measured op-cost table (a profile) is required
  // `table` is null when no profile was given (only for entries that do not need one).
  std::unique_ptr<OpCostModel> (*make)(const GpuSpec& gpu,
                                       const traces::OpCostTable* table) = nullptr;
};
std::span<const CostModelEntry> CostModels();
std::span<const std::string_view> CostModelNames();  // in registry order
const CostModelEntry& DefaultCostModel();            // chain
// The entry named `name`; the error lists the registered names with the nearest.
Expected<const CostModelEntry*> FindCostModel(std::string_view name);
// FindCostModel, then the entry's model; an error if it needs a table and `table` is null.
Expected<std::unique_ptr<OpCostModel>> MakeCostModel(std::string_view name, const GpuSpec& gpu,
                                                     const traces::OpCostTable* table);

// Fits the matrix efficiency curve of `gpu` for `dtype` to the table's GEMMs by least squares
// of the relative error of time = ramp + FLOPs / (peak · max) (the curve's time form,
// EfficiencyCurve): the curve of the table's conditions (bursts at boost clock for tables timed
// in isolation; power_limited_compute is separate). Errors with
// fewer than two distinct GEMM sizes or a fit outside 0 < max <= 1.
Expected<EfficiencyCurve> FitMatrixEfficiency(const traces::OpCostTable& table, const GpuSpec& gpu,
                                              DType dtype);
// The same fit over the GEMMs of several tables of one GPU.
Expected<EfficiencyCurve> FitMatrixEfficiency(std::span<const traces::OpCostTable* const> tables,
                                              const GpuSpec& gpu, DType dtype);
// The same fit for `dtype`'s flash attention kernels, forward or (`backward`) backward, over the
// FLOPs each executes (FlashAttentionFlops), in one or more tables (GPUs of one die: the kernels
// are compute-bound): the GPU's attention_efficiency and attention_backward_efficiency.
Expected<EfficiencyCurve> FitAttentionEfficiency(std::span<const traces::OpCostTable* const> tables,
                                                 const GpuSpec& gpu, DType dtype, bool backward);

}  // namespace dtsim::models
