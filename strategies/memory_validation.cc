#include "strategies/memory_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "models/memory.h"
#include "strategies/config.h"
#include "strategies/stage_memory.h"

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 3> kMeasuredMemoryNames = {"allocated", "reserved",
                                                                  "device"};

Status ReadUnmodelled(JsonObjectReader& reader, MemoryRow& row) {
  const Json* list = reader.Find("unmodelled");
  if (list == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), "unmodelled");
  if (!list->is_array()) {
    return Error("must be a list of what the run did that dtsim does not model", path,
                 JsonValueForError(*list));
  }
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_string()) {
      return Error("must be a string", JsonIndexPath(path, i), JsonValueForError((*list)[i]));
    }
    row.unmodelled.push_back((*list)[i].get<std::string>());
  }
  return Status::Ok();
}

// The largest stage's peak of the point's config.
Status Predict(const Json& config, const std::string& path, MemoryRow& row) {
  Expected<ResolvedConfig> resolved = ConfigFromJson(config, "");
  if (!resolved.ok()) return std::move(resolved).error().Under(path);
  Expected<std::vector<models::MemoryBreakdown>> stages = EstimateStageMemory(*resolved);
  if (!stages.ok()) return std::move(stages).error().Under(path);
  for (size_t stage = 0; stage < stages->size(); ++stage) {
    const models::MemoryBreakdown& memory = (*stages)[stage];
    const auto total = static_cast<double>(memory.total());
    if (total > row.needed_bytes) {
      row.needed_bytes = total;
      row.predicted_bytes =
          static_cast<double>(row.kind == MeasuredMemory::kDevice     ? memory.total()
                              : row.kind == MeasuredMemory::kReserved ? memory.reserved()
                                                                      : memory.tensors());
      row.stage = static_cast<int>(stage);
    }
  }
  row.capacity_bytes = static_cast<double>(resolved->gpu.memory.count());
  return Status::Ok();
}

Expected<MemoryRow> ReadPoint(const Json& point, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(point, path));
  MemoryRow row;
  DTSIM_ASSIGN_OR_RETURN(row.id, reader.String("id"));
  DTSIM_ASSIGN_OR_RETURN(row.source, reader.String("source"));
  DTSIM_ASSIGN_OR_RETURN(row.location, reader.StringOr("location", ""));
  reader.Allow("notes");
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("ran", row.ran));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("kind", kMeasuredMemoryNames, row.kind));
  if (row.ran && reader.Has("peak")) {
    DTSIM_ASSIGN_OR_RETURN(const Bytes peak, reader.Size("peak"));
    if (peak.count() <= 0) {
      return Error("a run that ran has a positive peak", JsonChildPath(path, "peak"),
                   std::to_string(peak.count()));
    }
    row.measured_bytes = static_cast<double>(peak.count());
  } else if (!row.ran && reader.Has("peak")) {
    return Error("a run that ran out of memory (\"ran\": false) has no peak",
                 JsonChildPath(path, "peak"), JsonValueForError(*reader.Find("peak")));
  }
  DTSIM_RETURN_IF_ERROR(ReadUnmodelled(reader, row));
  const Json* config = reader.Find("config");
  if (config == nullptr) return Error("missing required field", JsonChildPath(path, "config"));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  DTSIM_RETURN_IF_ERROR(Predict(*config, JsonChildPath(path, "config"), row));
  return row;
}

}  // namespace

MemoryReport SummarizeMemory(std::vector<MemoryRow> rows) {
  MemoryReport report;
  report.rows = std::move(rows);
  double comparable_abs = 0;
  double comparable_signed = 0;
  double all_abs = 0;
  for (const MemoryRow& row : report.rows) {
    if (std::find(report.sources.begin(), report.sources.end(), row.source) ==
        report.sources.end()) {
      report.sources.push_back(row.source);
    }
    if (!row.VerdictRight()) ++report.wrong_verdicts;
    if (!row.HasPeak()) continue;
    ++report.measured;
    all_abs += std::abs(row.Error());
    if (!row.Comparable()) continue;
    ++report.comparable;
    comparable_abs += std::abs(row.Error());
    comparable_signed += row.Error();
  }
  if (report.measured > 0) report.all_mape = 100 * all_abs / report.measured;
  if (report.comparable > 0) {
    report.comparable_mape = 100 * comparable_abs / report.comparable;
    report.comparable_mean_error = 100 * comparable_signed / report.comparable;
  }
  return report;
}

std::string_view MeasuredMemoryName(MeasuredMemory kind) {
  return kMeasuredMemoryNames[static_cast<size_t>(kind)];
}

std::span<const std::string_view> MeasuredMemoryNames() { return kMeasuredMemoryNames; }

bool IsMemoryPointsFile(const Json& file) {
  return file.is_object() && file.contains("format") && file["format"] == kMemoryPointsFormat;
}

Expected<MemoryReport> ValidateMemory(const Json& file, const std::string& source) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(file, ""));
  reader.Allow("format");
  reader.Allow("description");
  DTSIM_ASSIGN_OR_RETURN(const int64_t version, reader.Int("version"));
  if (version != 1) {
    return Error("this dtsim reads version 1 of dtsim.memory_points", "version",
                 std::to_string(version))
        .InFile(source);
  }
  const Json* points = reader.Find("points");
  if (points == nullptr || !points->is_array()) {
    return Error("must be a list of measured runs", "points").InFile(source);
  }
  if (Status done = reader.Finish(); !done.ok()) return std::move(done).error().InFile(source);
  std::vector<MemoryRow> rows;
  for (size_t i = 0; i < points->size(); ++i) {
    Expected<MemoryRow> row = ReadPoint((*points)[i], JsonIndexPath("points", i));
    if (!row.ok()) return std::move(row).error().InFile(source);
    rows.push_back(*std::move(row));
  }
  return SummarizeMemory(std::move(rows));
}

}  // namespace dtsim::strategies
