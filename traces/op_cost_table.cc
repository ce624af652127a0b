#include "traces/op_cost_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sim/base/atomic_file.h"
#include "sim/base/strings.h"

namespace dtsim::traces {

void OpSignature::SetDim(std::string_view name, int64_t value) {
  auto it = std::lower_bound(dims.begin(), dims.end(), name,
                             [](const auto& dim, std::string_view key) { return dim.first < key; });
  if (it != dims.end() && it->first == name) {
    it->second = value;
  } else {
    dims.insert(it, {std::string(name), value});
  }
}

int64_t OpSignature::Dim(std::string_view name) const {
  for (const auto& [key, value] : dims) {
    if (key == name) return value;
  }
  return 0;
}

std::string OpSignature::FamilyKey() const { return fmt::format("{} {}", op, DTypeName(dtype)); }

std::string OpSignature::Key() const {
  std::string key = FamilyKey();
  for (const auto& [name, value] : dims) key += fmt::format(" {}={}", name, value);
  return key;
}

std::string_view OpTimingName(OpTiming timing) {
  return timing == OpTiming::kInRun ? "in_run" : "isolated";
}

Expected<OpCostTable> OpCostTable::Make(std::string gpu, std::string source,
                                        std::vector<MeasuredOp> ops, OpTiming timing) {
  OpCostTable table;
  table.gpu_ = std::move(gpu);
  table.source_ = std::move(source);
  table.timing_ = timing;
  table.ops_ = std::move(ops);
  for (uint32_t i = 0; i < table.ops_.size(); ++i) {
    const OpSignature& signature = table.ops_[i].signature;
    auto [it, inserted] = table.by_key_.emplace(signature.Key(), i);
    if (!inserted) {
      return Error(fmt::format("duplicate op signature (also ops[{}])", it->second),
                   fmt::format("ops[{}]", i), Quote(signature.Key()));
    }
    table.by_family_[signature.FamilyKey()].push_back(i);
  }
  return table;
}

const MeasuredOp* OpCostTable::Find(const OpSignature& signature) const {
  auto it = by_key_.find(signature.Key());
  return it == by_key_.end() ? nullptr : &ops_[it->second];
}

const std::vector<uint32_t>& OpCostTable::Family(const OpSignature& signature) const {
  static const std::vector<uint32_t> kNoOps;
  auto it = by_family_.find(signature.FamilyKey());
  return it == by_family_.end() ? kNoOps : it->second;
}

namespace {

Expected<DType> ReadDType(JsonObjectReader& reader) {
  DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("dtype"));
  if (std::optional<DType> dtype = DTypeFromName(name)) return *dtype;
  return Error(fmt::format("unknown dtype{}; known: {}", DidYouMean(name, DTypeNames()),
                           JoinQuoted(DTypeNames())),
               JsonChildPath(reader.path(), "dtype"), Quote(name));
}

// An optional positive duration field.
Expected<std::optional<DurationNs>> ReadOptionalTime(JsonObjectReader& reader,
                                                     std::string_view key) {
  if (reader.Find(key) == nullptr) return std::optional<DurationNs>();
  DTSIM_ASSIGN_OR_RETURN(const DurationNs duration, reader.Duration(key));
  if (duration <= DurationNs::Zero()) {
    return Error("a measured time must be positive", JsonChildPath(reader.path(), key),
                 JsonValueForError(*reader.Find(key)));
  }
  return std::optional<DurationNs>(duration);
}

Expected<MeasuredOp> ReadMeasuredOp(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  MeasuredOp op;
  DTSIM_ASSIGN_OR_RETURN(op.signature, ReadOpSignature(reader));
  DTSIM_ASSIGN_OR_RETURN(op.duration, reader.Duration("time"));
  if (op.duration <= DurationNs::Zero()) {
    return Error("a measured time must be positive", JsonChildPath(path, "time"),
                 JsonValueForError(*reader.Find("time")));
  }
  DTSIM_ASSIGN_OR_RETURN(op.samples, reader.IntOr("samples", 1));
  if (op.samples < 1) {
    return Error("samples must be at least 1", JsonChildPath(path, "samples"),
                 std::to_string(op.samples));
  }
  DTSIM_ASSIGN_OR_RETURN(op.median, ReadOptionalTime(reader, "median"));
  DTSIM_ASSIGN_OR_RETURN(op.min, ReadOptionalTime(reader, "min"));
  if (op.min && (*op.min > op.duration || (op.median && *op.min > *op.median))) {
    return Error("min must not exceed the mean (time) or the median", JsonChildPath(path, "min"),
                 JsonValueForError(*reader.Find("min")));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return op;
}

}  // namespace

Expected<OpSignature> ReadOpSignature(JsonObjectReader& reader) {
  OpSignature signature;
  DTSIM_ASSIGN_OR_RETURN(signature.op, reader.String("op"));
  if (signature.op.empty()) {
    return Error("op name must not be empty", JsonChildPath(reader.path(), "op"), "\"\"");
  }
  DTSIM_ASSIGN_OR_RETURN(signature.dtype, ReadDType(reader));
  const Json* dims = reader.Find("dims");
  if (dims != nullptr) {
    const std::string dims_path = JsonChildPath(reader.path(), "dims");
    if (!dims->is_object()) {
      return Error("expected an object of named dimensions", dims_path, JsonValueForError(*dims));
    }
    for (const auto& [name, dim] : dims->items()) {
      DTSIM_ASSIGN_OR_RETURN(const int64_t size, JsonToInt(dim, JsonChildPath(dims_path, name), 1,
                                                           std::numeric_limits<int64_t>::max()));
      signature.SetDim(name, size);
    }
  }
  return signature;
}

Expected<OpCostTable> OpCostTableFromJson(const Json& value) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(reader, kOpCostFormat));
  DTSIM_ASSIGN_OR_RETURN(std::string gpu, reader.String("gpu"));
  DTSIM_ASSIGN_OR_RETURN(std::string source, reader.StringOr("source", ""));
  DTSIM_ASSIGN_OR_RETURN(const std::string timing_name, reader.StringOr("timing", "isolated"));
  OpTiming timing = OpTiming::kIsolated;
  if (timing_name == "in_run") {
    timing = OpTiming::kInRun;
  } else if (timing_name != "isolated") {
    return Error(
        "expected \"isolated\" (ops timed alone, in short bursts) or \"in_run\" "
        "(timed inside a training run)",
        "timing", Quote(timing_name));
  }
  const Json* ops_json = reader.Find("ops");
  if (ops_json == nullptr || !ops_json->is_array()) {
    return Error("expected an array of measured ops", "ops",
                 ops_json == nullptr ? "" : JsonValueForError(*ops_json));
  }
  std::vector<MeasuredOp> ops;
  ops.reserve(ops_json->size());
  for (size_t i = 0; i < ops_json->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(MeasuredOp op, ReadMeasuredOp((*ops_json)[i], JsonIndexPath("ops", i)));
    ops.push_back(std::move(op));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return OpCostTable::Make(std::move(gpu), std::move(source), std::move(ops), timing);
}

