#include "models/gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim::models {

double EfficiencyCurve::TimeSeconds(double work, double peak_per_second) const {
  return work / (peak_per_second * max) + ramp.ToSecondsDouble();
}

double EfficiencyCurve::Efficiency(double work, double peak_per_second) const {
  const double half = ramp.ToSecondsDouble() * peak_per_second * max;
  return work <= 0 ? 0.0 : max * work / (work + half);
}

namespace {

constexpr double kTera = 1e12;

struct Peaks {
  double fp64, fp32, tf32, fp16, bf16, fp8, int8;  // dense, TFLOP/s (TOPS for int8)
};

// Efficiency defaults shared by the presets. They are not fitted to a measurement yet (no
// profile of these GPUs ships with dtsim); docs/models.md says how they were chosen and how to
// fit them from an op-cost table.
constexpr EfficiencyCurve kMatrixDefault{0.80, DurationNs(5'000)};
constexpr EfficiencyCurve kMatrixUnmeasured{0.75, DurationNs(5'000)};  // Blackwell, H100 PCIe
// FP8 GEMMs reach a smaller share of their (doubled) peak than BF16 ones (docs/models.md,
// "FP8"): the default where none was measured.
constexpr EfficiencyCurve kFp8MatrixDefault{0.65, DurationNs(5'000)};
constexpr EfficiencyCurve kMemoryDefault{0.85, DurationNs(2'000)};
constexpr DurationNs kLaunchOverhead(1'000);

// Measured (docs/models.md, "How the curves were fitted"): each GPU's curves are
// models::FitMatrixEfficiency of the GEMMs of its table in tools/examples/profiles/ — the
// training shapes of the shipped examples and of calibration-points.json's FP8 runs, and
// square GEMMs from 256 to 16384 — timed in bursts at boost clock
// (tests/models/gpu_calibration_test.cc refits them). power_limited_compute is the median over
// the compute-bound kernels of their burst time over their time in a 20 s run of all of them
// back to back at the 700 W limit (tests/data/measured/*_sustained_ops.json).
// The flash attention curves are FitAttentionEfficiency of both Hopper tables' flash_attention
// and flash_attention_bwd kernels together (PyTorch's scaled_dot_product_attention, cuDNN's
// flash kernels): compute-bound kernels on one die at one clock, which took the same time on
// both GPUs at the shapes both measured (within 0.5% forward, 3% backward).
constexpr EfficiencyCurve kHopperAttention{0.5942, DurationNs(27'700)};
constexpr EfficiencyCurve kHopperAttentionBackward{0.5251, DurationNs(99'400)};
// attention_power_limited_compute is 1 / the median sustained-over-burst time of the flash
// kernels of the same runs (the sustained_ops files' summaries: 1.365 over 3 on the H100,
// 1.332 over 18 on the H200).
struct Measured {
  EfficiencyCurve matrix;
  EfficiencyCurve fp8_matrix;
  double power_limited_compute = 1.0;
  EfficiencyCurve attention;
  EfficiencyCurve attention_backward;
  double attention_power_limited_compute = 1.0;
};
constexpr Measured kH100Sxm{{0.7818, DurationNs(3'110)},
                            {0.7124, DurationNs(2'900)},
                            0.85,
                            kHopperAttention,
                            kHopperAttentionBackward,
                            0.73};
constexpr Measured kH200{{0.7865, DurationNs(3'170)},
                         {0.728, DurationNs(2'820)},
                         0.84,
                         kHopperAttention,
                         kHopperAttentionBackward,
                         0.75};

GpuSpec MakeGpu(std::string name, const Peaks& peaks, double vector_tflops, int64_t gb_per_s,
                Bytes memory, EfficiencyCurve matrix, bool microscaling = false) {
  GpuSpec gpu;
  gpu.name = std::move(name);
  auto set = [&gpu](DType dtype, double tflops) {
    gpu.matrix_peak[static_cast<size_t>(dtype)] = FlopRate(tflops * kTera);
  };
  set(DType::kFp64, peaks.fp64);
  set(DType::kFp32, peaks.fp32);
  set(DType::kTf32, peaks.tf32);
  set(DType::kFp16, peaks.fp16);
  set(DType::kBf16, peaks.bf16);
  set(DType::kFp8, peaks.fp8);
  set(DType::kInt8, peaks.int8);
  gpu.vector_peak = FlopRate(vector_tflops * kTera);
  gpu.memory_bandwidth = Bandwidth::BytesPerSecond(gb_per_s * kGiga);
  gpu.memory = memory;
  gpu.launch_overhead = kLaunchOverhead;
  gpu.matrix_efficiency = matrix;
  gpu.fp8_matrix_efficiency = kFp8MatrixDefault;
  gpu.memory_efficiency = kMemoryDefault;
  gpu.microscaling = microscaling;
  return gpu;
}

// The CUDA context Hugging Face measured on a V100-SXM2-16GB (NVML's used memory after the
// first CUDA op: 1,343 MiB; CUDA 11.2, PyTorch of January 2022, modules loaded eagerly;
// docs/models.md, "Memory"). Later GPUs keep GpuSpec's default, measured on an H200.
constexpr Bytes kV100Context = Bytes(1'343LL * kMebi);

GpuSpec WithContext(GpuSpec gpu, Bytes context) {
  gpu.context_memory = context;
  return gpu;
}

// Host links (pinned copies, one direction). Measured on an H100 SXM (PCIe Gen5 x16): 16 MiB
// device-to-host in 304.6 µs and host-to-device in 305.5 µs, 55 GB/s
// (tests/data/captured/h100_known_kernels_*.json.gz). A PCIe generation halves the rate per
// step down (Gen4 x16 on the A100, Gen3 x16 on the V100); the same efficiency (55 of Gen5's
// 63 GB/s, 0.87) is assumed on the GB200's NVLink-C2C (450 GB/s each way).
constexpr double kPcieGen5HostGbPerS = 55;
GpuSpec WithHostLink(GpuSpec gpu, double gb_per_s) {
  gpu.host_bandwidth = Bandwidth::BytesPerSecond(gb_per_s * kGiga);
  return gpu;
}

// SM counts from NVIDIA's architecture whitepapers (V100: 80, A100: 108, H100 SXM5: 132, H100
// PCIe: 114; H200 is an H100 SXM5 with more HBM; B200: 148, the GB200's GPU taken as the same).
GpuSpec WithSms(GpuSpec gpu, int sms) {
  gpu.sms = sms;
  return gpu;
}

GpuSpec WithMeasured(GpuSpec gpu, const Measured& measured) {
  gpu.matrix_efficiency = measured.matrix;
  gpu.fp8_matrix_efficiency = measured.fp8_matrix;
  gpu.power_limited_compute = measured.power_limited_compute;
  gpu.attention_efficiency = measured.attention;
  gpu.attention_backward_efficiency = measured.attention_backward;
  gpu.attention_power_limited_compute = measured.attention_power_limited_compute;
  gpu.measured_curves = true;
  return gpu;
}

// An SXM Hopper (H100, H200): the same peaks, its own HBM and measured curves, PCIe Gen5.
GpuSpec HopperSxm(std::string name, int64_t gb_per_s, Bytes memory, const Measured& measured) {
  return WithSms(
      WithHostLink(
          WithMeasured(MakeGpu(std::move(name), {66.9, 66.9, 494.7, 989.4, 989.4, 1978.9, 1978.9},
                               66.9, gb_per_s, memory, kMatrixUnmeasured),
                       measured),
          kPcieGen5HostGbPerS),
      132);
}

// Dense (no structured sparsity) peaks from the NVIDIA datasheets cited in docs/models.md.
// fp32 "matrix" is the non-tensor fp32 rate: a GEMM in fp32 without tf32 runs on CUDA cores.
const std::vector<GpuSpec>& GpuTable() {
  // Host links: PCIe Gen3 (V100), Gen4 (A100), Gen5 (Hopper, B200), NVLink-C2C (GB200).
  constexpr double kGen5 = kPcieGen5HostGbPerS;
  static const std::vector<GpuSpec> kPresets = {
      WithSms(WithHostLink(WithContext(MakeGpu("v100-sxm2-32gb", {7.8, 15.7, 0, 125, 0, 0, 0}, 15.7,
                                               900, Bytes(32 * kGibi), kMatrixDefault),
                                       kV100Context),
                           kGen5 / 4),
              80),
      WithSms(WithHostLink(MakeGpu("a100-sxm4-40gb", {19.5, 19.5, 156, 312, 312, 0, 624}, 19.5,
                                   1555, Bytes(40 * kGibi), kMatrixDefault),
                           kGen5 / 2),
              108),
      WithSms(WithHostLink(MakeGpu("a100-sxm4-80gb", {19.5, 19.5, 156, 312, 312, 0, 624}, 19.5,
                                   2039, Bytes(80 * kGibi), kMatrixDefault),
                           kGen5 / 2),
              108),
      HopperSxm("h100-sxm5-80gb", 3350, Bytes(80 * kGibi), kH100Sxm),
      WithSms(WithHostLink(MakeGpu("h100-pcie-80gb", {51.2, 51.2, 378, 756, 756, 1513, 1513}, 51.2,
                                   2000, Bytes(80 * kGibi), kMatrixUnmeasured),
                           kGen5),
              114),
      HopperSxm("h200-sxm-141gb", 4800, Bytes(141 * kGiga), kH200),
      WithSms(WithHostLink(MakeGpu("b200-sxm-180gb", {40, 75, 1100, 2250, 2250, 4500, 4500}, 75,
                                   8000, Bytes(180 * kGiga), kMatrixUnmeasured,
                                   /*microscaling=*/true),
                           kGen5),
              148),
      // The Blackwell GPU of a GB200 superchip (1,200 W): the NVL72 datasheet's rack figures
      // (sparse, except fp64) ÷ 72 ÷ 2.
      WithSms(WithHostLink(MakeGpu("gb200-186gb", {45, 83, 1250, 2500, 2500, 5000, 5000}, 83, 8000,
                                   Bytes(186 * kGiga), kMatrixUnmeasured, /*microscaling=*/true),
                           450 * kGen5 / 63),
              148),
  };
  return kPresets;
}

std::vector<std::string_view> GpuNameList() {
  std::vector<std::string_view> names;
  for (const GpuSpec& gpu : GpuTable()) names.push_back(gpu.name);
  return names;
}

Status ReadCurve(JsonObjectReader& parent, std::string_view key, EfficiencyCurve& curve) {
  const Json* value = parent.Find(key);
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader,
                         JsonObjectReader::Make(*value, JsonChildPath(parent.path(), key)));
  if (reader.Has("max")) {
    DTSIM_ASSIGN_OR_RETURN(curve.max, reader.Number("max"));
    if (!(curve.max > 0 && curve.max <= 1)) {
      return Error("must be in (0, 1]", JsonChildPath(reader.path(), "max"),
                   JsonValueForError(*reader.Find("max")));
    }
  }
  if (reader.Has("ramp")) {
    DTSIM_ASSIGN_OR_RETURN(curve.ramp, reader.Duration("ramp"));
  }
  reader.Allow("max");
  reader.Allow("ramp");
  return reader.Finish();
}

// A flash attention curve: the fields given replace those of the GPU's curve, or of its matrix
// curve when it has none.
Status ReadAttentionCurve(JsonObjectReader& parent, std::string_view key, const GpuSpec& gpu,
                          std::optional<EfficiencyCurve>& curve) {
  if (!parent.Has(key)) return Status::Ok();
  EfficiencyCurve read = curve.value_or(gpu.matrix_efficiency);
  DTSIM_RETURN_IF_ERROR(ReadCurve(parent, key, read));
  curve = read;
  return Status::Ok();
}

Expected<FlopRate> ReadFlopRate(const Json& value, const std::string& path) {
  if (!value.is_string()) {
    return Error("expected a FLOP rate such as \"312 TFLOP/s\"", path, JsonValueForError(value));
  }
  Expected<FlopRate> rate = ParseFlopRate(value.get<std::string>());
  if (!rate.ok()) return std::move(rate).error().Under(path);
  return rate;
}

Status ReadMatrixPeaks(const Json& value, const std::string& path, GpuSpec& gpu) {
  if (!value.is_object()) {
    return Error("expected an object of dtype → FLOP rate", path, JsonValueForError(value));
  }
  for (const auto& [name, rate_json] : value.items()) {
    const std::optional<DType> dtype = DTypeFromName(name);
    if (!dtype) {
      return Error(fmt::format("unknown dtype{}; known: {}", DidYouMean(name, DTypeNames()),
                               JoinQuoted(DTypeNames())),
                   JsonChildPath(path, name), Quote(name));
    }
    DTSIM_ASSIGN_OR_RETURN(const FlopRate rate, ReadFlopRate(rate_json, JsonChildPath(path, name)));
    gpu.matrix_peak[static_cast<size_t>(*dtype)] = rate;
  }
  return Status::Ok();
}

Status ReadFields(JsonObjectReader& reader, GpuSpec& gpu) {
  if (const Json* peaks = reader.Find("matrix_peak")) {
    DTSIM_RETURN_IF_ERROR(
        ReadMatrixPeaks(*peaks, JsonChildPath(reader.path(), "matrix_peak"), gpu));
  }
  if (const Json* rate = reader.Find("vector_peak")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.vector_peak,
                           ReadFlopRate(*rate, JsonChildPath(reader.path(), "vector_peak")));
  }
  if (reader.Has("memory_bandwidth")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.memory_bandwidth, reader.Rate("memory_bandwidth"));
  }
  if (reader.Has("memory")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.memory, reader.Size("memory"));
  }
  if (reader.Has("launch_overhead")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.launch_overhead, reader.Duration("launch_overhead"));
  }
  if (reader.Has("host_bandwidth")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.host_bandwidth, reader.Rate("host_bandwidth"));
  }
  if (reader.Has("host_launch_time")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.host_launch_time, reader.Duration("host_launch_time"));
    if (gpu.host_launch_time < DurationNs::Zero()) {
      return Error("must not be negative", JsonChildPath(reader.path(), "host_launch_time"),
                   JsonValueForError(*reader.Find("host_launch_time")));
    }
  }
  if (reader.Has("context_memory")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.context_memory, reader.Size("context_memory"));
    if (gpu.context_memory.count() < 0) {
      return Error("must not be negative", JsonChildPath(reader.path(), "context_memory"),
                   JsonValueForError(*reader.Find("context_memory")));
    }
  }
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("sms", gpu.sms, 0, GpuSpec::kMaxSms));
  for (std::string_view key : {"memory_bandwidth", "memory", "launch_overhead", "context_memory",
                               "host_bandwidth", "host_launch_time"}) {
    reader.Allow(key);
  }
  DTSIM_RETURN_IF_ERROR(ReadCurve(reader, "matrix_efficiency", gpu.matrix_efficiency));
  DTSIM_RETURN_IF_ERROR(ReadCurve(reader, "fp8_matrix_efficiency", gpu.fp8_matrix_efficiency));
  DTSIM_RETURN_IF_ERROR(
      ReadAttentionCurve(reader, "attention_efficiency", gpu, gpu.attention_efficiency));
  DTSIM_RETURN_IF_ERROR(ReadAttentionCurve(reader, "attention_backward_efficiency", gpu,
                                           gpu.attention_backward_efficiency));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("microscaling", gpu.microscaling));
  if (reader.Has("power_limited_compute")) {
    DTSIM_ASSIGN_OR_RETURN(gpu.power_limited_compute, reader.Number("power_limited_compute"));
    if (!(gpu.power_limited_compute > 0 && gpu.power_limited_compute <= 1)) {
      return Error("must be in (0, 1]", JsonChildPath(reader.path(), "power_limited_compute"),
                   JsonValueForError(*reader.Find("power_limited_compute")));
    }
  }
  if (reader.Has("attention_power_limited_compute")) {
    DTSIM_ASSIGN_OR_RETURN(const double share, reader.Number("attention_power_limited_compute"));
    if (!(share > 0 && share <= 1)) {
      return Error("must be in (0, 1]",
                   JsonChildPath(reader.path(), "attention_power_limited_compute"),
                   JsonValueForError(*reader.Find("attention_power_limited_compute")));
    }
    gpu.attention_power_limited_compute = share;
  }
  return ReadCurve(reader, "memory_efficiency", gpu.memory_efficiency);
}

Status CheckComplete(const GpuSpec& gpu, const std::string& path) {
  if (gpu.memory_bandwidth.bits_per_second() <= 0) {
    return Error("memory_bandwidth must be positive", JsonChildPath(path, "memory_bandwidth"));
  }
  if (gpu.memory.count() <= 0)
    return Error("memory must be positive", JsonChildPath(path, "memory"));
  if (gpu.vector_peak.flop_per_second() <= 0) {
    return Error("vector_peak must be positive", JsonChildPath(path, "vector_peak"));
  }
  return Status::Ok();
}

}  // namespace

std::span<const std::string_view> GpuPresetNames() {
  static const std::vector<std::string_view> kNames = GpuNameList();
  return kNames;
}

std::string GpuFamilyOf(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)); };
  std::string found;
  for (const std::string_view preset : GpuPresetNames()) {
    const std::string_view family = preset.substr(0, preset.find('-'));
    for (size_t at = lower.find(family); at != std::string::npos; at = lower.find(family, at + 1)) {
      const size_t end = at + family.size();
      const bool word =
          (at == 0 || !is_word_char(lower[at - 1])) &&
          (end == lower.size() || !std::isdigit(static_cast<unsigned char>(lower[end])));
      if (word && family.size() > found.size()) found = family;
    }
  }
  return found;
}

void ApplyGpuCalibration(const GpuCalibration& calibration, GpuSpec& gpu) {
  if (calibration.matrix_efficiency) gpu.matrix_efficiency.max = *calibration.matrix_efficiency;
  if (calibration.fp8_matrix_efficiency) {
    gpu.fp8_matrix_efficiency.max = *calibration.fp8_matrix_efficiency;
  }
  if (calibration.memory_efficiency) gpu.memory_efficiency.max = *calibration.memory_efficiency;
  if (calibration.launch_overhead) gpu.launch_overhead = *calibration.launch_overhead;
  if (calibration.host_launch_time) gpu.host_launch_time = *calibration.host_launch_time;
  if (calibration.matrix_ramp) gpu.matrix_efficiency.ramp = *calibration.matrix_ramp;
  if (calibration.fp8_matrix_ramp) gpu.fp8_matrix_efficiency.ramp = *calibration.fp8_matrix_ramp;
  // Flash attention's curves start from the GEMM curve it ran on without them.
  auto attention = [&gpu](std::optional<EfficiencyCurve>& curve, std::optional<double> max,
                          std::optional<DurationNs> ramp) {
    if (!max && !ramp) return;
    if (!curve) curve = gpu.matrix_efficiency;
    if (max) curve->max = *max;
    if (ramp) curve->ramp = *ramp;
  };
  attention(gpu.attention_efficiency, calibration.attention_efficiency, calibration.attention_ramp);
  attention(gpu.attention_backward_efficiency, calibration.attention_backward_efficiency,
            calibration.attention_backward_ramp);
}

Expected<GpuSpec> GpuPreset(std::string_view name) {
  for (const GpuSpec& gpu : GpuTable()) {
    if (gpu.name == name) return gpu;
  }
  return Error(fmt::format("unknown GPU{}; presets: {}", DidYouMean(name, GpuPresetNames()),
                           JoinQuoted(GpuPresetNames())),
               "", Quote(name));
}

namespace {

void Calibrate(std::span<const GpuCalibration> calibrations, GpuSpec& gpu) {
  for (const GpuCalibration& calibration : calibrations) {
    if (calibration.gpu == gpu.name) ApplyGpuCalibration(calibration, gpu);
  }
}

}  // namespace

Expected<GpuSpec> GpuFromJson(const Json& value, const std::string& path,
                              std::span<const GpuCalibration> calibrations) {
  if (value.is_string()) {
    Expected<GpuSpec> preset = GpuPreset(value.get<std::string>());
    if (!preset.ok()) return std::move(preset).error().Under(path);
    Calibrate(calibrations, *preset);
    return preset;
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  GpuSpec gpu;
  gpu.name = "custom";
  gpu.launch_overhead = kLaunchOverhead;
  gpu.matrix_efficiency = kMatrixDefault;
  gpu.fp8_matrix_efficiency = kFp8MatrixDefault;
  gpu.memory_efficiency = kMemoryDefault;
  if (reader.Has("preset")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("preset"));
    Expected<GpuSpec> preset = GpuPreset(name);
    if (!preset.ok()) return std::move(preset).error().Under(JsonChildPath(path, "preset"));
    gpu = *std::move(preset);
    Calibrate(calibrations, gpu);
  }
  reader.Allow("preset");
  DTSIM_RETURN_IF_ERROR(ReadFields(reader, gpu));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  DTSIM_RETURN_IF_ERROR(CheckComplete(gpu, path));
  return gpu;
}

}  // namespace dtsim::models
