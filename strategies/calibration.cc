#include "strategies/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 11> kFieldNames = {
    "matrix_efficiency",      "fp8_matrix_efficiency",
    "memory_efficiency",      "launch_overhead",
    "host_launch_time",       "matrix_ramp",
    "fp8_matrix_ramp",        "attention_efficiency",
    "attention_ramp",         "attention_backward_efficiency",
    "attention_backward_ramp"};

bool IsRamp(CalibratedField field) {
  return field == CalibratedField::kMatrixRamp || field == CalibratedField::kFp8MatrixRamp ||
         field == CalibratedField::kAttentionRamp ||
         field == CalibratedField::kAttentionBackwardRamp;
}

double Microseconds(DurationNs time) { return time.ToMicrosecondsDouble(); }
DurationNs FromMicroseconds(double us) { return DurationNs(std::llround(us * 1e3)); }

Expected<std::vector<std::string>> PointIds(const Json& value, const std::string& path) {
  if (!value.is_array()) return Error("expected an array of point ids", path);
  std::vector<std::string> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      return Error("expected a point id (a string)", JsonIndexPath(path, i),
                   JsonValueForError(value[i]));
    }
    ids.push_back(value[i].get<std::string>());
  }
  return ids;
}

Expected<CalibrationConstant> ConstantFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  CalibrationConstant constant;
  DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("name"));
  DTSIM_ASSIGN_OR_RETURN(constant.name, ParseConstantName(name, JsonChildPath(path, "name")));
  DTSIM_ASSIGN_OR_RETURN(constant.value, reader.Number("value"));
  const auto [low, high] = FieldBounds(constant.name.field);
  if (!(constant.value >= low && constant.value <= high)) {
    return Error(fmt::format("must be in [{}, {}] ({})", low, high, FieldUnit(constant.name.field)),
                 JsonChildPath(path, "value"), JsonValueForError(*reader.Find("value")));
  }
  if (reader.Has("preset")) {
    DTSIM_ASSIGN_OR_RETURN(constant.preset, reader.Number("preset"));
  }
  if (reader.Has("unit")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string unit, reader.String("unit"));
    if (unit != FieldUnit(constant.name.field)) {
      return Error(fmt::format("{} is in {}", FieldName(constant.name.field),
                               FieldUnit(constant.name.field)),
                   JsonChildPath(path, "unit"), Quote(unit));
    }
  }
  if (const Json* points = reader.Find("points")) {
    DTSIM_ASSIGN_OR_RETURN(constant.points, PointIds(*points, JsonChildPath(path, "points")));
  }
  DTSIM_ASSIGN_OR_RETURN(constant.profile, reader.StringOr("profile", ""));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return constant;
}

// A residual's or band's errors: "mape_percent" (not negative) and "mean_error_percent".
Status ReadErrors(JsonObjectReader& reader, const std::string& path, double& mape, double& mean) {
  DTSIM_ASSIGN_OR_RETURN(mape, reader.Number("mape_percent"));
  DTSIM_ASSIGN_OR_RETURN(mean, reader.Number("mean_error_percent"));
  if (!(mape >= 0)) {
    return Error("must not be negative", JsonChildPath(path, "mape_percent"),
                 fmt::format("{}", mape));
  }
  return Status::Ok();
}

Expected<CategoryResidual> ResidualFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  CategoryResidual residual;
  DTSIM_ASSIGN_OR_RETURN(residual.category, reader.String("category"));
  int64_t points = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("points", 0, int64_t{1} << 30, points));
  residual.points = static_cast<int>(points);
  DTSIM_RETURN_IF_ERROR(
      ReadErrors(reader, path, residual.mean_absolute_percentage_error, residual.mean_error));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return residual;
}

Expected<ErrorBand> BandFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ErrorBand band;
  DTSIM_ASSIGN_OR_RETURN(band.gpu, reader.String("gpu"));
  DTSIM_ASSIGN_OR_RETURN(band.framework, reader.String("framework"));
  int64_t points = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("points", 2, int64_t{1} << 30, points));
  if (points < 2) return Error("a band needs two or more points", JsonChildPath(path, "points"));
  band.points = static_cast<int>(points);
  DTSIM_RETURN_IF_ERROR(
      ReadErrors(reader, path, band.mean_absolute_percentage_error, band.mean_error));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return band;
}

}  // namespace

std::optional<ErrorBand> Calibration::BandFor(std::string_view gpu,
                                              std::string_view framework) const {
  for (const ErrorBand& band : bands) {
    if (band.gpu == gpu && band.framework == framework) return band;
  }
  return std::nullopt;
}

std::string ConstantName::ToString() const { return gpu + "/" + std::string(FieldName(field)); }

std::string_view FieldName(CalibratedField field) {
  return kFieldNames[static_cast<size_t>(field)];
}