Expected<OpCostTable> ReadOpCostTable(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(path));
  Expected<OpCostTable> table = OpCostTableFromJson(json);
  if (!table.ok()) return std::move(table).error().InFile(path);
  return table;
}

Json OpCostTableToJson(const OpCostTable& table) {
  Json ops = Json::array();
  for (const MeasuredOp& op : table.ops()) {
    Json dims = Json::object();
    for (const auto& [name, value] : op.signature.dims) dims[name] = value;
    Json entry = {{"op", op.signature.op},
                  {"dtype", DTypeName(op.signature.dtype)},
                  {"dims", dims},
                  {"time", fmt::format("{} ns", op.duration.ns())},
                  {"samples", op.samples}};
    if (op.median) entry["median"] = fmt::format("{} ns", op.median->ns());
    if (op.min) entry["min"] = fmt::format("{} ns", op.min->ns());
    ops.push_back(std::move(entry));
  }
  return {{"format", kOpCostFormat.name},
          {"version", kOpCostFormat.Version()},
          {"gpu", table.gpu()},
          {"source", table.source()},
          {"timing", OpTimingName(table.timing())},
          {"ops", ops}};
}

Status WriteOpCostTable(const OpCostTable& table, const std::string& path) {
  return WriteFileAtomically(path, DumpJson(OpCostTableToJson(table), 1) + "\n");
}

}  // namespace dtsim::traces
