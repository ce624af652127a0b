#include "tools/results/op_list.h"

#include "tools/results/result_file.h"

namespace dtsim::results {

OrderedJson OpListJson(const strategies::SimulationConfig& config,
                       const std::vector<models::RecordingCostModel::Recorded>& ops) {
  OrderedJson list = OrderedJson::array();
  for (const models::RecordingCostModel::Recorded& op : ops) {
    OrderedJson dims = OrderedJson::object();
    for (const auto& [name, value] : op.signature.dims) dims[name] = value;
    list.push_back({{"op", op.signature.op},
                    {"dtype", DTypeName(op.signature.dtype)},
                    {"dims", std::move(dims)},
                    {"count", op.count},
                    {"example", op.example}});
  }
  OrderedJson document = FormatHeader(kOpListFormat);
  document["config"] = config.source;
  document["model"] = config.model.name;
  document["gpu"] = config.gpu.name;
  document["ops"] = std::move(list);
  return document;
}

Expected<OpListRecord> OpListFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kOpListFormat));
  OpListRecord record;
  DTSIM_ASSIGN_OR_RETURN(record.config, root.String("config"));
  DTSIM_ASSIGN_OR_RETURN(record.model, root.String("model"));
  DTSIM_ASSIGN_OR_RETURN(record.gpu, root.String("gpu"));
  DTSIM_ASSIGN_OR_RETURN(const Json* ops, ChildArray(root, "ops"));
  for (size_t i = 0; i < ops->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader entry,
                           JsonObjectReader::Make((*ops)[i], JsonIndexPath("ops", i)));
    models::RecordingCostModel::Recorded op;
    DTSIM_ASSIGN_OR_RETURN(op.signature, traces::ReadOpSignature(entry));
    DTSIM_ASSIGN_OR_RETURN(op.count, entry.Int("count"));
    DTSIM_ASSIGN_OR_RETURN(op.example, entry.String("example"));
    record.ops.push_back(std::move(op));
  }
  return record;
}

}  // namespace dtsim::results
