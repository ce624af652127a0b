#include "network/published_busbw.h"

#include <numeric>

#include "network/cluster.h"
#include "network/collective_algorithms.h"
#include "sim/base/json_reader.h"
#include "sim/base/strings.h"

namespace dtsim::network {

double BusBandwidth(graph::CommKind kind, int gpus, int64_t size, DurationNs time) {
  const double algbw = static_cast<double>(size) / time.ToSecondsDouble();
  const double n = gpus;
  return algbw * (kind == graph::CommKind::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n);
}

namespace {

Expected<PublishedPoint> ReadPublishedPoint(const Json& value, const std::string& path) {
  if (!value.is_array() || value.size() != 2) {
    return Error("expected [size in bytes, busbw in GB/s]", path, JsonValueForError(value));
  }
  PublishedPoint point;
  DTSIM_ASSIGN_OR_RETURN(point.size,
                         JsonToInt(value[0], JsonIndexPath(path, 0), 1, int64_t{1} << 50));
  if (!value[1].is_number() || value[1].get<double>() <= 0) {
    return Error("expected a positive bus bandwidth in GB/s", JsonIndexPath(path, 1),
                 JsonValueForError(value[1]));
  }
  point.busbw = value[1].get<double>();
  return point;
}

Expected<PublishedCurve> ReadCurve(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  PublishedCurve curve;
  DTSIM_ASSIGN_OR_RETURN(curve.id, reader.String("id"));
  DTSIM_ASSIGN_OR_RETURN(curve.preset, reader.String("preset"));
  if (Expected<ClusterSpec> preset = ClusterPreset(curve.preset); !preset.ok()) {
    return std::move(preset).error().Under(JsonChildPath(path, "preset"));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::string kind, reader.String("kind"));
  const std::optional<graph::CommKind> parsed = graph::CollectiveKindFromName(kind);
  if (!parsed ||
      (*parsed != graph::CommKind::kAllReduce && *parsed != graph::CommKind::kAllToAll)) {
    return Error("expected \"all_reduce\" or \"all_to_all\"", JsonChildPath(path, "kind"),
                 Quote(kind));
  }
  curve.kind = *parsed;
  int64_t gpus = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("gpus", 2, 1 << 20, gpus));
  if (gpus == 0) return Error("missing required field", JsonChildPath(path, "gpus"));
  curve.gpus = static_cast<int>(gpus);
  DTSIM_ASSIGN_OR_RETURN(curve.algorithm, reader.StringOr("algorithm", ""));
  if (!curve.algorithm.empty()) {
    if (Expected<const CollectiveAlgorithm*> found =
            FindCollectiveAlgorithm(curve.kind, curve.algorithm);
        !found.ok()) {
      return std::move(found).error().Under(JsonChildPath(path, "algorithm"));
    }
  }
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("fitted", curve.fitted));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptional("modeled_up_to", 1, int64_t{1} << 50, curve.modeled_up_to));
  DTSIM_ASSIGN_OR_RETURN(curve.source, reader.String("source"));
  for (const char* text : {"system", "measurement"}) reader.Allow(text);
  const Json* points = reader.Find("points");
  const std::string points_path = JsonChildPath(path, "points");
  if (points == nullptr) return Error("missing required field", points_path);
  if (!points->is_array() || points->empty()) {
    return Error("expected a non-empty array of points", points_path, JsonValueForError(*points));
  }
  for (size_t i = 0; i < points->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const PublishedPoint point,
                           ReadPublishedPoint((*points)[i], JsonIndexPath(points_path, i)));
    curve.points.push_back(point);
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return curve;
}

}  // namespace

Expected<std::vector<PublishedCurve>> ReadPublishedCurves(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json document, ReadJsonFile(path));
  auto read = [&]() -> Expected<std::vector<PublishedCurve>> {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(document, ""));
    DTSIM_ASSIGN_OR_RETURN(const std::string format, reader.String("format"));
    if (format != "dtsim.published_busbw") {
      return Error("expected \"dtsim.published_busbw\"", "format", Quote(format));
    }
    reader.Allow("description");
    const Json* curves = reader.Find("curves");
    if (curves == nullptr || !curves->is_array()) {
      return Error("expected an array of curves", "curves");
    }
    std::vector<PublishedCurve> out;
    for (size_t i = 0; i < curves->size(); ++i) {
      DTSIM_ASSIGN_OR_RETURN(PublishedCurve curve,
                             ReadCurve((*curves)[i], JsonIndexPath("curves", i)));
      out.push_back(std::move(curve));
    }
    DTSIM_RETURN_IF_ERROR(reader.Finish());
    return out;
  };
  Expected<std::vector<PublishedCurve>> curves = read();
  if (!curves.ok()) return std::move(curves).error().InFile(path);
  return curves;
}

Expected<PredictedBusbw> PredictBusbw(std::string_view preset, graph::CommKind kind, int gpus,
                                      int64_t size, std::string_view algorithm) {
  DTSIM_ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterPreset(preset, 0));
  DTSIM_RETURN_IF_ERROR(FitCluster(cluster, gpus));
  std::vector<int32_t> ranks(static_cast<size_t>(gpus));
  std::iota(ranks.begin(), ranks.end(), 0);
  const CollectiveRequest request{.kind = kind,
                                  .size = Bytes(size),
                                  .shape = ShapeOfGroup(ranks, cluster),
                                  .cluster = &cluster,
                                  .ranks = ranks};
  DTSIM_ASSIGN_OR_RETURN(const AlgorithmChoice choice,
                         ChooseCollectiveAlgorithm(request, algorithm));
  return PredictedBusbw{.busbw = BusBandwidth(kind, gpus, size, choice.time) / 1e9,
                        .algorithm = choice.algorithm->name,
                        .time = choice.time};
}

}  // namespace dtsim::network
