// Peak memory against measured runs (`dtsim validate` on a memory points file,
// docs/validation.md "Peak memory"): each point a dtsim config and the peak a run of it
// measured, and whether it ran or ran out of memory.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::strategies {

inline constexpr std::string_view kMemoryPointsFormat = "dtsim.memory_points";

// Whether a measurements file is a memory points file ({"format": "dtsim.memory_points"}).
bool IsMemoryPointsFile(const Json& file);

// What a measured peak counts: PyTorch's caching allocator's peak of allocated tensors
// (torch.cuda.max_memory_allocated, Megatron's "max allocated") or of reserved segments
// (max_memory_reserved; torchtitan's log), or the device memory in use (nvidia-smi, NVML:
// the CUDA context included).
enum class MeasuredMemory { kAllocated, kReserved, kDevice };
std::string_view MeasuredMemoryName(MeasuredMemory kind);
std::span<const std::string_view> MeasuredMemoryNames();  // indexed by MeasuredMemory

struct MemoryRow {
  std::string id;
  std::string source;    // where the measurement was published or recorded
  std::string location;  // where in it (a table, a row); may be empty
  MeasuredMemory kind = MeasuredMemory::kAllocated;
  double measured_bytes = 0;  // 0: none given (a run that ran out of memory, or a verdict only)
  bool ran = true;            // false: the run ran out of memory
  // dtsim's peak over the plan's pipeline stages (EstimateStageMemory), the stage it is on,
  // and the GPU's capacity: `needed_bytes` everything (the CUDA context included), what the
  // fit verdict compares; `predicted_bytes` what the measured kind counts — the allocator's
  // tensors for allocated and reserved, everything for device.
  double predicted_bytes = 0;
  double needed_bytes = 0;
  int stage = 0;
  double capacity_bytes = 0;
  // What the run did that dtsim does not model (torch.compile, a library's FP8, …): its error
  // says how much that matters, and it is left out of the comparable rows' error.
  std::vector<std::string> unmodelled;

  bool HasPeak() const { return measured_bytes > 0; }
  bool Comparable() const { return unmodelled.empty() && HasPeak(); }
  bool PredictedFits() const { return needed_bytes <= capacity_bytes; }
  bool VerdictRight() const { return PredictedFits() == ran; }
  double Error() const { return predicted_bytes / measured_bytes - 1; }  // HasPeak only
};

struct MemoryReport {
  std::vector<MemoryRow> rows;
  std::vector<std::string> sources;  // in order of first appearance
  // Mean absolute and signed percentage errors over the comparable rows, and over all with a
  // measured peak (`measured` of them).
  double comparable_mape = 0;
  double comparable_mean_error = 0;
  int comparable = 0;
  double all_mape = 0;
  int measured = 0;
  int wrong_verdicts = 0;
};

// A report of `rows`: the sources and the errors over them.
MemoryReport SummarizeMemory(std::vector<MemoryRow> rows);

// Reads and simulates every point; a point that is not well formed, or whose config dtsim
// rejects, is an error naming the point's JSON path in `source`.
Expected<MemoryReport> ValidateMemory(const Json& file, const std::string& source);

}  // namespace dtsim::strategies
