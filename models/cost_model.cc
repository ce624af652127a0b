#include "models/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "sim/base/registry.h"
#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

constexpr std::array<std::string_view, kCostSourceCount> kSourceNames = {"measured", "interpolated",
                                                                         "roofline"};

DurationNs FromSeconds(double seconds) {
  return std::max(DurationNs(1), ClampedNs(std::round(seconds * 1e9)));
}

double Dim(const traces::OpSignature& signature, std::string_view name) {
  return static_cast<double>(signature.Dim(name));
}

// The quantity an op family's time grows with (see the class comment).
double Work(const traces::OpSignature& s) {
  if (s.op == "gemm")
    return Dim(s, "m") * Dim(s, "n") * Dim(s, "k") * std::max(1.0, Dim(s, "batch"));
  if (s.op.starts_with("flash_attention")) {
    return Dim(s, "batch") * Dim(s, "heads") * Dim(s, "seq") * Dim(s, "seq") * Dim(s, "head_dim");
  }
  if (s.op.starts_with("conv2d")) {
    const double out = Dim(s, "size") / Dim(s, "stride");
    return Dim(s, "batch") * Dim(s, "in_channels") * Dim(s, "out_channels") * out * out *
           Dim(s, "kernel") * Dim(s, "kernel");
  }
  double work = 1;
  for (const auto& [name, value] : s.dims) work *= static_cast<double>(value);
  return work;
}

// Dimensions that select a different kernel rather than scale one: never interpolated across.
bool IsCategorical(std::string_view dim) {
  return dim == "causal" || dim == "stride" || dim == "kernel";
}

bool SameShapeKind(const traces::OpSignature& a, const traces::OpSignature& b) {
  if (a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i].first != b.dims[i].first) return false;
    if (IsCategorical(a.dims[i].first) && a.dims[i].second != b.dims[i].second) return false;
  }
  return true;
}

struct Neighbor {
  double distance;  // squared, in log-dimension space
  const traces::MeasuredOp* op;
};

// The family members comparable with `signature`, or empty when the signature lies outside
// their range in some dimension (interpolation only).
std::vector<Neighbor> Neighbors(const traces::OpCostTable& table,
                                const traces::OpSignature& signature) {
  std::vector<Neighbor> neighbors;
  std::vector<std::pair<double, double>> range(signature.dims.size(), {INFINITY, -INFINITY});
  for (uint32_t index : table.Family(signature)) {
    const traces::MeasuredOp& measured = table.ops()[index];
    if (!SameShapeKind(measured.signature, signature)) continue;
    double distance = 0;
    for (size_t d = 0; d < signature.dims.size(); ++d) {
      const auto value = static_cast<double>(measured.signature.dims[d].second);
      range[d] = {std::min(range[d].first, value), std::max(range[d].second, value)};
      const double delta =
          std::log(value) - std::log(static_cast<double>(signature.dims[d].second));
      distance += delta * delta;
    }
    neighbors.push_back({distance, &measured});
  }
  for (size_t d = 0; d < signature.dims.size(); ++d) {
    const auto value = static_cast<double>(signature.dims[d].second);
    if (value < range[d].first || value > range[d].second) return {};
  }
  return neighbors;
}

}  // namespace

std::string_view CostSourceName(CostSource source) {
  return kSourceNames[static_cast<size_t>(source)];
}

