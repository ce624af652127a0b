// What a tensor-parallel peer sends at a pipeline-stage boundary (docs/strategies.md, "Pipeline
// transfers"): Megatron-Core sends the whole activation from every peer unless sequence
// parallel; Megatron-LM's scatter/gather (2021–2023) sent 1/t and all-gathered it on arrival.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// GPT, 4 layers of h = 2048 on one DGX A100: TP 4 × PP 2, two micro-batches of 1 × 1024 tokens.
// An activation is b·s·h·e = 1 · 1024 · 2048 · 2 B = 4 MiB.
constexpr int64_t kActivation = 1024 * 2048 * 2;

Json TwoStages() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 2048, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 2, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 1, "tensor": 4, "pipeline": {"size": 2, "schedule": "1f1b"}},
    "simulation": {"network_model": "analytical"}
  })");
}

struct Transfers {
  std::map<int64_t, int> send_bytes;   // message size → sends, every rank
  std::map<std::string, int> gathers;  // task name → all-gathers on ranks 0 and 4 (one a stage)
  std::map<std::string, int64_t> gathered;  // their bytes per rank
};

Transfers TransfersOf(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  Transfers out;
  for (size_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(static_cast<uint32_t>(c)));
    if (comm.kind == graph::CommKind::kSendRecv) ++out.send_bytes[comm.size.count()];
  }
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
    const std::string name(graph.name(task.name));
    const int32_t rank = graph.stream(task.stream).rank;
    if ((rank != 0 && rank != 4) || !name.starts_with("gather ")) continue;
    EXPECT_EQ(graph.comm(task.comm).kind, graph::CommKind::kAllGather);
    ++out.gathers[name];
    out.gathered[name] = graph.comm(task.comm).size.count();
  }
  return out;
}

TEST(PipelineTransferTest, EveryPeerSendsTheWholeActivationByDefault) {
  // Megatron-Core without SP: each of the 4 peers of stage 0 sends the 4 MiB activation of each
  // of the 2 micro-batches forward, each of stage 1's sends its gradient back: 4 · 2 · 2 = 16
  // messages of 4 MiB, no gather.
  const Transfers transfers = TransfersOf(SimulateJson(TwoStages()));
  EXPECT_EQ(transfers.send_bytes, (std::map<int64_t, int>{{kActivation, 16}}));
  EXPECT_TRUE(transfers.gathers.empty());
}

TEST(PipelineTransferTest, ScatterGatherSendsAQuarterAndGathersItOnArrival) {
  // Megatron-LM's scatter/gather: 16 messages of 4 MiB / 4 = 1 MiB; stage 1's rank 4 all-gathers
  // each micro-batch's activations (2), stage 0's rank 0 each one's gradient (2), each peer
  // giving its 1 MiB (the collective's bytes per rank).
  Json config = TwoStages();
  config["parallelism"]["pipeline"]["scatter_gather"] = true;
  const Transfers transfers = TransfersOf(SimulateJson(config));
  EXPECT_EQ(transfers.send_bytes, (std::map<int64_t, int>{{kActivation / 4, 16}}));
  EXPECT_EQ(transfers.gathers,
            (std::map<std::string, int>{{"gather activations", 2}, {"gather gradients", 2}}));
  EXPECT_EQ(transfers.gathered.at("gather activations"), kActivation / 4);
  EXPECT_EQ(transfers.gathered.at("gather gradients"), kActivation / 4);
  // Under SP each peer sends its sequence shard, 1/4, and nothing is gathered.
  Json quarter = TwoStages();
  quarter["parallelism"]["tensor"] = {{"size", 4}, {"sequence_parallel", true}};
  const Transfers sharded = TransfersOf(SimulateJson(quarter));
  EXPECT_EQ(sharded.send_bytes, (std::map<int64_t, int>{{kActivation / 4, 16}}));
  EXPECT_TRUE(sharded.gathers.empty()) << "a sequence shard is sent as it is";
}

TEST(PipelineTransferTest, ScatterGatherIsAnOptionOfThePipelineSection) {
  Json config = TwoStages();
  config["parallelism"]["pipeline"]["scatter_gather"] = true;
  const ResolvedConfig resolved = ConfigOf(config);
  EXPECT_TRUE(resolved.plan.pipeline_scatter_gather);
  EXPECT_FALSE(ConfigOf(TwoStages()).plan.pipeline_scatter_gather);
  config["parallelism"]["pipeline"]["scatter_gather"] = "yes";
  EXPECT_THAT(ConfigError(config), testing::HasSubstr("parallelism.pipeline.scatter_gather"));
}

}  // namespace
}  // namespace dtsim::strategies