bool IsTimeField(CalibratedField field) {
  return field == CalibratedField::kLaunchOverhead || field == CalibratedField::kHostLaunchTime ||
         IsRamp(field);
}

std::string_view FieldUnit(CalibratedField field) {
  return IsTimeField(field) ? "µs" : "fraction of peak";
}

std::pair<double, double> FieldBounds(CalibratedField field) {
  if (IsRamp(field)) return {0.0, 1000.0};
  return IsTimeField(field) ? std::pair(0.0, 100.0) : std::pair(0.05, 1.0);
}

double FieldValue(const models::GpuSpec& gpu, CalibratedField field) {
  switch (field) {
    case CalibratedField::kMatrixEfficiency:
      return gpu.matrix_efficiency.max;
    case CalibratedField::kFp8MatrixEfficiency:
      return gpu.fp8_matrix_efficiency.max;
    case CalibratedField::kMemoryEfficiency:
      return gpu.memory_efficiency.max;
    case CalibratedField::kLaunchOverhead:
      return Microseconds(gpu.launch_overhead);
    case CalibratedField::kHostLaunchTime:
      return Microseconds(gpu.host_launch_time);
    case CalibratedField::kMatrixRamp:
      return Microseconds(gpu.matrix_efficiency.ramp);
    case CalibratedField::kFp8MatrixRamp:
      return Microseconds(gpu.fp8_matrix_efficiency.ramp);
    // Without curves of its own, flash attention runs on the GEMM curve (of bf16 and fp16).
    case CalibratedField::kAttentionEfficiency:
      return gpu.attention_efficiency.value_or(gpu.matrix_efficiency).max;
    case CalibratedField::kAttentionRamp:
      return Microseconds(gpu.attention_efficiency.value_or(gpu.matrix_efficiency).ramp);
    case CalibratedField::kAttentionBackwardEfficiency:
      return gpu.attention_backward_efficiency.value_or(gpu.matrix_efficiency).max;
    case CalibratedField::kAttentionBackwardRamp:
      return Microseconds(gpu.attention_backward_efficiency.value_or(gpu.matrix_efficiency).ramp);
  }
  return 0;
}

Expected<ConstantName> ParseConstantName(std::string_view text, const std::string& path) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    return Error("expected \"GPU-PRESET/FIELD\", such as \"a100-sxm4-80gb/matrix_efficiency\"",
                 path, Quote(text));
  }
  ConstantName name;
  name.gpu = std::string(text.substr(0, slash));
  if (!models::GpuPreset(name.gpu).ok()) {
    return Error(fmt::format("unknown GPU preset{}; presets: {}",
                             DidYouMean(name.gpu, models::GpuPresetNames()),
                             JoinQuoted(models::GpuPresetNames())),
                 path, Quote(text));
  }
  const std::string_view field = text.substr(slash + 1);
  const auto* it = std::find(kFieldNames.begin(), kFieldNames.end(), field);
  if (it == kFieldNames.end()) {
    return Error(fmt::format("unknown calibrated field{}; fields: {}",
                             DidYouMean(field, kFieldNames), JoinQuoted(kFieldNames)),
                 path, Quote(text));
  }
  name.field = static_cast<CalibratedField>(it - kFieldNames.begin());
  return name;
}

std::vector<models::GpuCalibration> Calibration::GpuCalibrations() const {
  std::vector<models::GpuCalibration> gpus;
  for (const CalibrationConstant& constant : constants) {
    auto same = [&](const models::GpuCalibration& g) { return g.gpu == constant.name.gpu; };
    auto it = std::find_if(gpus.begin(), gpus.end(), same);
    if (it == gpus.end()) {
      gpus.push_back({.gpu = constant.name.gpu});
      it = std::prev(gpus.end());
    }
    switch (constant.name.field) {
      case CalibratedField::kMatrixEfficiency:
        it->matrix_efficiency = constant.value;
        break;
      case CalibratedField::kFp8MatrixEfficiency:
        it->fp8_matrix_efficiency = constant.value;
        break;
      case CalibratedField::kMemoryEfficiency:
        it->memory_efficiency = constant.value;
        break;
      case CalibratedField::kLaunchOverhead:
        it->launch_overhead = FromMicroseconds(constant.value);
        break;
      case CalibratedField::kHostLaunchTime:
        it->host_launch_time = FromMicroseconds(constant.value);
        break;
      case CalibratedField::kMatrixRamp:
        it->matrix_ramp = FromMicroseconds(constant.value);
        break;
      case CalibratedField::kFp8MatrixRamp:
        it->fp8_matrix_ramp = FromMicroseconds(constant.value);
        break;
      case CalibratedField::kAttentionEfficiency:
        it->attention_efficiency = constant.value;
        break;
      case CalibratedField::kAttentionRamp:
        it->attention_ramp = FromMicroseconds(constant.value);
        break;
      case CalibratedField::kAttentionBackwardEfficiency:
        it->attention_backward_efficiency = constant.value;
        break;
      case CalibratedField::kAttentionBackwardRamp:
        it->attention_backward_ramp = FromMicroseconds(constant.value);
        break;
    }
  }
  return gpus;
}

