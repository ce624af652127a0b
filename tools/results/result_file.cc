#include "tools/results/result_file.h"

#include <array>

#include "profiler/kineto_writer.h"
#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "sim/graph/graph_json.h"
#include "strategies/calibration.h"
#include "tools/results/model_report.h"
#include "tools/results/op_list.h"
#include "tools/results/replay_result.h"
#include "tools/results/run_result.h"
#include "tools/results/search_results.h"
#include "tools/results/simulate_result.h"
#include "tools/results/sweep_result.h"
#include "tools/results/validation_report.h"
#include "traces/chakra_graph.h"
#include "traces/chrome_trace_writer.h"
#include "traces/op_cost_table.h"

namespace dtsim::results {

std::span<const WrittenFormat> WrittenFormats() {
  static const std::array<WrittenFormat, 14> kFormats = {{
      {&graph::kTaskGraphFormat, "task-graph"},
      {&kRunResultFormat, "run-result"},
      {&kSimulateResultFormat, "simulate-result"},
      {&kOpListFormat, "op-list"},
      {&traces::kOpCostFormat, "op-costs"},
      {&traces::kTimelineFormat, "timeline"},
      {&traces::kChakraExportFormat, "chakra"},
      {&kSweepFormat, "sweep-result"},
      {&kSearchResultFormat, "search-result"},
      {&kReplayResultFormat, "replay-result"},
      {&kValidationReportFormat, "validation-report"},
      {&kModelReportFormat, "model-report"},
      {&profiler::kProfileFormat, "profile"},
      {&strategies::kCalibrationFormat, "calibration"},
  }};
  return kFormats;
}

Status WriteResultFile(const std::string& path, const OrderedJson& document) {
  return WriteFileAtomically(path, DumpJson(document, 2) + "\n");
}

Expected<Json> ReadResultFile(const std::string& path, const FileFormat& format) {
  DTSIM_ASSIGN_OR_RETURN(Json document, ReadJsonFile(path));
  Status checked = CheckFormat(document, format);
  if (!checked.ok()) return std::move(checked).error().InFile(path);
  return document;
}

Expected<JsonObjectReader> ChildObject(JsonObjectReader& parent, std::string_view key) {
  const std::string path = JsonChildPath(parent.path(), key);
  const Json* value = parent.Find(key);
  if (value == nullptr) return Error("missing required field", path);
  return JsonObjectReader::Make(*value, path);
}

Expected<const Json*> ChildArray(JsonObjectReader& parent, std::string_view key) {
  const Json* value = parent.Find(key);
  const std::string path = JsonChildPath(parent.path(), key);
  if (value == nullptr) return Error("missing required field", path);
  if (!value->is_array()) return Error("expected an array", path, JsonValueForError(*value));
  return value;
}

}  // namespace dtsim::results
