#include "strategies/compression.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "sim/base/check.h"
#include "sim/base/json_reader.h"
#include "sim/base/registry.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using models::Op;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A memory-bound kernel over `elements` with its own signature (so a measured table can price
// compression kernels apart from the model's element-wise ops).
Op Kernel(std::string_view signature, int64_t elements, double bytes_per_element,
          double flops_per_element, DType dtype = DType::kFp32) {
  Op op =
      Op::Streaming(std::string(signature), models::OpKind::kElementwise, models::Pass::kOptimizer,
                    dtype, elements, bytes_per_element, flops_per_element);
  op.signature.op = std::string(signature);
  return op;
}

ReductionStep Collective(std::string name, CommKind kind, double bytes) {
  return {.name = std::move(name),
          .collective = kind,
          .bytes = Bytes(static_cast<int64_t>(std::ceil(bytes))),
          .kernels = {}};
}

ReductionStep Kernels(std::string name, std::vector<Op> kernels) {
  return {.name = std::move(name),
          .collective = std::nullopt,
          .bytes = Bytes(0),
          .kernels = std::move(kernels)};
}

// fp16 / bf16: cast the gradients down, all-reduce half the bytes, cast back (PyTorch's
// fp16_compress_hook / bf16_compress_hook). Gradients already in 16 bits need no cast.
class CastCompression final : public GradientCompression {
 public:
  CastCompression(const CompressionConfig& config, DType to)
      : GradientCompression(config.steps, config.warmup_steps.value_or(0)), to_(to) {}
  std::string_view name() const override { return DTypeName(to_); }

  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int,
                                    DType grad_dtype) const override {
    const int64_t n = bucket.elements();
    const double from = DTypeBytes(grad_dtype);
    const double to = DTypeBytes(to_);
    if (from <= to) return PlainAllReduce(n, grad_dtype);
    return {Kernels("cast gradients", {Kernel("cast_compress", n, from + to, 1)}),
            Collective("gradient all-reduce", CommKind::kAllReduce, to * static_cast<double>(n)),
            Kernels("cast back", {Kernel("cast_decompress", n, to + from, 1)})};
  }

  int64_t StateBytes(const GradientTensors&, int, DType) const override { return 0; }

 private:
  DType to_;
};

// 1-bit Adam / 1-bit LAMB as DeepSpeed's compressed_allreduce runs them (notes §9.1, §9.2):
// worker compression with error feedback, an all-to-all of sign chunks, a server-side average
// with its own error feedback, an all-gather of the server chunks; scales gathered alongside.
class OneBitCompression final : public GradientCompression {
 public:
  OneBitCompression(const CompressionConfig& config, std::string_view name)
      : GradientCompression(config.steps,
                            config.warmup_steps.value_or(CeilDiv(config.steps * 15, 100))),
        name_(name) {}
  std::string_view name() const override { return name_; }
  bool ReducesAtStep() const override { return true; }
  bool ReplacesAdam() const override { return true; }

  // ñ: n padded to a multiple of N·lcm(N, 8) so that every chunk packs into whole bytes.
  static int64_t Padded(int64_t n, int ranks) {
    const int64_t divider = static_cast<int64_t>(ranks) * std::lcm<int64_t>(ranks, 8);
    return CeilDiv(n, divider) * divider;
  }

  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int ranks,
                                    DType) const override {
    const int64_t padded = Padded(bucket.elements(), ranks);
    const int64_t chunk = padded / ranks;
    const double n_ranks = ranks;
    return {
        // momentum + worker error → fp32 read twice (norm, then sign), error written, signs
        // packed: 4 + 4 + 4 + 4 + 1/8 bytes and ~5 FLOPs per element.
        Kernels("1-bit compress", {Kernel("onebit_compress", padded, 16.125, 5)}),
        Collective("1-bit sign all-to-all", CommKind::kAllToAll, static_cast<double>(padded) / 8),
        Collective("1-bit scale all-gather", CommKind::kAllGather, 4),
        // Server for one chunk: unpack N workers' signs (N/8 bytes per element), scale and sum
        // (N FLOPs), add the server error, norm, sign and pack (16 bytes, ~5 FLOPs).
        Kernels("1-bit server average",
                {Kernel("onebit_server", chunk, n_ranks / 8 + 16, n_ranks + 5)}),
        Collective("1-bit server all-gather", CommKind::kAllGather, static_cast<double>(chunk) / 8),
        Collective("1-bit server scale all-gather", CommKind::kAllGather, 4),
        // Unpack every sign times its chunk's scale into the fp32 averaged momentum.
        Kernels("1-bit decompress", {Kernel("onebit_decompress", padded, 4.125, 1)})};
  }

  // Worker error ñ and server error ñ/N, fp32.
  int64_t StateBytes(const GradientTensors& local, int ranks, DType) const override {
    const int64_t padded = Padded(local.elements(), ranks);
    return 4 * padded + 4 * padded / ranks;
  }

 private:
  std::string_view name_;
};

