#include "tools/results/sweep_result.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/buffered_text_writer.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::results {
namespace {

// An axis whose every value is a quantity of one kind ("10 Gbps", "40 Gbps") is written as
// numbers in the SI base unit its column names (docs/formats/sweep-result.md, "CSV"): the
// suffix and each value's text in that unit; none for any other axis (its texts as given).
struct AxisColumn {
  std::string suffix;
  std::vector<std::string> cells;
};

AxisColumn ColumnOf(const SweepAxis& axis) {
  AxisColumn bandwidth{"_bytes_per_s", {}};
  AxisColumn duration{"_s", {}};
  AxisColumn size{"_bytes", {}};
  for (const std::string& text : axis.texts) {
    if (Expected<Bandwidth> rate = ParseBandwidth(text); rate.ok()) {
      bandwidth.cells.push_back(fmt::format("{}", rate->bytes_per_second()));
    }
    if (Expected<DurationNs> time = ParseDuration(text); time.ok()) {
      duration.cells.push_back(fmt::format("{}", time->ToSecondsDouble()));
    }
    if (Expected<Bytes> bytes = ParseBytes(text); bytes.ok()) {
      size.cells.push_back(std::to_string(bytes->count()));
    }
  }
  for (AxisColumn* column : {&bandwidth, &duration, &size}) {
    if (column->cells.size() == axis.texts.size()) return std::move(*column);
  }
  AxisColumn plain;
  for (const std::string& text : axis.texts) plain.cells.push_back(CsvField(text));
  return plain;
}

Status WriteCsv(const std::string& path, const SweepDocument& sweep) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  BufferedTextWriter csv(writer->stream());
  std::vector<AxisColumn> columns;
  for (const SweepAxis& axis : sweep.axes) {
    columns.push_back(ColumnOf(axis));
    csv.Append("{},", CsvField(axis.key + columns.back().suffix));
  }
  csv.Append(
      "status,iteration_time_s,average_iteration_time_s,samples_per_second,"
      "tokens_per_second,mfu,memory_bytes,{},time_to_train_s,error\n",
      kBreakdownCsvColumns);
  for (const SweepPoint& point : sweep.points) {
    for (size_t a = 0; a < sweep.axes.size(); ++a) {
      csv.Append("{},", columns[a].cells[point.choice[a]]);
    }
    if (!point.figures) {
      csv.Append("failed,,,,,,,,,,,,,,,,,{}\n", CsvField(point.error));
      continue;
    }
    const strategies::PlanFigures& f = *point.figures;
    const strategies::TimeBreakdown& b = f.breakdown;
    csv.Append("ok,{},{},{},{},{},{}", f.iteration_time.ToSecondsDouble(),
               f.average_iteration_time.ToSecondsDouble(), f.samples_per_second,
               f.tokens_per_second, f.mfu, point.memory_bytes);
    for (DurationNs part : BreakdownCsvParts(b)) csv.Append(",{}", part.ToSecondsDouble());
    // Empty without a time_to_train section.
    csv.Append(",{},\n", f.time_to_train_s ? fmt::format("{}", *f.time_to_train_s) : "");
  }
  csv.Flush();
  return writer->Commit();
}

Expected<SweepRecord::Point> PointFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  SweepRecord::Point point;
  DTSIM_RETURN_IF_ERROR(ChildObject(reader, "values"));
  point.values = value["values"];
  DTSIM_ASSIGN_OR_RETURN(const std::string status, reader.String("status"));
  if (status == "ok") {
    const Json* result = reader.Find("result");
    if (result == nullptr) return Error("missing required field", JsonChildPath(path, "result"));
    DTSIM_ASSIGN_OR_RETURN(SimulateResultRecord record,
                           SimulateResultFromJson(*result, JsonChildPath(path, "result")));
    point.result = std::move(record);
  } else if (status == "failed") {
    DTSIM_ASSIGN_OR_RETURN(point.error, reader.String("error"));
  } else {
    return Error("expected \"ok\" or \"failed\"", JsonChildPath(path, "status"), Quote(status));
  }
  return point;
}

}  // namespace

OrderedJson SweepJson(const SweepDocument& sweep) {
  OrderedJson vary = OrderedJson::array();
  for (const SweepAxis& axis : sweep.axes) {
    vary.push_back({{"key", axis.key}, {"values", axis.values}});
  }
  OrderedJson list = OrderedJson::array();
  for (const SweepPoint& point : sweep.points) {
    OrderedJson values = OrderedJson::object();
    for (size_t a = 0; a < sweep.axes.size(); ++a) {
      values[sweep.axes[a].key] = sweep.axes[a].values[point.choice[a]];
    }
    list.push_back({{"values", std::move(values)},
                    {"status", point.result ? "ok" : "failed"},
                    {"error", point.result ? OrderedJson() : OrderedJson(point.error)},
                    {"result", point.result ? *point.result : OrderedJson()}});
  }
  OrderedJson document = FormatHeader(kSweepFormat);
  document["config"] = sweep.config;
  document["set"] = sweep.set;
  document["vary"] = std::move(vary);
  document["points"] = std::move(list);
  document["provenance"] = ProvenanceJson();
  return document;
}

Status WriteSweepFiles(const std::string& prefix, const SweepDocument& sweep) {
  DTSIM_RETURN_IF_ERROR(WriteResultFile(prefix + ".json", SweepJson(sweep)));
  return WriteCsv(prefix + ".csv", sweep);
}

Expected<SweepRecord> SweepFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kSweepFormat));
  SweepRecord record;
  DTSIM_ASSIGN_OR_RETURN(record.config, root.String("config"));
  DTSIM_ASSIGN_OR_RETURN(const Json* vary, ChildArray(root, "vary"));
  for (size_t a = 0; a < vary->size(); ++a) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader axis,
                           JsonObjectReader::Make((*vary)[a], JsonIndexPath("vary", a)));
    DTSIM_ASSIGN_OR_RETURN(std::string key, axis.String("key"));
    record.keys.push_back(std::move(key));
  }
  DTSIM_ASSIGN_OR_RETURN(const Json* points, ChildArray(root, "points"));
  for (size_t i = 0; i < points->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(SweepRecord::Point point,
                           PointFromJson((*points)[i], JsonIndexPath("points", i)));
    // A point names its value on every axis: `dtsim report` labels its run by them.
    for (const std::string& key : record.keys) {
      if (!point.values.contains(key)) {
        return Error("missing the value of a varied key",
                     JsonChildPath(JsonIndexPath("points", i), "values"), Quote(key));
      }
    }
    record.points.push_back(std::move(point));
  }
  return record;
}

}  // namespace dtsim::results
