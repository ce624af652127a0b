// GPU presets and specs (docs/models.md, "GPUs"): dense matrix peak per dtype, vector peak,
// HBM bandwidth and capacity, and the efficiency curves the roofline cost model applies.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/dtype.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim::models {

// The fraction of a peak an op of a given size achieves:
//   efficiency(x) = max · x / (x + x_half),
// where x is the op's work (FLOPs or bytes) and x_half the work at which it reaches half of
// `max`. We store x_half as `ramp`, the time the op would take at `max` efficiency:
// x_half = ramp · peak · max. Then time(x) = x / (peak · max) + ramp — a fixed cost plus a
// throughput, which is what a least-squares fit of measured times recovers (FitEfficiency).
struct EfficiencyCurve {
  double max = 1.0;  // (0, 1]
  DurationNs ramp;   // >= 0

  // The time for `work` units at `peak_per_second` units per second.
  double TimeSeconds(double work, double peak_per_second) const;
  double Efficiency(double work, double peak_per_second) const;
};

struct GpuSpec {
  std::string name;
  std::array<FlopRate, kDTypeCount> matrix_peak{};  // dense tensor-core peak; 0: unsupported
  FlopRate vector_peak;                             // fp32 on the CUDA cores
  Bandwidth memory_bandwidth;                       // HBM
  // Streaming multiprocessors, which a training step's compute shares with its communication
  // kernels: one per NCCL channel they run on (docs/models.md, "SMs shared with
  // communication"); 0: not known, communication takes none.
  int sms = 0;
  // The most a config may give: what the engine can share (engine::Simulator::kMaxSms; the
  // simulation checks the two agree).
  static constexpr int kMaxSms = 512;
  Bytes memory;                           // HBM capacity
  DurationNs launch_overhead;             // added to every op
  EfficiencyCurve matrix_efficiency;      // GEMMs in every dtype but FP8
  EfficiencyCurve fp8_matrix_efficiency;  // FP8 GEMMs (Transformer Engine's), their own curve
  EfficiencyCurve memory_efficiency;
  // Flash attention's kernels, forward and backward, their own curves over the FLOPs they
  // execute where measured on this GPU (fitted like the GEMM curves: FitAttentionEfficiency);
  // none: the matrix curve of their dtype, as a GEMM's.
  std::optional<EfficiencyCurve> attention_efficiency;
  std::optional<EfficiencyCurve> attention_backward_efficiency;
  // Flash attention's share of its burst speed at the power limit, measured apart: its kernels
  // slow with the SM clock all the way (0.73–0.75 on Hopper, where GEMMs keep 0.84–0.85);
  // none: power_limited_compute.
  std::optional<double> attention_power_limited_compute;
  bool microscaling = false;  // MXFP8 tensor cores with per-32-element scales (Blackwell)
  // Whether the matrix curves were fitted to GEMMs measured on this GPU (an op-cost table in
  // tools/examples/profiles/), not defaults: `dtsim calibrate` leaves measured curves alone.
  bool measured_curves = false;
  // The share of its short-burst speed a compute-bound op keeps while the GPU runs a training
  // step at its power limit (lower SM clocks; docs/models.md, "Power-limited clocks"). The
  // efficiency curves and op tables timed in isolation describe bursts at boost clock; 1: no
  // loss (not measured for this GPU).
  double power_limited_compute = 1.0;
  // What a training process holds on the GPU outside PyTorch's allocator: the CUDA context with
  // its loaded modules and the libraries' workspaces (docs/models.md, "Memory"). Measured on an
  // H200 (CUDA 13, PyTorch 2.11, lazy module loading): 766.8 MiB; the default for any GPU.
  Bytes context_memory = Bytes(804'061'184);
  // Pinned host memory to the GPU or back, one direction, as one large cudaMemcpyAsync moves
  // it (docs/models.md, "GPUs"): what activation offloading copies at; 0: not known (a custom
  // GPU without "host_bandwidth").
  Bandwidth host_bandwidth;
  // The host's time in one CUDA call that enqueues GPU work (cudaMemcpyAsync, cudaLaunchKernel):
  // what bounds a loop of small copies issued one by one (DeepSpeed's ZeRO-3 before 0.5.5,
  // strategies/deepspeed_zero3.h). Measured on an A100 host: 8.9 µs, the median of 960
  // device-to-device cudaMemcpyAsync calls in ../shared/traces/kineto's nccl_parser_config trace
  // (their GPU copies took 1.7 µs); the default for any GPU.
  DurationNs host_launch_time = DurationNs(8'900);

  FlopRate MatrixPeak(DType dtype) const { return matrix_peak[static_cast<size_t>(dtype)]; }
  // The share of its burst speed a compute-bound kernel keeps at the power limit: flash
  // attention's own where measured, power_limited_compute otherwise.
  double PowerLimitedShare(bool flash_attention) const {
    return flash_attention && attention_power_limited_compute ? *attention_power_limited_compute
                                                              : power_limited_compute;
  }
  const EfficiencyCurve& MatrixEfficiency(DType dtype) const {
    return dtype == DType::kFp8 ? fp8_matrix_efficiency : matrix_efficiency;
  }
};

// What a calibration (strategies/calibration.h, `dtsim calibrate`) sets on one GPU preset: the
// maxima and ramps of its efficiency curves (each part it does not set kept), flash
// attention's own curves (starting from the GEMM curve on a preset without them), the fixed
// cost of every op and the host's time in a CUDA call. Applied to the preset before a config's
// own fields, which still override it.
struct GpuCalibration {
  std::string gpu;                                      // the preset's name
  std::optional<double> matrix_efficiency;              // (0, 1]
  std::optional<double> fp8_matrix_efficiency;          // (0, 1]
  std::optional<double> memory_efficiency;              // (0, 1]
  std::optional<DurationNs> launch_overhead;            // >= 0
  std::optional<DurationNs> host_launch_time;           // >= 0
  std::optional<DurationNs> matrix_ramp;                // >= 0
  std::optional<DurationNs> fp8_matrix_ramp;            // >= 0
  std::optional<double> attention_efficiency;           // (0, 1]
  std::optional<DurationNs> attention_ramp;             // >= 0
  std::optional<double> attention_backward_efficiency;  // (0, 1]
  std::optional<DurationNs> attention_backward_ramp;    // >= 0
};
void ApplyGpuCalibration(const GpuCalibration& calibration, GpuSpec& gpu);

std::span<const std::string_view> GpuPresetNames();

// The GPU family a name speaks of — a preset's ("h100-sxm5-80gb": "h100"), a CUDA device's
// ("NVIDIA H100 80GB HBM3": "h100"), a custom GPU's ("my-a100": "a100") — as the first part of
// a preset name found in it as a word (case aside; "NVIDIA GB200" is gb200, not b200). Empty
// when it names none.
std::string GpuFamilyOf(std::string_view name);
// Errors list the known presets.
Expected<GpuSpec> GpuPreset(std::string_view name);

// {"preset": "a100-sxm4-80gb", "matrix_peak": {"bf16": "312 TFLOP/s"}, "vector_peak",
//  "memory_bandwidth", "memory", "launch_overhead", "matrix_efficiency": {"max", "ramp"},
//  "fp8_matrix_efficiency": {...}, "memory_efficiency": {...}, "microscaling": bool,
//  "power_limited_compute": (0, 1], "context_memory", "host_bandwidth", "host_launch_time",
//  "sms": 0–512},
//  or a bare preset name. With a preset any field overrides it;
// without one all but the efficiencies and launch overhead are required. The calibration of
// the preset, if `calibrations` has one, applies before the object's fields.
Expected<GpuSpec> GpuFromJson(const Json& value, const std::string& path,
                              std::span<const GpuCalibration> calibrations = {});

}  // namespace dtsim::models