namespace {

struct RooflineTimes {
  double compute = 0;  // seconds
  double memory = 0;
};

// The efficiency curve of an op's tensor-core work: flash attention's own, forward or
// backward, where measured on the GPU; the GEMM curve of the op's dtype otherwise.
const EfficiencyCurve& TensorCoreCurve(const GpuSpec& gpu, const Op& op) {
  if (op.kind == OpKind::kFlashAttention) {
    const std::optional<EfficiencyCurve>& curve =
        op.pass == Pass::kBackward ? gpu.attention_backward_efficiency : gpu.attention_efficiency;
    if (curve) return *curve;
  }
  return gpu.MatrixEfficiency(op.dtype);
}

// The share of its burst speed a compute-bound op keeps at the power limit: flash attention's
// own where measured, the GPU's otherwise.
double PowerLimitedShare(const GpuSpec& gpu, const Op& op) {
  return gpu.PowerLimitedShare(op.kind == OpKind::kFlashAttention);
}

RooflineTimes RooflineSeconds(const GpuSpec& gpu, const Op& op) {
  RooflineTimes times;
  if (op.flops > 0) {
    // At the power limit the SM clocks, and with them every compute rate, drop to
    // power_limited_compute of what the curves (timed in bursts) give; the ramp stays.
    const double matrix = gpu.MatrixPeak(op.dtype).flop_per_second();
    const bool on_tensor_cores = op.matmul && matrix > 0;
    const double sustained =
        (on_tensor_cores ? matrix : gpu.vector_peak.flop_per_second()) * PowerLimitedShare(gpu, op);
    times.compute = on_tensor_cores ? TensorCoreCurve(gpu, op).TimeSeconds(op.flops, sustained)
                                    : op.flops / sustained;
  }
  if (op.bytes > 0) {
    times.memory =
        gpu.memory_efficiency.TimeSeconds(op.bytes, gpu.memory_bandwidth.bytes_per_second());
  }
  return times;
}

DurationNs PowerLimited(const GpuSpec& gpu, const traces::OpCostTable& table, const Op& op,
                        DurationNs measured) {
  const double share = PowerLimitedShare(gpu, op);
  if (table.timing() != traces::OpTiming::kIsolated || share >= 1) return measured;
  const RooflineTimes roofline = RooflineSeconds(gpu, op);
  if (roofline.compute < roofline.memory) return measured;
  return FromSeconds(measured.ToSecondsDouble() / share);
}

}  // namespace

std::optional<OpCost> RooflineCostModel::Price(const Op& op) const {
  const RooflineTimes times = RooflineSeconds(gpu_, op);
  return OpCost{FromSeconds(std::max(times.compute, times.memory)) + gpu_.launch_overhead,
                CostSource::kRoofline};
}

std::optional<OpCost> MeasuredCostModel::Price(const Op& op) const {
  const traces::MeasuredOp* measured = table_->Find(op.signature);
  if (measured == nullptr) return std::nullopt;
  return OpCost{PowerLimited(gpu_, *table_, op, measured->duration), CostSource::kMeasured};
}

std::optional<OpCost> InterpolatedCostModel::Price(const Op& op) const {
  std::vector<Neighbor> neighbors = Neighbors(*table_, op.signature);
  if (neighbors.empty()) return std::nullopt;
  const size_t nearest = std::min<size_t>(4, neighbors.size());
  std::partial_sort(neighbors.begin(), neighbors.begin() + static_cast<ptrdiff_t>(nearest),
                    neighbors.end(),
                    [](const Neighbor& a, const Neighbor& b) { return a.distance < b.distance; });
  if (neighbors.front().distance == 0) {
    return OpCost{PowerLimited(gpu_, *table_, op, neighbors.front().op->duration),
                  CostSource::kInterpolated};
  }
  double weights = 0;
  double throughput = 0;  // work per second
  for (size_t i = 0; i < nearest; ++i) {
    const double weight = 1 / neighbors[i].distance;
    weights += weight;
    throughput +=
        weight * Work(neighbors[i].op->signature) / neighbors[i].op->duration.ToSecondsDouble();
  }
  const DurationNs interpolated = FromSeconds(Work(op.signature) / (throughput / weights));
  return OpCost{PowerLimited(gpu_, *table_, op, interpolated), CostSource::kInterpolated};
}

std::optional<OpCost> ChainCostModel::Price(const Op& op) const {
  for (const auto& model : models_) {
    if (std::optional<OpCost> cost = model->Price(op)) return cost;
  }
  return std::nullopt;
}

