// Gradient compression, registered by name (docs/strategies.md, "Gradient compression"): how a
// bucket of data-parallel gradients is reduced — the GPU kernels that compress and decompress it
// and the collectives its payload rides — and which phases a training run goes through
// (full-precision warm-up, then compressed).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/ops.h"
#include "sim/base/dtype.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/units.h"
#include "sim/graph/task.h"

namespace dtsim::strategies {

enum class CompressionPhase { kWarmup, kCompressed };
std::string_view CompressionPhaseName(CompressionPhase phase);

// The config's "compression" section (docs/config.md). Plain data: MakeCompression turns it
// into the method.
struct CompressionConfig {
  std::string method = "none";
  int64_t steps = 100000;  // the training run the per-phase iteration times are averaged over
  std::optional<int64_t> warmup_steps;  // full-precision steps first; unset: the method's default
  double density = 0.01;                // topk: fraction of the elements sent
  int bits = 8;                         // qsgd: bits per element, sign included
  int64_t quantization_bucket = 512;    // qsgd: elements sharing one fp32 scale
  int rank = 1;                         // powersgd: rank of the approximation
  double min_compression_rate = 2;      // powersgd: compress a matrix only if it shrinks this much
};

// Gradients of some parameters as PowerSGD sees them: weight matrices (rows × columns) and
// everything else (biases, norms) as plain elements.
struct GradientTensors {
  std::vector<std::array<int64_t, 2>> matrices;
  int64_t vector_elements = 0;

  int64_t elements() const;
  void Append(const GradientTensors& other);
};

// One step of reducing a bucket: a collective over the data-parallel ranks, or GPU kernels run
// back to back (priced by the cost model and summed into one task).
struct ReductionStep {
  std::string name;
  std::optional<graph::CommKind> collective;
  Bytes bytes;  // the collective's size per rank (all_gather: each rank's contribution)
  std::vector<models::Op> kernels;
};

class GradientCompression {
 public:
  virtual ~GradientCompression() = default;
  virtual std::string_view name() const = 0;
  // Full-precision steps before compression starts.
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t steps() const { return steps_; }
  // Whether compressed gradients are reduced as one buffer after the backward pass instead of
  // bucket by bucket during it: the 1-bit optimizers compress the momentum at the step.
  virtual bool ReducesAtStep() const { return false; }
  // Whether the method changes the reduction at all (false only for "none").
  virtual bool Compresses() const { return true; }
  // Whether the method is an optimizer of its own built on Adam's state (1-bit Adam and LAMB
  // compress its momentum): the config's optimizer must be Adam.
  virtual bool ReplacesAdam() const { return false; }
  // The steps that reduce one bucket over `ranks` (≥ 2) data-parallel ranks once compressing.
  virtual std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int ranks,
                                            DType grad_dtype) const = 0;
  // Per-rank state the method keeps (error-feedback residuals) for `elements` local gradient
  // elements of which `matrices` are the weight matrices.
  virtual int64_t StateBytes(const GradientTensors& local, int ranks, DType grad_dtype) const = 0;

 protected:
  GradientCompression(int64_t steps, int64_t warmup_steps)
      : steps_(steps), warmup_steps_(warmup_steps) {}

 private:
  int64_t steps_;
  int64_t warmup_steps_;
};

// Every registered method, in the order errors list them.
std::span<const std::string_view> CompressionNames();
// Reads the "compression" section; errors name the JSON path, the value and, for an unknown
// method, the registered ones.
Expected<CompressionConfig> CompressionFromJson(const Json& value, const std::string& path);
// Precondition: `config` came from CompressionFromJson.
std::unique_ptr<GradientCompression> MakeCompression(const CompressionConfig& config);

// The uncompressed reduction: one all-reduce of the gradients as they are.
std::vector<ReductionStep> PlainAllReduce(int64_t elements, DType grad_dtype);

// Bytes one rank sends for `step` over `ranks` ranks with ring algorithms (all-reduce
// 2(N−1)/N·S, reduce-scatter and all-to-all (N−1)/N·S, all-gather (N−1)·S); 0 for kernels.
double WireBytesPerRank(const ReductionStep& step, int ranks);

}  // namespace dtsim::strategies