std::vector<std::string> Calibration::AppliedTo(std::string_view gpu) const {
  std::vector<std::string> applied;
  for (const CalibrationConstant& constant : constants) {
    if (constant.name.gpu == gpu) {
      applied.push_back(fmt::format("{}={:.6g}", constant.name.ToString(), constant.value));
    }
  }
  return applied;
}

Expected<Calibration> CalibrationFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  DTSIM_RETURN_IF_ERROR(CheckFormat(reader, kCalibrationFormat));
  Calibration calibration;
  DTSIM_ASSIGN_OR_RETURN(calibration.command, reader.StringOr("command", ""));
  DTSIM_ASSIGN_OR_RETURN(const Json* constants, [&]() -> Expected<const Json*> {
    const Json* found = reader.Find("constants");
    if (found == nullptr) return Error("missing required field", JsonChildPath(path, "constants"));
    if (!found->is_array()) {
      return Error("expected an array of constants", JsonChildPath(path, "constants"));
    }
    return found;
  }());
  for (size_t i = 0; i < constants->size(); ++i) {
    const std::string at = JsonIndexPath(JsonChildPath(path, "constants"), i);
    DTSIM_ASSIGN_OR_RETURN(CalibrationConstant constant, ConstantFromJson((*constants)[i], at));
    for (const CalibrationConstant& earlier : calibration.constants) {
      if (earlier.name.ToString() == constant.name.ToString()) {
        return Error("the constant is given twice", JsonChildPath(at, "name"),
                     Quote(constant.name.ToString()));
      }
    }
    calibration.constants.push_back(std::move(constant));
  }
  if (const Json* residuals = reader.Find("residuals")) {
    const std::string at = JsonChildPath(path, "residuals");
    if (!residuals->is_array()) return Error("expected an array", at);
    for (size_t i = 0; i < residuals->size(); ++i) {
      DTSIM_ASSIGN_OR_RETURN(CategoryResidual residual,
                             ResidualFromJson((*residuals)[i], JsonIndexPath(at, i)));
      calibration.residuals.push_back(std::move(residual));
    }
  }
  if (const Json* bands = reader.Find("bands")) {
    const std::string at = JsonChildPath(path, "bands");
    if (!bands->is_array()) return Error("expected an array", at);
    for (size_t i = 0; i < bands->size(); ++i) {
      DTSIM_ASSIGN_OR_RETURN(ErrorBand band, BandFromJson((*bands)[i], JsonIndexPath(at, i)));
      calibration.bands.push_back(std::move(band));
    }
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return calibration;
}

Expected<Calibration> ReadCalibrationFile(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(path));
  Expected<Calibration> calibration = CalibrationFromJson(json, "");
  if (!calibration.ok()) return std::move(calibration).error().InFile(path);
  calibration->source = path;
  return calibration;
}

OrderedJson CalibrationToJson(const Calibration& calibration) {
  OrderedJson out = FormatHeader(kCalibrationFormat);
  if (!calibration.command.empty()) out["command"] = calibration.command;
  out["constants"] = OrderedJson::array();
  for (const CalibrationConstant& constant : calibration.constants) {
    OrderedJson entry;
    entry["name"] = constant.name.ToString();
    entry["value"] = constant.value;
    entry["preset"] = constant.preset;
    entry["unit"] = FieldUnit(constant.name.field);
    if (constant.profile.empty()) {
      entry["points"] = constant.points;
    } else {
      entry["profile"] = constant.profile;
    }
    out["constants"].push_back(std::move(entry));
  }
  if (!calibration.residuals.empty()) {
    out["residuals"] = OrderedJson::array();
    for (const CategoryResidual& residual : calibration.residuals) {
      out["residuals"].push_back({{"category", residual.category},
                                  {"points", residual.points},
                                  {"mape_percent", residual.mean_absolute_percentage_error},
                                  {"mean_error_percent", residual.mean_error}});
    }
  }
  if (!calibration.bands.empty()) {
    out["bands"] = OrderedJson::array();
    for (const ErrorBand& band : calibration.bands) {
      out["bands"].push_back({{"gpu", band.gpu},
                              {"framework", band.framework},
                              {"points", band.points},
                              {"mape_percent", band.mean_absolute_percentage_error},
                              {"mean_error_percent", band.mean_error}});
    }
  }
  return out;
}

}  // namespace dtsim::strategies
