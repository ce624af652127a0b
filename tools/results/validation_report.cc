#include "tools/results/validation_report.h"

#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::results {

namespace {

OrderedJson MemoryJson(const strategies::MemoryReport& memory) {
  OrderedJson rows = OrderedJson::array();
  for (const strategies::MemoryRow& row : memory.rows) {
    OrderedJson entry = {{"id", row.id},
                         {"source", row.source},
                         {"location", row.location},
                         {"kind", strategies::MeasuredMemoryName(row.kind)},
                         {"ran", row.ran},
                         {"measured_bytes", row.measured_bytes},
                         {"predicted_bytes", row.predicted_bytes},
                         {"needed_bytes", row.needed_bytes},
                         {"stage", row.stage},
                         {"capacity_bytes", row.capacity_bytes},
                         {"unmodelled", row.unmodelled}};
    if (row.HasPeak()) entry["error"] = row.Error();
    entry["verdict_right"] = row.VerdictRight();
    rows.push_back(std::move(entry));
  }
  return {{"rows", std::move(rows)},
          {"comparable", memory.comparable},
          {"comparable_mape_percent", memory.comparable_mape},
          {"comparable_mean_error_percent", memory.comparable_mean_error},
          {"measured", memory.measured},
          {"mape_percent", memory.all_mape},
          {"wrong_verdicts", memory.wrong_verdicts}};
}

Status ReadMemoryRows(JsonObjectReader& root, ValidationReportRecord& record) {
  const Json* memory = root.Find("memory");
  if (memory == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader section, JsonObjectReader::Make(*memory, "memory"));
  DTSIM_ASSIGN_OR_RETURN(const Json* rows, ChildArray(section, "rows"));
  for (size_t i = 0; i < rows->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader entry,
                           JsonObjectReader::Make((*rows)[i], JsonIndexPath("memory.rows", i)));
    strategies::MemoryRow row;
    DTSIM_ASSIGN_OR_RETURN(row.id, entry.String("id"));
    DTSIM_ASSIGN_OR_RETURN(row.source, entry.String("source"));
    DTSIM_ASSIGN_OR_RETURN(row.location, entry.StringOr("location", ""));
    DTSIM_ASSIGN_OR_RETURN(row.measured_bytes, entry.Number("measured_bytes"));
    DTSIM_ASSIGN_OR_RETURN(row.predicted_bytes, entry.Number("predicted_bytes"));
    DTSIM_ASSIGN_OR_RETURN(row.needed_bytes, entry.Number("needed_bytes"));
    DTSIM_ASSIGN_OR_RETURN(row.capacity_bytes, entry.Number("capacity_bytes"));
    DTSIM_RETURN_IF_ERROR(entry.ReadOptional("ran", row.ran));
    DTSIM_RETURN_IF_ERROR(
        entry.ReadOptionalEnum("kind", strategies::MeasuredMemoryNames(), row.kind));
    record.memory.push_back(std::move(row));
  }
  return Status::Ok();
}

}  // namespace

OrderedJson ValidationReportJson(const std::vector<std::string>& points_paths,
                                 const strategies::ValidationReport& report,
                                 const strategies::MemoryReport& memory,
                                 const strategies::Calibration* calibration) {
  OrderedJson rows = OrderedJson::array();
  for (const strategies::ValidationRow& row : report.rows) {
    rows.push_back({{"id", row.id},
                    {"category", row.category},
                    {"metric", row.metric},
                    {"unit", row.unit},
                    {"measured", row.measured},
                    {"predicted", row.predicted},
                    {"is_time", row.is_time},
                    {"error", row.Error()},
                    {"simulated", row.how}});
  }
  OrderedJson categories = OrderedJson::array();
  for (const strategies::CategoryAccuracy& category : report.categories) {
    categories.push_back({{"category", category.category},
                          {"points", category.points},
                          {"mape_percent", category.mean_absolute_percentage_error},
                          {"mean_error_percent", category.mean_error}});
  }
  OrderedJson unsimulated = OrderedJson::array();
  for (const strategies::UnsimulatedPoint& point : report.unsimulated) {
    unsimulated.push_back(
        {{"id", point.id}, {"category", point.category}, {"reason", point.reason}});
  }
  OrderedJson document = FormatHeader(kValidationReportFormat);
  document["points"] = points_paths;
  document["rows"] = std::move(rows);
  document["categories"] = std::move(categories);
  document["not_simulated"] = std::move(unsimulated);
  document["mape_percent"] = report.mean_absolute_percentage_error;
  if (!memory.rows.empty()) document["memory"] = MemoryJson(memory);
  if (calibration != nullptr) document["calibration"] = strategies::CalibrationToJson(*calibration);
  document["provenance"] = ProvenanceJson();
  return document;
}

Expected<ValidationReportRecord> ValidationReportFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kValidationReportFormat));
  ValidationReportRecord record;
  DTSIM_ASSIGN_OR_RETURN(const Json* points, ChildArray(root, "points"));
  for (size_t i = 0; i < points->size(); ++i) {
    const std::string path = JsonIndexPath("points", i);
    if (!(*points)[i].is_string()) return Error("expected a file name", path);
    record.points.push_back((*points)[i].get<std::string>());
  }
  DTSIM_ASSIGN_OR_RETURN(const Json* rows, ChildArray(root, "rows"));
  for (size_t i = 0; i < rows->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader entry,
                           JsonObjectReader::Make((*rows)[i], JsonIndexPath("rows", i)));
    strategies::ValidationRow row;
    DTSIM_ASSIGN_OR_RETURN(row.id, entry.String("id"));
    DTSIM_ASSIGN_OR_RETURN(row.category, entry.String("category"));
    DTSIM_ASSIGN_OR_RETURN(row.metric, entry.String("metric"));
    DTSIM_ASSIGN_OR_RETURN(row.unit, entry.String("unit"));
    DTSIM_ASSIGN_OR_RETURN(row.measured, entry.Number("measured"));
    DTSIM_ASSIGN_OR_RETURN(row.predicted, entry.Number("predicted"));
    DTSIM_RETURN_IF_ERROR(entry.ReadOptional("is_time", row.is_time));
    DTSIM_ASSIGN_OR_RETURN(row.how, entry.String("simulated"));
    record.rows.push_back(std::move(row));
  }
  DTSIM_ASSIGN_OR_RETURN(const Json* unsimulated, ChildArray(root, "not_simulated"));
  for (size_t i = 0; i < unsimulated->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(
        JsonObjectReader entry,
        JsonObjectReader::Make((*unsimulated)[i], JsonIndexPath("not_simulated", i)));
    strategies::UnsimulatedPoint point;
    DTSIM_ASSIGN_OR_RETURN(point.id, entry.String("id"));
    DTSIM_ASSIGN_OR_RETURN(point.category, entry.String("category"));
    DTSIM_ASSIGN_OR_RETURN(point.reason, entry.String("reason"));
    record.unsimulated.push_back(std::move(point));
  }
  DTSIM_ASSIGN_OR_RETURN(record.mean_absolute_percentage_error, root.Number("mape_percent"));
  DTSIM_RETURN_IF_ERROR(ReadMemoryRows(root, record));
  return record;
}

}  // namespace dtsim::results
