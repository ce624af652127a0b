#include "strategies/profile_fit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "models/cost_model.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

using traces::OpCostTable;

// One preset's tables.
struct PresetTables {
  models::GpuSpec gpu;
  std::vector<const OpCostTable*> tables;
  std::vector<std::string> paths;
  traces::OpTiming timing = traces::OpTiming::kIsolated;
};

// What a curve is fitted from: ops of one kind and dtype.
struct CurveOps {
  std::string_view op;  // "gemm", "flash_attention", "flash_attention_bwd"
  DType dtype;
  std::string_view what;  // "GEMMs", "flash attention forward kernels"
  CalibratedField max_field, ramp_field;
  bool attention = false;
};

int CountOps(const PresetTables& preset, std::string_view op, DType dtype) {
  int count = 0;
  for (const OpCostTable* table : preset.tables) {
    count += static_cast<int>(std::count_if(
        table->ops().begin(), table->ops().end(), [&](const traces::MeasuredOp& measured) {
          return measured.signature.op == op && measured.signature.dtype == dtype;
        }));
  }
  return count;
}

// The 16-bit dtype the table timed `op` in: bf16, else fp16 (where it has two or more).
DType SixteenBitDType(const PresetTables& preset, std::string_view op) {
  return CountOps(preset, op, DType::kBf16) >= 2 || CountOps(preset, op, DType::kFp16) < 2
             ? DType::kBf16
             : DType::kFp16;
}

std::vector<CurveOps> Curves(const PresetTables& preset) {
  return {
      {"gemm", SixteenBitDType(preset, "gemm"), "GEMMs", CalibratedField::kMatrixEfficiency,
       CalibratedField::kMatrixRamp},
      {"gemm", DType::kFp8, "GEMMs", CalibratedField::kFp8MatrixEfficiency,
       CalibratedField::kFp8MatrixRamp},
      {"flash_attention", SixteenBitDType(preset, "flash_attention"),
       "flash attention forward kernels", CalibratedField::kAttentionEfficiency,
       CalibratedField::kAttentionRamp, true},
      {"flash_attention_bwd", SixteenBitDType(preset, "flash_attention_bwd"),
       "flash attention backward kernels", CalibratedField::kAttentionBackwardEfficiency,
       CalibratedField::kAttentionBackwardRamp, true},
  };
}

Expected<models::EfficiencyCurve> Fit(const PresetTables& preset, const CurveOps& curve) {
  if (curve.attention) {
    return models::FitAttentionEfficiency(preset.tables, preset.gpu, curve.dtype,
                                          curve.op == "flash_attention_bwd");
  }
  return models::FitMatrixEfficiency(preset.tables, preset.gpu, curve.dtype);
}

// The curve's two constants, or nothing (with why in `skipped`) when the tables have fewer
// than two of its ops.
Status FitCurveConstants(const PresetTables& preset, const CurveOps& curve, ProfileFit& out) {
  const std::string files = fmt::format("{}", fmt::join(preset.paths, ", "));
  const int count = CountOps(preset, curve.op, curve.dtype);
  const std::string name = fmt::format("{}/{}", preset.gpu.name, FieldName(curve.max_field));
  if (count < 2) {
    out.skipped.push_back(fmt::format("{}: {} {} {} in {} (a curve needs two or more)", name, count,
                                      DTypeName(curve.dtype), curve.what, files));
    return Status::Ok();
  }
  Expected<models::EfficiencyCurve> fitted = Fit(preset, curve);
  if (!fitted.ok()) {
    return Error(fmt::format("{} (the op-cost table{} {})", std::move(fitted).error().ToString(),
                             preset.paths.size() == 1 ? "" : "s", files));
  }
  double max = fitted->max;
  if (preset.timing == traces::OpTiming::kInRun) {
    // Timed in a training step: at the power limit, where the roofline slows the burst curve.
    max /= preset.gpu.PowerLimitedShare(curve.attention);
    if (max > 1) {
      return Error(fmt::format(
          "the {} {} of {} ran at {:.3f} of the peak in the run, {:.3f} of it at boost clock "
          "(÷ the power-limited share {:.2f}): more than the peak; are the table and the GPU "
          "the same?",
          DTypeName(curve.dtype), curve.what, files, fitted->max, max,
          preset.gpu.PowerLimitedShare(curve.attention)));
    }
  }
  const std::string source = fmt::format("{} {} {} of {} ({})", count, DTypeName(curve.dtype),
                                         curve.what, files, traces::OpTimingName(preset.timing));
  for (const auto& [field, value] :
       {std::pair(curve.max_field, max),
        std::pair(curve.ramp_field, fitted->ramp.ToMicrosecondsDouble())}) {
    const auto [low, high] = FieldBounds(field);
    if (!(value >= low && value <= high)) {
      return Error(fmt::format("the fitted {} of {} ({:.4g} {}) is outside [{}, {}]",
                               FieldName(field), source, value, FieldUnit(field), low, high));
    }
    out.constants.push_back({.name = {.gpu = preset.gpu.name, .field = field},
                             .value = value,
                             .preset = FieldValue(preset.gpu, field),
                             .profile = source});
  }
  return Status::Ok();
}

}  // namespace

Expected<ProfileFit> FitProfileTables(std::span<const ProfileTable> tables) {
  std::vector<PresetTables> presets;
  for (const ProfileTable& profile : tables) {
    Expected<models::GpuSpec> gpu = models::GpuPreset(profile.table.gpu());
    if (!gpu.ok()) {
      return Error(fmt::format("the table's GPU is not a GPU preset{}: a calibration's "
                               "constants belong to presets (write the table with dtsim ops "
                               "--gpu PRESET, or set its \"gpu\"); presets: {}",
                               DidYouMean(profile.table.gpu(), models::GpuPresetNames()),
                               JoinQuoted(models::GpuPresetNames())),
                   "gpu", Quote(profile.table.gpu()))
          .InFile(profile.path);
    }
    auto same = [&](const PresetTables& p) { return p.gpu.name == gpu->name; };
    auto it = std::find_if(presets.begin(), presets.end(), same);
    if (it == presets.end()) {
      presets.push_back({.gpu = *std::move(gpu), .timing = profile.table.timing()});
      it = std::prev(presets.end());
    } else if (it->timing != profile.table.timing()) {
      return Error(fmt::format("its ops were timed {}, those of {} {} (on the same GPU): fit "
                               "tables of one timing together",
                               traces::OpTimingName(profile.table.timing()), it->paths.front(),
                               traces::OpTimingName(it->timing)),
                   "timing")
          .InFile(profile.path);
    }
    it->tables.push_back(&profile.table);
    it->paths.push_back(profile.path);
  }
  ProfileFit fit;
  for (const PresetTables& preset : presets) {
    for (const CurveOps& curve : Curves(preset)) {
      DTSIM_RETURN_IF_ERROR(FitCurveConstants(preset, curve, fit));
    }
  }
  return fit;
}

Expected<ProfileFit> FitProfiles(std::span<const std::string> paths) {
  std::vector<ProfileTable> tables;
  tables.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto earlier = paths.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find(paths.begin(), earlier, paths[i]) != earlier) {
      return Error("the op-cost table is given twice (its ops would weigh double)", "--profile",
                   Quote(paths[i]));
    }
    DTSIM_ASSIGN_OR_RETURN(traces::OpCostTable table, traces::ReadOpCostTable(paths[i]));
    tables.push_back({.path = paths[i], .table = std::move(table)});
  }
  return FitProfileTables(tables);
}

}  // namespace dtsim::strategies