std::optional<OpCost> RecordingCostModel::Price(const Op& op) const {
  const auto [it, inserted] = index_.emplace(op.signature.Key(), recorded_.size());
  if (inserted) recorded_.push_back({op.signature, op.name, 0});
  ++recorded_[it->second].count;
  return inner_->Price(op);
}

void CostSourceTally::Add(const OpCost& cost, int64_t count) {
  time_[static_cast<size_t>(cost.source)] += cost.duration * count;
  ops_[static_cast<size_t>(cost.source)] += count;
}

double CostSourceTally::Share(CostSource source) const {
  DurationNs total;
  for (DurationNs time : time_) total += time;
  return total.ns() == 0 ? 0.0
                         : static_cast<double>(time(source).ns()) / static_cast<double>(total.ns());
}

namespace {

std::unique_ptr<OpCostModel> MakeRoofline(const GpuSpec& gpu, const traces::OpCostTable*) {
  return std::make_unique<RooflineCostModel>(gpu);
}

std::unique_ptr<OpCostModel> MakeMeasured(const GpuSpec& gpu, const traces::OpCostTable* table) {
  return std::make_unique<MeasuredCostModel>(gpu, *table);
}

std::unique_ptr<OpCostModel> MakeInterpolated(const GpuSpec& gpu,
                                              const traces::OpCostTable* table) {
  return std::make_unique<InterpolatedCostModel>(gpu, *table);
}

std::unique_ptr<OpCostModel> MakeChain(const GpuSpec& gpu, const traces::OpCostTable* table) {
  if (table == nullptr) return MakeRoofline(gpu, table);
  std::vector<std::unique_ptr<OpCostModel>> chain;
  chain.push_back(std::make_unique<MeasuredCostModel>(gpu, *table));
  chain.push_back(std::make_unique<InterpolatedCostModel>(gpu, *table));
  chain.push_back(std::make_unique<RooflineCostModel>(gpu));
  return std::make_unique<ChainCostModel>(std::move(chain));
}

constexpr std::array<CostModelEntry, 4> kCostModels = {{
    {.name = "chain",
     .summary = "measured, else interpolated, else roofline, op by op",
     .needs_table = false,
     .make = MakeChain},
    {.name = "measured",
     .summary = "the table's time for the op's exact signature",
     .needs_table = true,
     .make = MakeMeasured},
    {.name = "interpolated",
     .summary = "the table's times for the op's kind, interpolated in its size",
     .needs_table = true,
     .make = MakeInterpolated},
    {.name = "roofline",
     .summary = "max(FLOPs / achieved compute, bytes / achieved memory bandwidth)",
     .needs_table = false,
     .make = MakeRoofline},
}};

constexpr std::array kCostModelNames = RegistryNames(kCostModels);

}  // namespace

std::span<const CostModelEntry> CostModels() { return kCostModels; }

std::span<const std::string_view> CostModelNames() { return kCostModelNames; }

const CostModelEntry& DefaultCostModel() { return kCostModels[0]; }

Expected<const CostModelEntry*> FindCostModel(std::string_view name) {
  return FindInRegistry<CostModelEntry>(kCostModels, kCostModelNames, name, "cost model");
}

Expected<std::unique_ptr<OpCostModel>> MakeCostModel(std::string_view name, const GpuSpec& gpu,
                                                     const traces::OpCostTable* table) {
  DTSIM_ASSIGN_OR_RETURN(const CostModelEntry* entry, FindCostModel(name));
  if (entry->needs_table && table == nullptr) {
    return Error(fmt::format("cost model \"{}\" needs a measured op-cost table (a profile)", name),
                 "", Quote(name));
  }
  return entry->make(gpu, table);
}