// Top-k sparsification with error feedback (notes §9.4): the k largest of gradient + residual
// are sent as (value, int32 index) pairs; supports differ across ranks, so an all-gather.
class TopKCompression final : public GradientCompression {
 public:
  explicit TopKCompression(const CompressionConfig& config)
      : GradientCompression(config.steps, config.warmup_steps.value_or(0)),
        density_(config.density) {}
  std::string_view name() const override { return "topk"; }

  int64_t K(int64_t n) const {
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(density_ * static_cast<double>(n))));
  }

  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int ranks,
                                    DType grad_dtype) const override {
    const int64_t n = bucket.elements();
    const int64_t k = K(n);
    const double e = DTypeBytes(grad_dtype);
    const double pair = e + 4;
    return {
        // Add the fp32 residual, select (a radix select reads the sum twice), write the residual
        // back: e + 4 + 2·4 + 4 bytes and ~4 FLOPs per element.
        Kernels("top-k select", {Kernel("topk_select", n, e + 16, 4)}),
        Collective("top-k all-gather", CommKind::kAllGather, static_cast<double>(k) * pair),
        // Zero the dense buffer, then scatter-add N·k pairs (read the pair, read-modify-write
        // the target).
        Kernels("top-k scatter-add", {Kernel("topk_zero", n, e, 0),
                                      Kernel("topk_scatter", k * ranks, pair + 2 * e, 1)})};
  }

  int64_t StateBytes(const GradientTensors& local, int, DType) const override {
    return 4 * local.elements();  // the fp32 residual
  }

 private:
  double density_;
};

// QSGD-style stochastic quantization to `bits` per element (sign included) with one fp32 scale
// per bucket of elements (notes §9.5); not summable in place, so an all-gather.
class QsgdCompression final : public GradientCompression {
 public:
  explicit QsgdCompression(const CompressionConfig& config)
      : GradientCompression(config.steps, config.warmup_steps.value_or(0)),
        bits_(config.bits),
        bucket_(config.quantization_bucket) {}
  std::string_view name() const override { return "qsgd"; }

  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int ranks,
                                    DType grad_dtype) const override {
    const int64_t n = bucket.elements();
    const double e = DTypeBytes(grad_dtype);
    const double payload = std::ceil(static_cast<double>(n) * bits_ / 8) +
                           4.0 * static_cast<double>(CeilDiv(n, bucket_));
    return {// Norm pass, then quantize with one random draw per element.
            Kernels("quantize", {Kernel("qsgd_quantize", n, 2 * e + bits_ / 8.0, 6)}),
            Collective("quantized all-gather", CommKind::kAllGather, payload),
            // Decode the N contributions and sum them into the dense gradient.
            Kernels("dequantize and sum",
                    {Kernel("qsgd_dequantize", n, ranks * bits_ / 8.0 + e, 2.0 * ranks)})};
  }

  int64_t StateBytes(const GradientTensors&, int, DType) const override { return 0; }

 private:
  int bits_;
  int64_t bucket_;
};

// PowerSGD of rank r as PyTorch's DDP hook runs it (notes §9.6): 1-D tensors and matrices that
// would not shrink by min_compression_rate are all-reduced uncompressed; for the rest
// P = M·Q, all-reduce P, orthogonalize P, Q = Mᵀ·P, all-reduce Q, M̂ = P·Qᵀ, error feedback.
class PowerSgdCompression final : public GradientCompression {
 public:
  explicit PowerSgdCompression(const CompressionConfig& config)
      : GradientCompression(config.steps, config.warmup_steps.value_or(1000)),
        rank_(config.rank),
        min_rate_(config.min_compression_rate) {}
  std::string_view name() const override { return "powersgd"; }

