// DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language
// Models") and its streaming form (Douillard et al. 2025): data parallelism relaxed into
// replicas that train on their own for `sync_every` inner steps and then all-reduce the change
// of their parameters (the outer gradient) for an outer optimizer step. The config's "diloco"
// section (docs/diloco.md); plain data, read here. Simulate (strategies/simulate.cc) runs one
// replica's inner step and prices the outer synchronization (strategies/diloco_sync.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim::strategies {

// The outer gradient's element type on the wire: fp32 (DiLoCo), bf16, fp8 or fp4 (Streaming
// DiLoCo's E3M0, 4 bits).
enum class OuterPrecision : uint8_t { kFp32, kBf16, kFp8, kFp4 };
std::span<const std::string_view> OuterPrecisionNames();  // "fp32", "bf16", "fp8", "fp4"
double OuterPrecisionBytes(OuterPrecision precision);     // 4, 2, 1, 0.5

// Where the outer copy of the parameters (the replicas' last agreed ones) lives: in host memory
// (torchft's DiLoCo, as torchtitan runs it: copied in for each synchronization and the new one
// out after it), or on the GPU beside the parameters.
enum class OuterState : uint8_t { kHost, kGpu };
std::span<const std::string_view> OuterStateNames();  // "host", "gpu"

// The link between the replicas' sites when they are apart (`diloco.link`): each site's
// aggregate bandwidth to the others per direction, and the one-way latency.
struct SiteLink {
  Bandwidth bandwidth;
  DurationNs latency;
};

struct DilocoConfig {
  int replicas = 2;           // M: the job's data-parallel ranks split into M replicas
  int64_t sync_every = 100;   // H: inner steps between a fragment's outer synchronizations
  int fragments = 1;          // F: Streaming DiLoCo's fragments, synchronized in turn
  int64_t overlap_steps = 0;  // τ: inner steps a fragment's synchronization may run behind
  OuterPrecision precision = OuterPrecision::kFp32;
  OuterState outer_state = OuterState::kHost;
  // Absent: the replicas share the cluster's network (each on its own nodes).
  std::optional<SiteLink> link;
  // Set on the config of one replica (DilocoReplica), whose plan is the replica's.
  bool replica = false;
};

// The "diloco" section at `path` ("diloco"); errors name the key and the value.
Expected<DilocoConfig> DilocoFromJson(const Json& value, const std::string& path);

// What one fragment's outer synchronization costs (its settings are the config's; the inner
// step and the run's average are the result's iteration_time and average_iteration_time).
struct DilocoResult {
  Bytes fragment_bytes;        // one rank's outer gradient for one fragment, on the wire
  DurationNs copies;           // host outer state: the outer copy in before, the new one out after
  DurationNs all_reduce;       // a fragment's outer all-reduce over the replicas
  DurationNs update;           // its outer Nesterov step on the rank's shard
  DurationNs all_gather;       // its updated shard all-gathered in the replica (not under ZeRO-3)
  DurationNs synchronization;  // all of them in sequence
  DurationNs exposed;          // of one synchronization: what τ inner steps do not hide
  int64_t outer_state_bytes = 0;  // per GPU: the fp32 momentum (and outer copy) of its shard
};

}  // namespace dtsim::strategies
