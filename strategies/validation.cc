#include "strategies/validation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "models/cost_model.h"
#include "models/ops.h"
#include "sim/base/strings.h"
#include "strategies/pass_times.h"
#include "strategies/published_recipes.h"
#include "strategies/simulate.h"
#include "strategies/training_run_point.h"

namespace dtsim::strategies {
namespace {}  // namespace

bool IsTrainingRunCategory(std::string_view category) {
  return category != "megatron_weak_scaling" && category != "layer_microbenchmark";
}

std::string TextField(const Json& object, std::string_view key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

namespace {

Expected<const Json*> Member(const Json& object, std::string_view key, const std::string& path) {
  if (!object.is_object() || !object.contains(key)) {
    return Error("missing required field", JsonChildPath(path, key));
  }
  return &object[std::string(key)];
}

Expected<int64_t> IntAt(const Json& object, std::string_view key, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json* value, Member(object, key, path));
  return JsonToInt(*value, JsonChildPath(path, key), 1, int64_t{1} << 40);
}

Expected<double> Metric(const Json& point, std::string_view name, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json* metrics, Member(point, "metrics", path));
  for (const Json& metric : *metrics) {
    if (TextField(metric, "name") == name && metric.contains("value") &&
        metric["value"].is_number()) {
      return metric["value"].get<double>();
    }
  }
  return Error(fmt::format("no \"{}\" metric", name), JsonChildPath(path, "metrics"));
}

// The model of a point: a GPT (LayerNorm, GeLU, learned positions, tied embeddings).
Expected<Json> ModelOf(const Json& point, const std::string& path, int64_t layers) {
  DTSIM_ASSIGN_OR_RETURN(const Json* model, Member(point, "model", path));
  const std::string model_path = JsonChildPath(path, "model");
  Json spec = {{"family", "transformer"}, {"layers", layers}};
  for (std::string_view key : {"hidden", "heads", "ffn_hidden", "seq_len"}) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t value, IntAt(*model, key, model_path));
    spec[key == "seq_len" ? "max_seq" : std::string(key)] = value;
  }
  spec["vocab"] = model->contains("vocab") && (*model)["vocab"].is_number_integer()
                      ? (*model)["vocab"].get<int64_t>()
                      : 51200;
  return spec;
}

Expected<ValidationRow> WeakScalingPoint(const Json& point, const std::string& path,
                                         const std::string& id, const Calibration* calibration) {
  DTSIM_ASSIGN_OR_RETURN(const Json* model, Member(point, "model", path));
  DTSIM_ASSIGN_OR_RETURN(const int64_t layers,
                         IntAt(*model, "layers", JsonChildPath(path, "model")));
  DTSIM_ASSIGN_OR_RETURN(Json model_spec, ModelOf(point, path, layers));
  DTSIM_ASSIGN_OR_RETURN(const Json* parallel, Member(point, "parallel", path));
  const std::string parallel_path = JsonChildPath(path, "parallel");
  DTSIM_ASSIGN_OR_RETURN(const int64_t tp, IntAt(*parallel, "tp", parallel_path));
  DTSIM_ASSIGN_OR_RETURN(const int64_t pp, IntAt(*parallel, "pp", parallel_path));
  DTSIM_ASSIGN_OR_RETURN(const int64_t dp, IntAt(*parallel, "dp", parallel_path));
  DTSIM_ASSIGN_OR_RETURN(const int64_t batch, IntAt(*parallel, "global_batch", parallel_path));
  const bool micro_given =
      (*parallel).contains("micro_batch") && (*parallel)["micro_batch"].is_number_integer();
  const int64_t micro = micro_given ? (*parallel)["micro_batch"].get<int64_t>() : 1;
  Json training = {{"global_batch", batch},
                   {"micro_batch", micro},
                   {"precision", "fp16"},
                   {"recompute", "full"}};
  Json cluster = {{"preset", "dgx-a100"}, {"gpu", "a100-sxm4-80gb"}};
  // Megatron-LM all-reduces the gradients after the backward: the SC'21 code had no overlap,
  // and later releases keep it opt-in (--overlap-grad-reduce, default off).
  Json parallelism = {
      {"data", dp}, {"tensor", tp}, {"pipeline", pp}, {"overlap_gradient_reduce", false}};
  // What the paper's Megatron-LM did that the point does not say (its tensor-parallel
  // collectives not overlapped: strategies/published_recipes.cc).
  std::vector<std::string> recipe;
  ApplyPublishedRecipe(point, {training, parallelism, cluster}, recipe);
  Json config = {{"model", model_spec},
                 {"training", std::move(training)},
                 {"cluster", std::move(cluster)},
                 {"parallelism", std::move(parallelism)},
                 {"simulation", {{"ranks", "symmetric"}, {"network_model", "analytical"}}}};
  if (calibration != nullptr) config["calibration"] = Json(CalibrationToJson(*calibration));
  Expected<ResolvedConfig> simulation = ConfigFromJson(config, id);
  if (!simulation.ok()) return std::move(simulation).error().Under(path);
  Expected<SimulationResult> result = Simulate(*simulation);
  if (!result.ok()) return std::move(result).error().Under(path);
  DTSIM_ASSIGN_OR_RETURN(const double measured, Metric(point, "achieved_tflops_per_gpu", path));
  return ValidationRow{
      .id = id,
      .metric = "achieved_tflops_per_gpu",
      .unit = "TFLOP/s",
      .measured = measured,
      .predicted = result->hardware_tflops_per_gpu,
      .how = fmt::format("TP {} PP {} DP {}, 1F1B, micro-batch {}{}, full recompute, gradients "
                         "all-reduced after the backward{}{}",
                         tp, pp, dp, micro, micro_given ? "" : " (inferred)",
                         recipe.empty() ? "" : ", ", fmt::join(recipe, ", ")),
      .gpu = simulation->gpu.name,
      .framework = std::string(models::FrameworkName(simulation->training.framework))};
}

