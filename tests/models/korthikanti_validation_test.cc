// Accuracy against published measurements: one 22B transformer layer at TP = 8 on DGX A100
// (Korthikanti et al. 2022, Table 4; ../shared/validation/published-points.json, korth-t4-*).
// Forward and backward times as the simulator lays out one micro-batch of one layer on one rank
// (strategies::PredictLayerTimes, shared with `dtsim validate`: the search bound's pass times —
// the ops priced by the uncalibrated A100 preset, the tensor-parallel collectives by the
// analytical network model on the dgx-a100 preset, sequence parallelism's re-gathers beside the
// dgrads and the async input-gradient reductions beside the wgrads). Prints the error on every
// point; the bound checked is a sanity bound (a model this far off is broken), not a tuned
// target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "models/model_spec.h"
#include "sim/base/json_reader.h"
#include "strategies/validation.h"

namespace dtsim::models {
namespace {

TEST(KorthikantiValidationTest, LayerTimesAgainstTable4) {
  const std::string path = std::string(DTSIM_SHARED_DIR) + "/validation/published-points.json";
  Expected<Json> points = ReadJsonFile(path);
  ASSERT_TRUE(points.ok()) << points.error().ToString();

  std::printf("%-56s %9s %9s %8s %9s %9s %8s\n", "point", "fwd ms", "dtsim", "error", "bwd ms",
              "dtsim", "error");
  int cases = 0;
  for (const Json& point : (*points)["points"]) {
    const std::string id = point["id"].get<std::string>();
    if (!id.starts_with("korth-t4-")) continue;
    const Json& model = point["model"];
    const TransformerSpec spec = ModelPreset("megatron-22b")->transformer;
    ASSERT_EQ(spec.hidden, model["hidden"].get<int64_t>());
    ASSERT_EQ(spec.heads, model["heads"].get<int>());
    ASSERT_EQ(spec.ffn_hidden, model["ffn_hidden"].get<int64_t>());
    // Forward: the layer's ops + its collectives; backward: what recompute dropped, re-run
    // first (full: the forward again, collectives included), then the backward ops and its
    // collectives.
    Expected<strategies::LayerTimes> times = strategies::PredictLayerTimes(point, id, nullptr);
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