namespace {

// Least squares of the relative error of t = a + b·F over (FLOPs, seconds) points: minimize
// Σ ((a + b·F − t) / t)², i.e. weights 1/t² (sizes span orders of magnitude; absolute residuals
// would let the largest kernels decide alone). Normal equations:
//   a·Σw + b·ΣwF = Σwt,   a·ΣwF + b·ΣwF² = ΣwFt.
// Then max = 1 / (b · peak) and ramp = a.
Expected<EfficiencyCurve> FitCurve(const std::vector<std::pair<double, double>>& points,
                                   double peak, std::string_view what) {
  double sw = 0, swf = 0, swt = 0, swff = 0, swft = 0;
  for (const auto& [flops, seconds] : points) {
    const double w = 1 / (seconds * seconds);
    sw += w;
    swf += w * flops;
    swt += w * seconds;
    swff += w * flops * flops;
    swft += w * flops * seconds;
  }
  const double determinant = sw * swff - swf * swf;
  if (points.size() < 2 || !(determinant > 0)) {
    return Error(fmt::format("need {} of at least two sizes to fit a curve (found {})", what,
                             points.size()));
  }
  const double slope = (sw * swft - swf * swt) / determinant;  // seconds per FLOP
  const double intercept = (swt - slope * swf) / sw;
  const double max = 1 / (slope * peak);
  if (!(slope > 0) || max > 1) {
    return Error(
        fmt::format("the fitted efficiency of the {} ({:.3f} of the peak) is not in (0, 1]: "
                    "are the table and the GPU the same?",
                    what, max));
  }
  return EfficiencyCurve{max, DurationNs(std::max<int64_t>(0, std::llround(intercept * 1e9)))};
}

}  // namespace

Expected<EfficiencyCurve> FitMatrixEfficiency(const traces::OpCostTable& table, const GpuSpec& gpu,
                                              DType dtype) {
  const traces::OpCostTable* const tables[] = {&table};
  return FitMatrixEfficiency(tables, gpu, dtype);
}

Expected<EfficiencyCurve> FitMatrixEfficiency(std::span<const traces::OpCostTable* const> tables,
                                              const GpuSpec& gpu, DType dtype) {
  const double peak = gpu.MatrixPeak(dtype).flop_per_second();
  if (peak <= 0) {
    return Error(fmt::format("{} has no matrix peak for {}", gpu.name, DTypeName(dtype)));
  }
  std::vector<std::pair<double, double>> points;
  for (const traces::OpCostTable* table : tables) {
    for (const traces::MeasuredOp& op : table->ops()) {
      if (op.signature.op != "gemm" || op.signature.dtype != dtype) continue;
      points.emplace_back(2 * Work(op.signature), op.duration.ToSecondsDouble());
    }
  }
  return FitCurve(points, peak, fmt::format("{} GEMMs", DTypeName(dtype)));
}

Expected<EfficiencyCurve> FitAttentionEfficiency(std::span<const traces::OpCostTable* const> tables,
                                                 const GpuSpec& gpu, DType dtype, bool backward) {
  const double peak = gpu.MatrixPeak(dtype).flop_per_second();
  if (peak <= 0) {
    return Error(fmt::format("{} has no matrix peak for {}", gpu.name, DTypeName(dtype)));
  }
  const std::string_view family = backward ? "flash_attention_bwd" : "flash_attention";
  std::vector<std::pair<double, double>> points;
  for (const traces::OpCostTable* table : tables) {
    for (const traces::MeasuredOp& op : table->ops()) {
      if (op.signature.op != family || op.signature.dtype != dtype) continue;
      points.emplace_back(FlashAttentionFlops(op.signature, backward),
                          op.duration.ToSecondsDouble());
    }
  }
  return FitCurve(points, peak, fmt::format("{} {} kernels", DTypeName(dtype), family));
}

Expected<OpCost> OpCostModel::PriceOrError(const Op& op, std::string_view what) const {
  std::optional<OpCost> cost = Price(op);
  if (!cost) {
    return Error(fmt::format("cost model \"{}\" cannot price {} {} ({})", name(), what, op.name,
                             op.signature.Key()));
  }
  return *cost;
}

}  // namespace dtsim::models
