// DiLoCo (docs/diloco.md): one replica's inner step, the outer synchronization's parts derived
// by hand, the average step, the outer state in memory, and the section's errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "strategies/diloco_sync.h"
#include "strategies/search.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// GPT-2 124M on 4 DGX H100 nodes: DP 16 × TP 2, 64 sequences of 1,024 in micro-batches of 2;
// in 4 replicas of one node each (DP 4 × TP 2, 16 sequences).
Json Job() {
  return {{"model", "gpt2-124m"},
          {"training", {{"global_batch", 64}, {"micro_batch", 2}, {"seq_len", 1024}}},
          {"cluster", {{"preset", "dgx-h100"}, {"nodes", 4}, {"gpu", "h100-sxm5-80gb"}}},
          {"parallelism", {{"data", 16}, {"tensor", 2}}},
          {"diloco",
           {{"replicas", 4},
            {"sync_every", 50},
            {"link", {{"bandwidth", "100 Gbps"}, {"latency", "5 ms"}}}}},
          {"simulation", {{"ranks", "symmetric"}}}};
}

// One replica of Job() as a synchronous job of its own: DP 4 × TP 2 on one node, 16 sequences.
SimulationResult ReplicaAlone() {
  Json replica = Job();
  replica.erase("diloco");
  replica["training"]["global_batch"] = 16;
  replica["cluster"]["nodes"] = 1;
  replica["parallelism"]["data"] = 4;
  return SimulateJson(replica);
}

std::string ErrorOf(const Json& json) {
  Expected<ResolvedConfig> config = ConfigFromJson(json, "job.json");
  if (!config.ok()) return config.error().ToString();
  Expected<SimulationResult> result = Simulate(*config);
  return result.ok() ? "" : result.error().ToString();
}

TEST(DilocoTest, TheInnerStepIsOneReplicasPlan) {
  const SimulationResult job = SimulateJson(Job());
  const SimulationResult alone = ReplicaAlone();
  ASSERT_TRUE(job.diloco);
  EXPECT_EQ(job.iteration_time, alone.iteration_time);
  // The whole job's 64 sequences over the inner step, as the iteration's figures are (readers
  // scale them to the run's average); per GPU the replica's.
  EXPECT_DOUBLE_EQ(job.samples_per_second, 64 / alone.iteration_time.ToSecondsDouble());
  EXPECT_DOUBLE_EQ(job.samples_per_second, 4 * alone.samples_per_second);
  EXPECT_DOUBLE_EQ(job.mfu, alone.mfu);
  EXPECT_GT(job.average_iteration_time, job.iteration_time);
  // The search's and sweep's figures: over the run's average.
  const PlanFigures figures = FiguresOf(job);
  EXPECT_NEAR(figures.samples_per_second, 64 / job.average_iteration_time.ToSecondsDouble(), 1e-9);
}

