// Accuracy against published measurements: one 22B transformer layer at TP = 8 on DGX A100
// (Korthikanti et al. 2022, Table 4; ../shared/validation/published-points.json, korth-t4-*).
// Forward and backward times = the roofline cost of the layer's ops on one A100-80GB (uncalibrated
// preset efficiencies) + the tensor-parallel collectives priced by the analytical network model
// on the dgx-a100 preset: two all-reduces of the b·s·h activations per pass (Megatron §3), or
// two all-gathers and two reduce-scatters with sequence parallelism (Korthikanti §4.2.2). Prints
// the error on every point; the bound checked is a sanity bound (a model this far off is broken),
// not a tuned target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "network/cluster.h"
#include "sim/base/json_reader.h"
#include "strategies/validation.h"

namespace dtsim::models {
namespace {

struct Case {
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
};

Expected<Case> CaseOf(const std::string& recompute) {
  if (recompute == "baseline_no_recompute") return Case{};
  if (recompute == "sequence_parallel_only") return Case{.sequence_parallel = true};
  if (recompute == "full_recompute") return Case{.recompute = Recompute::kFull};
  if (recompute == "selective_recompute") return Case{.recompute = Recompute::kSelective};
  if (recompute == "selective_recompute+sequence_parallel") {
    return Case{.sequence_parallel = true, .recompute = Recompute::kSelective};
  }
  return Error("unknown configuration", "parallel.recompute", recompute);
}

TEST(KorthikantiValidationTest, LayerTimesAgainstTable4) {
  const std::string path = std::string(DTSIM_SHARED_DIR) + "/validation/published-points.json";
  Expected<Json> points = ReadJsonFile(path);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  Expected<GpuSpec> gpu = GpuPreset("a100-sxm4-80gb");
  Expected<network::ClusterSpec> cluster = network::ClusterPreset("dgx-a100", 1);
  ASSERT_TRUE(gpu.ok() && cluster.ok());
  const RooflineCostModel roofline(*gpu);

  std::printf("%-56s %9s %9s %8s %9s %9s %8s\n", "point", "fwd ms", "dtsim", "error", "bwd ms",
              "dtsim", "error");
  int cases = 0;
  for (const Json& point : (*points)["points"]) {
    const std::string id = point["id"].get<std::string>();
    if (!id.starts_with("korth-t4-")) continue;
    const Json& model = point["model"];
    const Json& parallel = point["parallel"];
    Expected<Case> c = CaseOf(parallel["recompute"].get<std::string>());
    ASSERT_TRUE(c.ok()) << id;
    TransformerSpec spec = ModelPreset("megatron-22b")->transformer;
    ASSERT_EQ(spec.hidden, model["hidden"].get<int64_t>());
    ASSERT_EQ(spec.heads, model["heads"].get<int>());
    ASSERT_EQ(spec.ffn_hidden, model["ffn_hidden"].get<int64_t>());
    const int t = parallel["tp"].get<int>();
    const TransformerShard shard{.micro_batch = parallel["micro_batch"].get<int64_t>(),
                                 .seq_len = model["seq_len"].get<int64_t>(),
                                 .dtype = DType::kFp16,
                                 .tensor_parallel = t,
                                 .sequence_parallel = c->sequence_parallel};
    ASSERT_TRUE(ValidateShard(spec, shard).ok());
    // Forward: the layer's ops + its collectives; backward: what recompute dropped, re-run
    // first (full: the forward again, collectives included), then the backward ops and its
    // collectives (strategies::PredictLayerTimes, shared with `dtsim validate`).
    Expected<strategies::LayerTimes> times =
        strategies::PredictLayerTimes(spec, shard, c->recompute, roofline, *cluster);
    ASSERT_TRUE(times.ok()) << times.error().ToString();
    const double forward = times->forward_seconds;
    const double backward = times->backward_seconds;

    double measured_forward = 0, measured_backward = 0;
    for (const Json& metric : point["metrics"]) {
      if (metric["name"] == "forward_time") measured_forward = metric["value"].get<double>() / 1e3;
      if (metric["name"] == "backward_time")
        measured_backward = metric["value"].get<double>() / 1e3;
    }
    const double forward_error = forward / measured_forward - 1;
    const double backward_error = backward / measured_backward - 1;
    std::printf("%-56s %9.2f %9.2f %+7.1f%% %9.2f %9.2f %+7.1f%%\n", id.c_str(),
                measured_forward * 1e3, forward * 1e3, 100 * forward_error, measured_backward * 1e3,
                backward * 1e3, 100 * backward_error);
    EXPECT_LT(std::abs(forward_error), 0.5) << id;
    EXPECT_LT(std::abs(backward_error), 0.5) << id;
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

}  // namespace
}  // namespace dtsim::models