  bool Compressible(const std::array<int64_t, 2>& matrix) const {
    const double full = static_cast<double>(matrix[0]) * static_cast<double>(matrix[1]);
    return static_cast<double>(matrix[0] + matrix[1]) * rank_ * min_rate_ < full;
  }

  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int,
                                    DType grad_dtype) const override {
    const double e = DTypeBytes(grad_dtype);
    int64_t uncompressed = bucket.vector_elements;
    int64_t p_elements = 0;
    int64_t q_elements = 0;
    std::vector<Op> project, orthogonalize, back, rebuild;
    for (const auto& matrix : bucket.matrices) {
      if (!Compressible(matrix)) {
        uncompressed += matrix[0] * matrix[1];
        continue;
      }
      const int64_t rows = matrix[0];
      const int64_t cols = matrix[1];
      p_elements += rows * rank_;
      q_elements += cols * rank_;
      // M += error (read both, write M), then P = M·Q.
      project.push_back(Kernel("powersgd_error_add", rows * cols, 3 * e, 1, grad_dtype));
      project.push_back(
          Op::Gemm("powersgd.p", models::Pass::kOptimizer, grad_dtype, rows, rank_, cols));
      // Gram-Schmidt over r columns of length rows: ~2·rows·r² FLOPs, each column read r times.
      orthogonalize.push_back(
          Kernel("powersgd_orthogonalize", rows * rank_, rank_ * e, 2.0 * rank_, grad_dtype));
      back.push_back(
          Op::Gemm("powersgd.q", models::Pass::kOptimizer, grad_dtype, cols, rank_, rows));
      // M̂ = P·Qᵀ, then error = M − M̂ (read both, write the error).
      rebuild.push_back(
          Op::Gemm("powersgd.rebuild", models::Pass::kOptimizer, grad_dtype, rows, cols, rank_));
      rebuild.push_back(Kernel("powersgd_error_update", rows * cols, 3 * e, 1, grad_dtype));
    }
    std::vector<ReductionStep> steps;
    if (uncompressed > 0) {
      steps.push_back(Collective("uncompressed all-reduce", CommKind::kAllReduce,
                                 e * static_cast<double>(uncompressed)));
    }
    if (p_elements == 0) return steps;
    steps.push_back(Kernels("PowerSGD P = MQ", std::move(project)));
    steps.push_back(Collective("PowerSGD P all-reduce", CommKind::kAllReduce,
                               e * static_cast<double>(p_elements)));
    steps.push_back(Kernels("PowerSGD orthogonalize", std::move(orthogonalize)));
    steps.push_back(Kernels("PowerSGD Q = MᵀP", std::move(back)));
    steps.push_back(Collective("PowerSGD Q all-reduce", CommKind::kAllReduce,
                               e * static_cast<double>(q_elements)));
    steps.push_back(Kernels("PowerSGD M = PQᵀ", std::move(rebuild)));
    return steps;
  }

  // The error buffer (the size of the compressed matrices) and the P and Q kept for warm start.
  int64_t StateBytes(const GradientTensors& local, int, DType grad_dtype) const override {
    int64_t elements = 0;
    for (const auto& matrix : local.matrices) {
      if (Compressible(matrix)) elements += matrix[0] * matrix[1] + (matrix[0] + matrix[1]) * rank_;
    }
    return elements * DTypeBytes(grad_dtype);
  }

 private:
  int rank_;
  double min_rate_;
};

// No compression: one all-reduce per bucket.
class NoCompression final : public GradientCompression {
 public:
  explicit NoCompression(const CompressionConfig& config) : GradientCompression(config.steps, 0) {}
  std::string_view name() const override { return "none"; }
  bool Compresses() const override { return false; }
  std::vector<ReductionStep> Reduce(const GradientTensors& bucket, int,
                                    DType grad_dtype) const override {
    return PlainAllReduce(bucket.elements(), grad_dtype);
  }
  int64_t StateBytes(const GradientTensors&, int, DType) const override { return 0; }
};

Status ReadNumber(JsonObjectReader& reader, std::string_view key, double min, double max,
                  double& out) {
  reader.Allow(key);
  if (!reader.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(out, reader.Number(key));
  if (!(out > min && out <= max)) {
    return Error(fmt::format("must be in ({}, {}]", min, max), JsonChildPath(reader.path(), key),
                 JsonValueForError(*reader.Find(key)));
  }
  return Status::Ok();
}

// The keys a method reads beyond method, steps and warmup_steps.
Status NoOptions(JsonObjectReader& /*reader*/, CompressionConfig& /*config*/) {
  return Status::Ok();
}
Status TopKOptions(JsonObjectReader& reader, CompressionConfig& config) {
  return ReadNumber(reader, "density", 0, 1, config.density);
}
Status QsgdOptions(JsonObjectReader& reader, CompressionConfig& config) {
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("bits", config.bits, 2, 16));
  return reader.ReadOptionalInt("bucket", config.quantization_bucket);
}
Status PowerSgdOptions(JsonObjectReader& reader, CompressionConfig& config) {
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("rank", config.rank, 1, 1024));
  return ReadNumber(reader, "min_compression_rate", 0, 1e9, config.min_compression_rate);
}

