// Data-parallel models (ResNet-50): the gradients reduced are the model's parameters, the
// iteration is the passes plus what the reduction leaves exposed, symmetric = full ranks,
// compression applies, and plans that are not data parallel are errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/ops.h"
#include "models/parameters.h"
#include "strategies/config.h"
#include "strategies/data_parallel_iteration.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// ResNet-50 on 16 A100s in two DGX nodes, 64 images per GPU, fp16 gradients, SGD.
Json ResNetConfig() {
  return Json::parse(R"({
    "model": "resnet-50",
    "training": {"global_batch": 1024, "micro_batch": 64, "precision": "fp16",
                 "grad_precision": "fp16", "optimizer": "sgd"},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 16}
  })");
}

TEST(DataParallelTest, ReducesEveryParameterOnce) {
  // torchvision's ResNet-50 has 25,557,032 parameters; the gradient points (classifier, then
  // each convolution with its BatchNorm, last first) hold each once, and in fp16 the buckets'
  // all-reduces move 2 bytes of each.
  const models::ModelSpec model = *models::ModelPreset("resnet-50");
  int64_t elements = 0;
  for (const GradientTensors& point : ResNetGradientPoints(model.resnet)) {
    elements += point.elements();
  }
  EXPECT_EQ(elements, 25'557'032);
  EXPECT_EQ(elements, models::CountParameters(model).total);
  const SimulationResult result = SimulateJson(ResNetConfig());
  EXPECT_EQ(RankBytes(result, graph::CommKind::kAllReduce, "", kDataCategory), 25'557'032LL * 2);
}

TEST(DataParallelTest, IterationIsThePassesPlusTheExposedReduction) {
  // On one GPU nothing is reduced: the iteration is the micro-batches' forward and backward
  // (priced op by op) and the optimizer step — the compute and optimizer of the breakdown,
  // with no idle time. Model FLOPs: forward and backward (2× forward) of every image.
  Json json = ResNetConfig();
  json["parallelism"]["data"] = 1;
  json["training"]["global_batch"] = 128;  // 2 micro-batches of 64
  const SimulationResult one = SimulateJson(json);
  const TimeBreakdown& stage = one.stages.front();
  EXPECT_EQ(one.iteration_time, stage.compute + stage.optimizer);
  EXPECT_EQ(stage.idle, DurationNs::Zero());
  const models::ModelSpec model = *models::ModelPreset("resnet-50");
  const double forward =
      models::TotalModelFlops(models::ResNetOps(model.resnet, 1, DType::kFp16).forward);
  EXPECT_GT(forward, 7.7e9);  // 4.1 G multiply-adds per 224² image
  EXPECT_LT(forward, 8.3e9);
  EXPECT_NEAR(one.iteration->stats.model_flops, 3 * forward * 128, 1e-6 * 3 * forward * 128);
  // Data parallel, each bucket's all-reduce overlaps the rest of the backward: on NVLink and
  // 8×200 Gb/s InfiniBand only the last bucket's is exposed. Bound: under 5% of the passes —
  // the whole 51 MB fp16 all-reduce over 2 nodes takes about 2·51 MB / 25 GB/s ≈ 4 ms against
  // about 40 ms of passes, and most of it hides.
  // With no SMs counted (`sms` 0) the passes take what they take alone.
  json = ResNetConfig();
  json["training"]["global_batch"] = 16 * 128;
  json["cluster"]["gpu"] = {{"preset", "a100-sxm4-80gb"}, {"sms", 0}};
  const SimulationResult data = SimulateJson(json);
  EXPECT_EQ(data.stages.front().compute, stage.compute);
  EXPECT_GT(data.stages.front().data_exposed, DurationNs::Zero());
  EXPECT_LT(data.stages.front().data_exposed.ns() * 20, stage.compute.ns());
  // On the A100's 108 SMs, the backward ops beside a reduction run on the SMs its kernel leaves
  // (32 blocks: 16 ranks on 2 nodes, four channels a 200 Gb/s NIC on eight): each is slowed by
  // 32/108 of the time a reduction runs beside it, so the compute grows by at most the
  // reductions' time × 32/108.
  json["cluster"]["gpu"] = "a100-sxm4-80gb";
  const SimulationResult shared = SimulateJson(json);
  DurationNs reducing;
  for (const CollectiveSummary& c : shared.collectives) {
    if (c.kind == graph::CommKind::kAllReduce) reducing += c.total;
  }
  const int64_t growth = (shared.stages.front().compute - stage.compute).ns();
  EXPECT_GT(growth, 0);
  EXPECT_LE(growth * 108, reducing.ns() * 32);
  // The breakdown names the growth: the compute tasks' time beyond their durations.
  EXPECT_EQ(shared.stages.front().sm_shared.ns(), growth);
  EXPECT_EQ(data.stages.front().sm_shared, DurationNs::Zero());
}

TEST(DataParallelTest, SymmetricRanksAgreeWithFullRanks) {
  ExpectSymmetricMatchesFull(ResNetConfig(), 8);
}

TEST(DataParallelTest, CompressionShrinksTheExposedReductionOnEthernet) {
  // Over 25 Gb/s Ethernet the 51 MB fp16 all-reduce outlasts the backward; PowerSGD of rank 1
  // sends a few hundred KB instead (conv weights as C_out × C_in·r² matrices).
  Json json = ResNetConfig();
  json["cluster"]["preset"] = "ethernet-25g";
  json["cluster"]["gpus_per_node"] = 8;
  const SimulationResult plain = SimulateJson(json);
  json["compression"] = "powersgd";
  const SimulationResult compressed = SimulateJson(json);
  EXPECT_LT(compressed.stages.front().data_exposed.ns() * 3,
            plain.stages.front().data_exposed.ns());
  EXPECT_LT(compressed.iteration_time, plain.iteration_time);
}

