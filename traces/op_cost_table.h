// Measured op costs: one GPU's measured duration per exact op signature, the table the cost
// models price from first (DESIGN §5). Produced from profiles (Kineto traces, the CUPTI
// profiler) and read from the JSON file documented in docs/formats/op-costs.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/dtype.h"
#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"

namespace dtsim::traces {

// What identifies an op's cost: its kind ("gemm", "flash_attention", "layernorm", ...), the
// element type, and named integer dimensions ("m", "n", "k", "batch", "elements", ...).
// Dimensions are kept sorted by name, so equal signatures have equal keys.
struct OpSignature {
  std::string op;
  DType dtype = DType::kBf16;
  std::vector<std::pair<std::string, int64_t>> dims;

  // Inserts or replaces a dimension, keeping the order.
  void SetDim(std::string_view name, int64_t value);
  // The dimension's value, or 0 when absent.
  int64_t Dim(std::string_view name) const;
  // "gemm bf16 k=6144 m=8192 n=2304": the canonical text, used as the lookup key.
  std::string Key() const;
  // The family key "gemm bf16": signatures that differ only in their dimensions.
  std::string FamilyKey() const;
};

struct MeasuredOp {
  OpSignature signature;
  DurationNs duration;  // mean over the samples
  int64_t samples = 1;
  // The median and the fastest sample, when the table was aggregated from samples (profiles
  // made by `dtsim ops`); absent in hand-written tables.
  std::optional<DurationNs> median;
  std::optional<DurationNs> min;
};

// How a table's ops were timed, which decides whether the GPU's power limit still applies to
// them (docs/models.md, "Power-limited clocks"):
//   kIsolated — each op alone, in a short burst on an otherwise idle GPU (tools/op_benchmark.py):
//               the clocks were at boost, so compute-bound ops ran faster than in a training step;
//   kInRun    — inside a training run (`dtsim ops` on a profiler trace of one): as the run ran.
enum class OpTiming : uint8_t { kIsolated, kInRun };
std::string_view OpTimingName(OpTiming timing);

// An immutable set of measured ops with exact lookup by signature and lookup by family.
class OpCostTable {
 public:
  OpCostTable() = default;
  // Errors (naming both entries) when two entries have the same signature.
  static Expected<OpCostTable> Make(std::string gpu, std::string source,
                                    std::vector<MeasuredOp> ops,
                                    OpTiming timing = OpTiming::kIsolated);

  const std::string& gpu() const { return gpu_; }
  const std::string& source() const { return source_; }
  OpTiming timing() const { return timing_; }
  const std::vector<MeasuredOp>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }

  const MeasuredOp* Find(const OpSignature& signature) const;
  // Indices into ops() of the entries in `signature`'s family (empty when none).
  const std::vector<uint32_t>& Family(const OpSignature& signature) const;

 private:
  std::string gpu_;
  std::string source_;
  OpTiming timing_ = OpTiming::kIsolated;
  std::vector<MeasuredOp> ops_;
  std::unordered_map<std::string, uint32_t> by_key_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_family_;
};

inline constexpr FileFormat kOpCostFormat{"dtsim.op_costs", 1, 1, "not an op-cost table"};

// An entry's signature fields, "op", "dtype" and "dims" ({"m": 8192, ...}), as op-cost tables
// and op lists (docs/formats/op-list.md) write them.
Expected<OpSignature> ReadOpSignature(JsonObjectReader& entry);

// The file form: {"format": "dtsim.op_costs", "version": "1.1", "gpu": "...", "source": "...",
// "timing": "isolated" | "in_run" (absent: isolated), "ops": [{"op": "gemm", "dtype": "bf16",
// "dims": {"m": 8192, ...}, "time": "1.25 ms", "samples": 10, "median": "1.2 ms", "min": "1.1 ms"},
// ...]}. Errors name the JSON path and the bad value.
Expected<OpCostTable> OpCostTableFromJson(const Json& value);
Expected<OpCostTable> ReadOpCostTable(const std::string& path);
Json OpCostTableToJson(const OpCostTable& table);
// Written atomically: a failed write leaves any previous file in place.
Status WriteOpCostTable(const OpCostTable& table, const std::string& path);

}  // namespace dtsim::traces
