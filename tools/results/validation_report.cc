#include "tools/results/validation_report.h"

#include "tools/results/result_file.h"

namespace dtsim::results {

OrderedJson ValidationReportJson(const std::string& points_path,
                                 const strategies::ValidationReport& report) {
  OrderedJson rows = OrderedJson::array();
  for (const strategies::ValidationRow& row : report.rows) {
    rows.push_back({{"id", row.id},
                    {"metric", row.metric},
                    {"unit", row.unit},
                    {"measured", row.measured},
                    {"predicted", row.predicted},
                    {"error", row.Error()},
                    {"simulated", row.how}});
  }
  OrderedJson document = FormatHeader(kValidationReportFormat);
  document["points"] = points_path;
  document["rows"] = std::move(rows);
  document["mape_percent"] = report.mean_absolute_percentage_error;
  return document;
}

Expected<ValidationReportRecord> ValidationReportFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kValidationReportFormat));
  ValidationReportRecord record;
  DTSIM_ASSIGN_OR_RETURN(record.points, root.String("points"));
  DTSIM_ASSIGN_OR_RETURN(const Json* rows, ChildArray(root, "rows"));
  for (size_t i = 0; i < rows->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader entry,
                           JsonObjectReader::Make((*rows)[i], JsonIndexPath("rows", i)));
    strategies::ValidationRow row;
    DTSIM_ASSIGN_OR_RETURN(row.id, entry.String("id"));
    DTSIM_ASSIGN_OR_RETURN(row.metric, entry.String("metric"));
    DTSIM_ASSIGN_OR_RETURN(row.unit, entry.String("unit"));
    DTSIM_ASSIGN_OR_RETURN(row.measured, entry.Number("measured"));
    DTSIM_ASSIGN_OR_RETURN(row.predicted, entry.Number("predicted"));
    DTSIM_ASSIGN_OR_RETURN(row.how, entry.String("simulated"));
    record.rows.push_back(std::move(row));
  }
  DTSIM_ASSIGN_OR_RETURN(record.mean_absolute_percentage_error, root.Number("mape_percent"));
  return record;
}

}  // namespace dtsim::results