// One layer at TP = t on dgx-a100 (PredictLayerTimes).
Expected<ValidationRow> LayerPoint(const Json& point, const std::string& path,
                                   const std::string& id, const Calibration* calibration) {
  DTSIM_ASSIGN_OR_RETURN(const LayerTimes times, PredictLayerTimes(point, path, calibration));
  DTSIM_ASSIGN_OR_RETURN(const double measured, Metric(point, "fwd+bwd_time", path));
  return ValidationRow{.id = id,
                       .metric = "fwd+bwd_time",
                       .unit = "ms",
                       .measured = measured,
                       .predicted = (times.forward_seconds + times.backward_seconds) * 1e3,
                       .is_time = true,
                       .how = times.how,
                       .gpu = "a100-sxm4-80gb",
                       .framework = "megatron"};
}

}  // namespace

Expected<LayerTimes> PredictLayerTimes(const Json& point, const std::string& path,
                                       const Calibration* calibration) {
  DTSIM_ASSIGN_OR_RETURN(Json model, ModelOf(point, path, 1));
  DTSIM_ASSIGN_OR_RETURN(const Json* parallel, Member(point, "parallel", path));
  const std::string parallel_path = JsonChildPath(path, "parallel");
  DTSIM_ASSIGN_OR_RETURN(const int64_t tp, IntAt(*parallel, "tp", parallel_path));
  DTSIM_ASSIGN_OR_RETURN(const int64_t micro, IntAt(*parallel, "micro_batch", parallel_path));
  const std::string recompute = TextField(*parallel, "recompute");
  const bool sp = recompute.find("sequence_parallel") != std::string::npos;
  const models::Recompute mode = recompute.starts_with("full") ? models::Recompute::kFull
                                 : recompute.starts_with("selective")
                                     ? models::Recompute::kSelective
                                     : models::Recompute::kNone;
  const int64_t seq_len = model["max_seq"].get<int64_t>();
  // Megatron-LM of 2022 (sequence parallelism's release): the async input-gradient reduction
  // beside the wgrad, the megatron framework's default.
  Json config = {
      {"model", std::move(model)},
      {"training",
       {{"global_batch", micro},
        {"micro_batch", micro},
        {"seq_len", seq_len},
        {"precision", "fp16"},
        {"recompute", models::RecomputeName(mode)}}},
      {"cluster", {{"preset", "dgx-a100"}, {"gpu", "a100-sxm4-80gb"}}},
      {"parallelism", {{"data", 1}, {"tensor", {{"size", tp}, {"sequence_parallel", sp}}}}},
      {"simulation", {{"ranks", "symmetric"}, {"network_model", "analytical"}}}};
  if (calibration != nullptr) config["calibration"] = Json(CalibrationToJson(*calibration));
  Expected<ResolvedConfig> resolved = ConfigFromJson(config, path);
  if (!resolved.ok()) return std::move(resolved).error().Under(path);
  DTSIM_ASSIGN_OR_RETURN(const ConfigCostModel cost, LoadCostModel(*resolved));
  DTSIM_ASSIGN_OR_RETURN(const PassTimes times, PricePassTimes(*resolved, *cost.model));
  const PieceTimes& layer = times.Layer(resolved->model.transformer, 0);
  return LayerTimes{
      .forward_seconds = layer.forward.ToSecondsDouble(),
      .backward_seconds = (layer.backward + layer.recompute).ToSecondsDouble(),
      .how = fmt::format("one layer, TP {}, micro-batch {}, {}", tp, micro, recompute)};
}