// One registered method: its name, the options it reads and its factory. Adding a method is a
// GradientCompression subclass above and one entry here.
struct MethodEntry {
  std::string_view name;
  Status (*read_options)(JsonObjectReader& reader, CompressionConfig& config);
  std::unique_ptr<GradientCompression> (*make)(const CompressionConfig& config);
};

using Made = std::unique_ptr<GradientCompression>;
constexpr std::array<MethodEntry, 8> kMethods = {{
    {"none", NoOptions,
     [](const CompressionConfig& c) -> Made { return std::make_unique<NoCompression>(c); }},
    {"fp16", NoOptions,
     [](const CompressionConfig& c) -> Made {
       return std::make_unique<CastCompression>(c, DType::kFp16);
     }},
    {"bf16", NoOptions,
     [](const CompressionConfig& c) -> Made {
       return std::make_unique<CastCompression>(c, DType::kBf16);
     }},
    {"onebit_adam", NoOptions,
     [](const CompressionConfig& c) -> Made {
       return std::make_unique<OneBitCompression>(c, "onebit_adam");
     }},
    {"onebit_lamb", NoOptions,
     [](const CompressionConfig& c) -> Made {
       return std::make_unique<OneBitCompression>(c, "onebit_lamb");
     }},
    {"topk", TopKOptions,
     [](const CompressionConfig& c) -> Made { return std::make_unique<TopKCompression>(c); }},
    {"qsgd", QsgdOptions,
     [](const CompressionConfig& c) -> Made { return std::make_unique<QsgdCompression>(c); }},
    {"powersgd", PowerSgdOptions,
     [](const CompressionConfig& c) -> Made { return std::make_unique<PowerSgdCompression>(c); }},
}};
constexpr std::array<std::string_view, kMethods.size()> kMethodNames = RegistryNames(kMethods);

Expected<const MethodEntry*> FindMethod(std::string_view name) {
  return FindInRegistry<MethodEntry>(kMethods, kMethodNames, name, "compression method");
}

}  // namespace

std::string_view CompressionPhaseName(CompressionPhase phase) {
  return phase == CompressionPhase::kWarmup ? "warmup" : "compressed";
}

int64_t GradientTensors::elements() const {
  int64_t n = vector_elements;
  for (const auto& matrix : matrices) n += matrix[0] * matrix[1];
  return n;
}

void GradientTensors::Append(const GradientTensors& other) {
  matrices.insert(matrices.end(), other.matrices.begin(), other.matrices.end());
  vector_elements += other.vector_elements;
}

std::span<const std::string_view> CompressionNames() { return kMethodNames; }

Expected<CompressionConfig> CompressionFromJson(const Json& value, const std::string& path) {
  CompressionConfig config;
  if (value.is_string()) return CompressionFromJson(Json{{"method", value}}, path);
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  DTSIM_ASSIGN_OR_RETURN(config.method, reader.StringOr("method", config.method));
  Expected<const MethodEntry*> method = FindMethod(config.method);
  if (!method.ok()) return std::move(method).error().Under(JsonChildPath(path, "method"));
  if (config.method != "none") {
    DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("steps", config.steps));
    if (reader.Has("warmup_steps")) {
      int64_t warmup = 0;
      DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("warmup_steps", warmup, 0));
      if (warmup > config.steps) {
        return Error(fmt::format("more warm-up steps than the run has ({})", config.steps),
                     JsonChildPath(path, "warmup_steps"), std::to_string(warmup));
      }
      config.warmup_steps = warmup;
    }
  }
  DTSIM_RETURN_IF_ERROR((*method)->read_options(reader, config));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return config;
}

std::unique_ptr<GradientCompression> MakeCompression(const CompressionConfig& config) {
  Expected<const MethodEntry*> method = FindMethod(config.method);
  DTSIM_CHECK(method.ok(), "MakeCompression needs a config read by CompressionFromJson");
  return (*method)->make(config);
}

std::vector<ReductionStep> PlainAllReduce(int64_t elements, DType grad_dtype) {
  return {Collective("gradient all-reduce", CommKind::kAllReduce,
                     static_cast<double>(elements) * DTypeBytes(grad_dtype))};
}

double WireBytesPerRank(const ReductionStep& step, int ranks) {
  if (!step.collective || ranks < 2) return 0;
  const double n = ranks;
  const double size = static_cast<double>(step.bytes.count());
  switch (*step.collective) {
    case CommKind::kAllReduce:
      return 2 * (n - 1) / n * size;
    case CommKind::kReduceScatter:
    case CommKind::kAllToAll:
      return (n - 1) / n * size;
    case CommKind::kAllGather:
      return (n - 1) * size;
    default:
      return size;
  }
}

}  // namespace dtsim::strategies
