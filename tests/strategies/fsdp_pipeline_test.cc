// FSDP2 under pipelining (training.framework "pytorch", ZeRO-3, pipeline > 1): no resharding
// between micro-batches, so each piece's parameters are gathered once a step, where Megatron
// and DeepSpeed-style ZeRO-3 gather before every forward and every backward.
#include <gtest/gtest.h>

#include <string>

#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

Json PipelinedZero3() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 8, "hidden": 1024, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 2, "pipeline": {"size": 2, "schedule": "1f1b"}, "zero_stage": 3}
  })");
}

// Rank 0's all-gather tasks of layer parameters ("layerN gather").
int LayerGathers(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  int count = 0;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const std::string_view name = graph.name(graph.task(id).name);
    if (graph.rank_of(id) == 0 && name.starts_with("layer") && name.ends_with(" gather")) {
      ++count;
    }
  }
  return count;
}

TEST(FsdpPipelineTest, EachLayerIsGatheredOncePerStep) {
  // Stage 0 holds 4 layers and runs 8 / 2 = 4 micro-batches per replica: ZeRO-3 as Megatron
  // and DeepSpeed run it gathers each layer before each forward and each backward (4 × 4 × 2 =
  // 32 gathers); FSDP2 under pipelining once (4). The stage then keeps all 4 layers gathered,
  // which the memory model counts.
  Json json = PipelinedZero3();
  const SimulationResult megatron = SimulateJson(json);
  json["training"]["framework"] = "pytorch";
  const SimulationResult pytorch = SimulateJson(json);
  EXPECT_EQ(LayerGathers(megatron), 32);
  EXPECT_EQ(LayerGathers(pytorch), 4);
  // Without pipelining FSDP2 reshards after forward and gathers again for the backward.
  json["parallelism"]["pipeline"] = 1;
  json["parallelism"]["data"] = 4;
  EXPECT_EQ(LayerGathers(SimulateJson(json)), 8 * 2 * 2);
  // reshard_after_forward false keeps forward's gathers for the backward: one a micro-batch.
  json["training"]["reshard_after_forward"] = false;
  EXPECT_EQ(LayerGathers(SimulateJson(json)), 8 * 2);
}

}  // namespace
}  // namespace dtsim::strategies
