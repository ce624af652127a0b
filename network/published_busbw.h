// Published NCCL bus bandwidths and the analytical model's prediction of them
// (tests/data/network/published_busbw.json; docs/network-accuracy.md, "Bus bandwidth against
// nccl-tests"). nccl-tests' bus bandwidth (its doc/PERFORMANCE.md): algbw = S / t, all-reduce
// busbw = algbw · 2(n−1)/n, all-to-all busbw = algbw · (n−1)/n, S one rank's buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/graph/task.h"

namespace dtsim::network {

double BusBandwidth(graph::CommKind kind, int gpus, int64_t size, DurationNs time);

struct PublishedPoint {
  int64_t size = 0;  // bytes, one rank's buffer
  double busbw = 0;  // GB/s (1e9 B/s)
};

struct PublishedCurve {
  std::string id;
  std::string preset;  // the dtsim cluster preset that stands for the measured system
  graph::CommKind kind = graph::CommKind::kAllReduce;
  int gpus = 0;
  std::string algorithm;      // forced (NCCL_ALGO), or empty: the default choice
  bool fitted = false;        // the preset's efficiency was fitted to it
  int64_t modeled_up_to = 0;  // 0: every point ran an algorithm dtsim models
  std::string source;
  std::vector<PublishedPoint> points;

  // Whether a point is scored: its size ran a modeled algorithm.
  bool Scored(const PublishedPoint& point) const {
    return modeled_up_to == 0 || point.size <= modeled_up_to;
  }
};

// Reads a published-bus-bandwidth file; errors name the file and the JSON path.
Expected<std::vector<PublishedCurve>> ReadPublishedCurves(const std::string& path);

struct PredictedBusbw {
  double busbw = 0;  // GB/s
  std::string_view algorithm;
  DurationNs time;
};

// The analytical model's bus bandwidth for one collective of `size` bytes over `gpus` GPUs
// of `preset` (ranks 0..gpus−1, node-major, the nodes they fill): `algorithm`, or the default
// choice when it is empty.
Expected<PredictedBusbw> PredictBusbw(std::string_view preset, graph::CommKind kind, int gpus,
                                      int64_t size, std::string_view algorithm = "");

}  // namespace dtsim::network