TEST(DilocoTest, TheSynchronizationIsDerivedByHand) {
  const SimulationResult job = SimulateJson(Job());
  const DilocoResult& d = *job.diloco;
  const int64_t p = job.iteration->stats.stage_memory[0].parameter_count;  // one TP rank's
  // Each rank's share: its 4 data-parallel peers of the replica divide p; fp32 on the wire.
  const int64_t s = (p + 3) / 4;
  EXPECT_EQ(d.fragment_bytes.count(), 4 * s);
  // Across sites the site's link carries both TP ranks' whole parameters in fp32,
  // 2 · p · 4 B, as a ring over 4 sites: 2 · 3/4 of it at 12.5 GB/s, plus 6 latencies of 5 ms.
  const auto sent = static_cast<int64_t>(std::ceil(1.5 * static_cast<double>(2 * p * 4)));
  EXPECT_EQ(d.all_reduce, TransferTime(Bytes(sent), Bandwidth::BitsPerSecond(100'000'000'000)) +
                              Milliseconds(30));
  // The Nesterov step reads and writes the bf16 parameter (2 B), the fp32 outer gradient (4 B),
  // the fp32 outer copy and momentum (16 B): 28 B a parameter at 3,350 GB/s.
  const models::GpuSpec& gpu = ConfigOf(Job()).gpu;
  EXPECT_EQ(d.update, TransferTime(Bytes(28 * s), gpu.memory_bandwidth));
  // The outer copy in and out of host memory: 4 B a parameter each way.
  EXPECT_EQ(d.copies, TransferTime(Bytes(4 * s), gpu.host_bandwidth) * 2);
  // ZeRO 0 holds every parameter: the updated shares are all-gathered in the replica.
  EXPECT_GT(d.all_gather, DurationNs::Zero());
  EXPECT_EQ(d.synchronization, d.copies + d.all_reduce + d.update + d.all_gather);
  // Nothing overlapped: all of it exposed, once every 50 steps.
  EXPECT_EQ(d.exposed, d.synchronization);
  EXPECT_EQ(job.average_iteration_time, job.iteration_time + Nanoseconds(d.exposed.ns() / 50));
}

TEST(DilocoTest, StreamingFragmentsAndOverlapHideTheSynchronization) {
  Json json = Job();
  json["diloco"]["fragments"] = 5;
  json["diloco"]["precision"] = "fp4";
  const SimulationResult streamed = SimulateJson(json);
  const DilocoResult& d = *streamed.diloco;
  const int64_t p = streamed.iteration->stats.stage_memory[0].parameter_count;
  // A fifth of the share, half a byte a parameter.
  const int64_t s = (p + 19) / 20;
  EXPECT_EQ(d.fragment_bytes.count(),
            static_cast<int64_t>(std::ceil(0.5 * static_cast<double>(s))));
  // One fragment every 10 steps.
  EXPECT_EQ(streamed.average_iteration_time,
            streamed.iteration_time + Nanoseconds(d.exposed.ns() * 5 / 50));
  // Behind τ steps: τ inner steps hide that much of it.
  const int64_t tau =
      std::min<int64_t>(10, d.synchronization.ns() / streamed.iteration_time.ns() / 2 + 1);
  json["diloco"]["overlap_steps"] = tau;
  const SimulationResult behind = SimulateJson(json);
  const DilocoResult& overlapped = *behind.diloco;
  const DurationNs hidden = behind.iteration_time * tau;
  EXPECT_EQ(overlapped.exposed, overlapped.synchronization > hidden
                                    ? overlapped.synchronization - hidden
                                    : DurationNs::Zero());
  EXPECT_LT(overlapped.exposed, d.exposed);
  // τ = H / F = 10 steps cover it all (10 inner steps are longer than a 25 MB transfer).
  json["diloco"]["overlap_steps"] = 10;
  const SimulationResult hidden_all = SimulateJson(json);
  EXPECT_EQ(hidden_all.diloco->exposed, DurationNs::Zero());
  EXPECT_EQ(hidden_all.average_iteration_time, hidden_all.iteration_time);
}

TEST(DilocoTest, OnOneClusterTheNetworkPricesTheAllReduce) {
  Json json = Job();
  json["diloco"].erase("link");
  const DilocoResult shared = *SimulateJson(json).diloco;
  // Four ranks on four nodes: over the NICs, far faster than the 100 Gb/s link above.
  EXPECT_GT(shared.all_reduce, DurationNs::Zero());
  EXPECT_LT(shared.all_reduce, SimulateJson(Job()).diloco->all_reduce);
  EXPECT_EQ(shared.synchronization,
            shared.copies + shared.all_reduce + shared.update + shared.all_gather);
  // ZeRO-3 keeps the parameters sharded: nothing to all-gather.
  json["parallelism"]["zero_stage"] = 3;
  EXPECT_EQ(SimulateJson(json).diloco->all_gather, DurationNs::Zero());
}

TEST(DilocoTest, TheOuterStateIsHeldAsOptimizerState) {
  Json json = Job();
  json["diloco"]["outer_state"] = "gpu";
  const SimulationResult on_gpu = SimulateJson(json);
  json["diloco"]["outer_state"] = "host";
  const SimulationResult on_host = SimulateJson(json);
  const SimulationResult alone = ReplicaAlone();
  const models::MemoryBreakdown& base = alone.iteration->stats.stage_memory[0];
  const int64_t s = (base.parameter_count + 3) / 4;
  // fp32 momentum of the share (host), and the fp32 outer copy too (gpu).
  EXPECT_EQ(on_host.iteration->stats.stage_memory[0].optimizer_state, base.optimizer_state + 4 * s);
  EXPECT_EQ(on_gpu.iteration->stats.stage_memory[0].optimizer_state, base.optimizer_state + 8 * s);
  EXPECT_EQ(on_gpu.diloco->outer_state_bytes, 8 * s);
  EXPECT_EQ(on_gpu.diloco->copies, DurationNs::Zero());
}

TEST(DilocoTest, TimeToTrainCountsTheJobsBatchAtTheAverageStep) {
  Json json = Job();
  json["time_to_train"] = {{"tokens", 1e9}};
  const SimulationResult result = SimulateJson(json);
  ASSERT_TRUE(result.time_to_train);
  // ⌈10^9 / (64 · 1,024)⌉ = 15,259 iterations of the average step.
  EXPECT_EQ(result.time_to_train->budget.iterations, 15259);
  EXPECT_DOUBLE_EQ(result.time_to_train->compute_s,
                   15259 * result.average_iteration_time.ToSecondsDouble());
  EXPECT_THAT(result.time_to_train->assumptions,
              testing::Contains(HasSubstr("DiLoCo trains on the budget's tokens")));
}

TEST(DilocoTest, ErrorsNameTheField) {
  Json json = Job();
  json["diloco"]["replicas"] = 3;
  EXPECT_THAT(ErrorOf(json), HasSubstr("diloco.replicas: the 16 data-parallel ranks"));
  json = Job();
  json["diloco"]["replicas"] = 8;
  EXPECT_THAT(ErrorOf(json), HasSubstr("whole nodes: the cluster's 4 nodes"));
  json = Job();
  json["diloco"].erase("replicas");
  EXPECT_THAT(ErrorOf(json), HasSubstr("diloco.replicas: missing required field"));
  json = Job();
  json["diloco"]["fragments"] = 3;
  EXPECT_THAT(ErrorOf(json), HasSubstr("diloco.sync_every"));
  json = Job();
  json["diloco"]["overlap_steps"] = 51;
  EXPECT_THAT(ErrorOf(json), HasSubstr("diloco.overlap_steps"));
  json = Job();
  json["diloco"]["link"]["bandwidth"] = "0 Gbps";
  EXPECT_THAT(ErrorOf(json), HasSubstr("diloco.link.bandwidth: must be above 0"));
  json = Job();
  json["compression"] = {{"method", "topk"}};
  EXPECT_THAT(ErrorOf(json), HasSubstr("gradient compression (\"topk\") is not built yet"));
  // A 2 × 2 torus of nodes does not split into 4 replicas of one node.
  json = Job();
  json["cluster"]["inter_node"] = {{"topology", "torus-2d"}, {"dimensions", {2, 2}}};
  EXPECT_THAT(ErrorOf(json), HasSubstr("a ring's or torus's share would not be one"));
  json = Job();
  json["parallelism"]["expert"] = 2;
  json["model"] = "mixtral-8x7b";
  EXPECT_THAT(ErrorOf(json), HasSubstr("DiLoCo with expert parallelism is not built yet"));
  // The search does not vary the replicas.
  const ResolvedConfig config = ConfigOf(Job());
  SearchSpace space;
  Expected<SearchResult> search = Search(config, space, {});
  ASSERT_FALSE(search.ok());
  EXPECT_THAT(search.error().ToString(), HasSubstr("does not vary DiLoCo replicas"));
}

}  // namespace
}  // namespace dtsim::strategies