// ResNet-50 on 4 Ethernet nodes (32 GPUs, one 25 Gb/s NIC each) with parameter servers.
Json ResNetWithServers(int servers, std::string_view placement) {
  Json json = ResNetConfig();
  json["training"]["global_batch"] = 32 * 64;
  json["parallelism"]["data"] = 32;
  json["parallelism"]["gradient_sync"] = "parameter_server";
  json["cluster"]["preset"] = "ethernet-25g";
  json["cluster"]["servers"] = {{"count", servers}, {"placement", placement}};
  return json;
}

TEST(DataParallelTest, ParameterServersCarryTheAllReduces) {
  // Every data-parallel all-reduce goes to the servers; the bytes are the same 2 per
  // parameter (fp16 gradients).
  const SimulationResult result = SimulateJson(ResNetWithServers(4, "dedicated"));
  const graph::TaskGraph& graph = result.iteration->graph;
  int reductions = 0;
  for (size_t i = 0; i < graph.comm_count(); ++i) {
    const graph::Communication& comm = graph.comm(graph::CommId(static_cast<uint32_t>(i)));
    if (comm.kind != graph::CommKind::kAllReduce) continue;
    EXPECT_EQ(graph.name(comm.algorithm), "parameter_server");
    ++reductions;
  }
  EXPECT_GT(reductions, 0);
  EXPECT_EQ(RankBytes(result, graph::CommKind::kAllReduce, "", kDataCategory), 25'557'032LL * 2);
}

TEST(DataParallelTest, DedicatedParameterServersBeatTheRingOnEthernet) {
  // The 51 MB fp16 reduction over 4 nodes' 25 Gb/s NICs: NCCL's ring (its tuner's choice at
  // these sizes) moves 2 · 31/32 of it through each NIC each way, 4 dedicated servers as fast
  // as a worker NIC about 1× (BytePS's case), and 4 colocated servers 2 · 3/4 — so dedicated
  // servers shrink the exposed reduction most, colocated ones somewhat.
  Json ring = ResNetWithServers(4, "dedicated");
  ring["parallelism"].erase("gradient_sync");
  const SimulationResult all_reduce = SimulateJson(ring);
  const SimulationResult dedicated = SimulateJson(ResNetWithServers(4, "dedicated"));
  const SimulationResult colocated = SimulateJson(ResNetWithServers(4, "colocated"));
  const double ring_exposed = all_reduce.stages.front().data_exposed.ToSecondsDouble();
  EXPECT_LT(dedicated.stages.front().data_exposed.ToSecondsDouble(), 0.8 * ring_exposed);
  EXPECT_LT(dedicated.iteration_time, all_reduce.iteration_time);
  EXPECT_LT(dedicated.iteration_time, colocated.iteration_time);
  EXPECT_LT(colocated.iteration_time, all_reduce.iteration_time);
}

TEST(DataParallelTest, ParameterServersSymmetricRanksAgreeWithFullRanks) {
  ExpectSymmetricMatchesFull(ResNetWithServers(4, "dedicated"), 8);
}

TEST(DataParallelTest, ParameterServerPlansThatCannotWorkAreErrors) {
  Json json = ResNetWithServers(4, "dedicated");
  json["cluster"].erase("servers");
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.gradient_sync: parameter servers are "
                                           "needed: give cluster.servers"));
  json = ResNetWithServers(4, "dedicated");
  json["parallelism"]["zero_stage"] = 1;
  EXPECT_THAT(ConfigError(json), HasSubstr("ZeRO stage 1 reduce-scatters gradients among the "
                                           "replicas; parameter servers need zero_stage 0"));
  json = ResNetWithServers(4, "dedicated");
  json["compression"] = "topk";
  EXPECT_THAT(ConfigError(json), HasSubstr("compression method \"topk\" reduces with the "
                                           "collective all_gather, which parameter servers do "
                                           "not run"));
  json["compression"] = "powersgd";
  EXPECT_EQ(ConfigError(json), "");
  json = ResNetWithServers(4, "dedicated");
  json["parallelism"]["gradient_sync"] = "ps";
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.gradient_sync"));
  EXPECT_THAT(ConfigError(json), HasSubstr("\"all_reduce\", \"parameter_server\""));
  json = ResNetWithServers(8, "colocated");
  EXPECT_THAT(ConfigError(json), HasSubstr("8 colocated servers need as many nodes, but the "
                                           "cluster has 4"));
}

TEST(DataParallelTest, PlansThatAreNotDataParallelAreErrors) {
  Json json = ResNetConfig();
  json["parallelism"]["data"] = 8;
  json["parallelism"]["tensor"] = 2;
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.tensor: resnet plans are data parallel "
                                           "only (tensor parallelism is built for transformers)"));
  json = ResNetConfig();
  json["training"]["seq_len"] = 128;
  EXPECT_THAT(ConfigError(json), HasSubstr("training.seq_len: resnet models take no sequence"));
  json = ResNetConfig();
  json["parallelism"]["zero_stage"] = 3;
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.zero_stage: ZeRO-3 is built for "
                                           "transformers"));
  // A DLRM's dense part is data parallel too, as TorchRec's DDP runs it: no ZeRO
  // (tests/strategies/dlrm_test.cc has the rest of its checks).
  json = ResNetConfig();
  json["model"] = "dlrm-mlperf";
  EXPECT_EQ(ConfigError(json), "");
  json["parallelism"]["zero_stage"] = 1;
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.zero_stage: a DLRM's dense part is "
                                           "replicated"));
}

}  // namespace
}  // namespace dtsim::strategies