Expected<std::vector<MeasuredPoint>> MeasuredPoints(const Json& points, const std::string& source) {
  Expected<const Json*> found = Member(points, "points", "");
  if (!found.ok()) return std::move(found).error().InFile(source);
  const Json* list = *found;
  if (!list->is_array()) return Error("expected an array", "points").InFile(source);
  std::vector<MeasuredPoint> measured;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& point = (*list)[i];
    const std::string path = JsonIndexPath("points", i);
    measured.push_back({.point = &point,
                        .path = path,
                        .id = TextField(point, "id").empty() ? path : TextField(point, "id"),
                        .category = TextField(point, "category")});
  }
  return measured;
}

Expected<ValidationRow> ValidatePoint(const MeasuredPoint& point, const std::string& source,
                                      const Calibration* calibration) {
  Expected<ValidationRow> row =
      point.category == "megatron_weak_scaling"
          ? WeakScalingPoint(*point.point, point.path, point.id, calibration)
      : point.category == "layer_microbenchmark"
          ? LayerPoint(*point.point, point.path, point.id, calibration)
          : TrainingRunPoint(*point.point, point.path, point.id, calibration);
  if (!row.ok()) return std::move(row).error().InFile(source);
  row->category = point.category;
  return row;
}

Expected<ValidationReport> Validate(const Json& points, const std::string& source,
                                    const Calibration* calibration) {
  DTSIM_ASSIGN_OR_RETURN(const std::vector<MeasuredPoint> measured, MeasuredPoints(points, source));
  ValidationReport report;
  for (const MeasuredPoint& point : measured) {
    Expected<ValidationRow> row = ValidatePoint(point, source, calibration);
    if (!row.ok()) {
      report.unsimulated.push_back({point.id, point.category, std::move(row).error().ToString()});
      continue;
    }
    report.rows.push_back(std::move(*row));
  }
  return MergeReports({std::move(report)});
}

Status CheckUniquePointIds(std::span<const std::pair<const Json*, std::string>> documents) {
  std::map<std::string, std::string> seen;  // id → "FILE points[i]"
  for (const auto& [document, file] : documents) {
    if (!document->is_object() || !document->contains("points")) continue;
    const Json* list = &(*document)["points"];
    if (!list->is_array()) continue;  // the reader names what is wrong
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string id = TextField((*list)[i], "id");
      if (id.empty()) continue;
      const std::string here = fmt::format("{} {}", file, JsonIndexPath("points", i));
      const auto [at, inserted] = seen.emplace(id, here);
      if (!inserted) {
        return Error(fmt::format("the point {} is also {}: a run given twice would count twice "
                                 "(give each file once; ids must differ)",
                                 Quote(id), at->second),
                     JsonIndexPath("points", i), Quote(id))
            .InFile(file);
      }
    }
  }
  return Status::Ok();
}

ValidationReport MergeReports(std::vector<ValidationReport> reports) {
  ValidationReport merged;
  for (ValidationReport& report : reports) {
    std::move(report.rows.begin(), report.rows.end(), std::back_inserter(merged.rows));
    std::move(report.unsimulated.begin(), report.unsimulated.end(),
              std::back_inserter(merged.unsimulated));
  }
  double sum = 0;
  for (const ValidationRow& row : merged.rows) {
    sum += std::abs(row.Error());
    auto same = [&](const CategoryAccuracy& c) { return c.category == row.category; };
    auto it = std::find_if(merged.categories.begin(), merged.categories.end(), same);
    if (it == merged.categories.end()) {
      merged.categories.push_back({.category = row.category});
      it = std::prev(merged.categories.end());
    }
    ++it->points;
    it->mean_absolute_percentage_error += 100 * std::abs(row.Error());
    it->mean_error += 100 * row.Error();
  }
  for (CategoryAccuracy& category : merged.categories) {
    category.mean_absolute_percentage_error /= category.points;
    category.mean_error /= category.points;
  }
  if (!merged.rows.empty()) {
    merged.mean_absolute_percentage_error = 100 * sum / static_cast<double>(merged.rows.size());
  }
  return merged;
}

}  // namespace dtsim::strategies
