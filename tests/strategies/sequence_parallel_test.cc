// Megatron's sequence parallelism as Megatron-Core runs it: a column-parallel linear saves only
// its input's sequence shard, and its backward all-gathers the shard again for the weight
// gradient, beside the dgrad GEMM (models/transformer_ops.cc RegatherSequenceShard;
// docs/strategies.md, "Sequence parallelism").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "strategies/categories.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// GPT, 4 layers of h = 2048 on a DGX A100, TP 4 with SP, one micro-batch of 1 × 1024 tokens.
Json SequenceParallel() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 2048, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 1, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 1, "tensor": {"size": 4, "sequence_parallel": true}},
    "simulation": {"network_model": "analytical"}
  })");
}

struct Span {
  int64_t start, end;
};

struct RankZero {
  std::vector<Span> compute, regathers, reductions;
  std::vector<Span> waited;  // the compute stream's collectives
  std::vector<int64_t> regather_bytes, reduction_bytes;
};

RankZero SpansOf(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  RankZero out;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
    const graph::Stream& stream = graph.stream(task.stream);
    if (stream.rank != 0) continue;
    const Span span{result.times.task_start[i].ns(), result.times.task_end[i].ns()};
    if (graph.name(stream.name) == StreamName(StreamRole::kCompute) &&
        task.kind == graph::TaskKind::kCompute) {
      out.compute.push_back(span);
    } else if (graph.name(stream.name) == StreamName(StreamRole::kCompute)) {
      out.waited.push_back(span);
    } else if (graph.name(stream.name) == StreamName(StreamRole::kTensor)) {
      // Re-gathers beside a dgrad; async input-gradient reductions beside a wgrad.
      const bool gather = graph.comm(task.comm).kind == graph::CommKind::kAllGather;
      (gather ? out.regathers : out.reductions).push_back(span);
      (gather ? out.regather_bytes : out.reduction_bytes)
          .push_back(graph.comm(task.comm).size.count());
      if (!gather) {
        EXPECT_EQ(graph.comm(task.comm).kind, graph::CommKind::kReduceScatter);
      }
    }
  }
  const auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  std::sort(out.compute.begin(), out.compute.end(), by_start);
  std::sort(out.regathers.begin(), out.regathers.end(), by_start);  // (the bytes are all equal)
  std::sort(out.reductions.begin(), out.reductions.end(), by_start);
  return out;
}

// The compute task that starts with a re-gather (its dgrad GEMM).
std::vector<Span>::const_iterator DgradOf(const RankZero& spans, const Span& gather) {
  return std::find_if(spans.compute.begin(), spans.compute.end(),
                      [&](const Span& c) { return c.start == gather.start && c.end > c.start; });
}

TEST(SequenceParallelTest, TheBackwardGathersEachColumnParallelInputBesideItsDgrad) {
  // Per layer two re-gathers (QKV's and FC1's input), and one for the output layer (Megatron-
  // Core's GPTModel.output_layer is a ColumnParallelLinear too), each of the rank's
  // b·s/t · h · e = 1 · 1024/4 · 2048 · 2 = 1 MiB shard, on the "tp" stream: 4 · 2 + 1. Each
  // starts with its dgrad GEMM, and what follows the dgrad (the wgrad) starts when both have
  // ended.
  const SimulationResult result = SimulateJson(SequenceParallel());
  const RankZero spans = SpansOf(result);
  ASSERT_EQ(spans.regathers.size(), 4U * 2 + 1);
  for (int64_t bytes : spans.regather_bytes) EXPECT_EQ(bytes, 1024 / 4 * 2048 * 2);
  for (const Span& gather : spans.regathers) {
    const auto dgrad = DgradOf(spans, gather);
    ASSERT_NE(dgrad, spans.compute.end()) << "no compute starts with the re-gather";
    ASSERT_NE(dgrad + 1, spans.compute.end());
    EXPECT_EQ((dgrad + 1)->start, std::max(dgrad->end, gather.end));
  }
}

TEST(SequenceParallelTest, TheBackwardReduceScattersEachInputGradientBesideItsWgrad) {
  // Megatron's async reduction (TensorOverlap::kAsync, the megatron framework's default): per
  // layer QKV's and FC1's input gradients, b·s·h·e = 1024 · 2048 · 2 = 4 MiB each, reduce-
  // scattered on the "tp" stream from the start of their wgrad (when the dgrad and the
  // re-gather beside it have ended); what follows the wgrad starts when both have ended:
  // 4 · 2. (The output layer's
  // follows no wgrad of its own: the loss's backward ends in it, on the compute stream.)
  const SimulationResult result = SimulateJson(SequenceParallel());
  const RankZero spans = SpansOf(result);
  ASSERT_EQ(spans.reductions.size(), 4U * 2);
  for (int64_t bytes : spans.reduction_bytes) EXPECT_EQ(bytes, 1024 * 2048 * 2);
  for (const Span& reduction : spans.reductions) {
    const auto wgrad = std::find_if(spans.compute.begin(), spans.compute.end(),
                                    [&](const Span& c) { return c.start == reduction.start; });
    ASSERT_NE(wgrad, spans.compute.end()) << "no compute starts with the reduction";
    ASSERT_NE(wgrad, spans.compute.begin());
    // Issued once the dgrad and the re-gather beside it have ended, as the wgrad starts.
    EXPECT_GE(reduction.start, (wgrad - 1)->end);
    // Then the compute stream's all-gather of the previous block's output-gradient shard,
    // when both have ended.
    const int64_t both = std::max(wgrad->end, reduction.end);
    EXPECT_TRUE(std::any_of(spans.waited.begin(), spans.waited.end(), [&](const Span& w) {
      return w.start == both;
    })) << "nothing on the compute stream starts when the wgrad and its reduction have ended";
  }
  // Without the overlap ("none": Megatron-LM before August 2021) they run on the compute
  // stream after the wgrad, and the pass takes longer by what the overlap hid.
  Json serial = SequenceParallel();
  serial["parallelism"]["tensor"]["overlap"] = "none";
  const SimulationResult without = SimulateJson(serial);
  EXPECT_TRUE(SpansOf(without).reductions.empty());
  EXPECT_GT(without.iteration_time, result.iteration_time);
}

TEST(SequenceParallelTest, TheOverlapIsTheFrameworksUnlessGiven) {
  Json json = SequenceParallel();
  EXPECT_EQ(TensorOverlapOf(ConfigOf(json)), TensorOverlap::kAsync);  // megatron
  json["training"]["framework"] = "pytorch";
  EXPECT_EQ(TensorOverlapOf(ConfigOf(json)), TensorOverlap::kNone);  // DTensor
  json["parallelism"]["tensor"]["overlap"] = "async";
  EXPECT_EQ(TensorOverlapOf(ConfigOf(json)), TensorOverlap::kAsync);
  json["parallelism"]["tensor"]["overlap"] = "userbuffers";
  EXPECT_THAT(ConfigError(json), testing::HasSubstr("parallelism.tensor.overlap"));
}

TEST(SequenceParallelTest, AReGatherLongerThanItsDgradIsExposed) {
  // On NVLink each layer's gather of 1 MiB shards hides behind its dgrad; the output layer's,
  // the first of the backward pass, does not: its dgrad multiplies by the rank's 1024/4 = 256
  // vocabulary columns only (1024 · 256 · 2048 · 2 ≈ 1.1 GFLOP, a few µs) against the
  // gather's ≈ 3 MiB over NVLink. On a 1 GB/s fabric a rank receives the other three shards in
  // 3 × 1 MiB / 1 GB/s ≈ 3.1 ms, far longer than any of the GEMMs (well under 0.25 ms), so each
  // of the nine outlasts its dgrad by more than 2.9 ms, which the wgrad after it waits for.
  const SimulationResult fast = SimulateJson(SequenceParallel());
  Json slow_json = SequenceParallel();
  slow_json["cluster"]["intra_node"] = {{"bandwidth", "1 GB/s"}};
  const SimulationResult slow = SimulateJson(slow_json);
  const RankZero fast_spans = SpansOf(fast);
  ASSERT_EQ(fast_spans.regathers.size(), 9U);
  for (size_t i = 0; i < fast_spans.regathers.size(); ++i) {
    const Span& gather = fast_spans.regathers[i];
    const auto dgrad = DgradOf(fast_spans, gather);
    ASSERT_NE(dgrad, fast_spans.compute.end());
    if (i == 0) {
      EXPECT_GT(gather.end, dgrad->end);  // the output layer's: exposed
    } else {
      EXPECT_LE(gather.end, dgrad->end);  // hidden
    }
  }
  const RankZero slow_spans = SpansOf(slow);
  int64_t exposed = 0;
  for (const Span& gather : slow_spans.regathers) {
    const auto dgrad = DgradOf(slow_spans, gather);
    ASSERT_NE(dgrad, slow_spans.compute.end());
    EXPECT_GT(gather.end, dgrad->end);
    exposed += gather.end - dgrad->end;
  }
  EXPECT_GT(exposed, 9 * 2'900'000);
}

}  // namespace
}  // namespace dtsim::strategies

namespace dtsim::strategies {
namespace {

// A multi-latent attention model (h = 2048, 16 heads, q_lora 512, kv_lora 256, rope 64) on the
// same TP 4 + SP: Megatron-Core's MLASelfAttention runs its down-projections on each rank's
// sequence shard and all-gathers the latents, not the hidden state.
Json LatentAttention() {
  Json config = SequenceParallel();
  config["model"]["mla"] = {{"q_lora_rank", 512},
                            {"kv_lora_rank", 256},
                            {"qk_nope_head_dim", 128},
                            {"qk_rope_head_dim", 64},
                            {"v_head_dim", 128}};
  config["model"]["linear_bias"] = false;
  return config;
}

// Rank 0's tensor-parallel collectives on its compute stream, (kind, bytes) in task order,
// and the input-gradient reductions beside the wgrads on its "tp" stream.
std::vector<std::pair<graph::CommKind, int64_t>> ReductionsAndGathers(
    const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  std::vector<std::pair<graph::CommKind, int64_t>> out;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
    const graph::Stream& stream = graph.stream(task.stream);
    if (stream.rank != 0 || task.kind != graph::TaskKind::kCollective) continue;
    const std::string_view name = graph.name(stream.name);
    const bool reduction = name == StreamName(StreamRole::kTensor) &&
                           graph.comm(task.comm).kind != graph::CommKind::kAllGather;
    if (name != StreamName(StreamRole::kCompute) && !reduction) continue;
    out.emplace_back(graph.comm(task.comm).kind, graph.comm(task.comm).size.count());
  }
  return out;
}

TEST(SequenceParallelTest, LatentAttentionGathersItsLatentsNotTheHiddenState) {
  // T = 1024 tokens, t = 4, e = 2 B. Forward, per layer: the attention's output projection
  // reduce-scatters T·h·e = 4 MiB and the MLP's FC1 gathers its 256-token shard of h, 1 MiB;
  // FC2 reduce-scatters 4 MiB and gathers what the next attention takes: its latents,
  // 512 + 256 + 64 = 832 elements a token, 256 · 832 · 2 = 425,984 B (not 1 MiB). The embedding
  // does the same for the first layer, and the output layer gathers its 1 MiB of h on its own.
  // Backward, per layer: the KV up-projection reduce-scatters its input gradient with the rotary
  // part's, T · (256 + 64) · 2 = 655,360 B; the query's T · 512 · 2 = 1 MiB, then the gather of
  // the previous block's 1 MiB output-gradient shard.
  const SimulationResult result = SimulateJson(LatentAttention());
  const std::vector<std::pair<graph::CommKind, int64_t>> comms = ReductionsAndGathers(result);
  using graph::CommKind;
  const auto count = [&](CommKind kind, int64_t bytes) {
    return std::count(comms.begin(), comms.end(), std::make_pair(kind, bytes));
  };
  const int64_t hidden = 1024 * 2048 * 2;
  EXPECT_EQ(count(CommKind::kAllGather, 256 * 832 * 2), 4 + 1);   // 4 layers' FC2, embedding
  EXPECT_EQ(count(CommKind::kReduceScatter, 1024 * 320 * 2), 4);  // KV latents' gradients
  EXPECT_EQ(count(CommKind::kReduceScatter, 1024 * 512 * 2), 4);  // the query latent's
  // Of the hidden state, per layer: the output projection's and FC2's in forward, FC1's input
  // gradient in backward; and the embedding's and the output layer's input gradient.
  EXPECT_EQ(count(CommKind::kReduceScatter, hidden), 4 * 3 + 1 + 1);
  // Gathers of a 1 MiB shard of h, per layer: FC1's input in forward; in backward the output
  // projection's output gradient (after FC1's reduce-scatter) and the previous block's (after the
  // query latent's); and the output layer's input in forward, the last layer's gradient after
  // the output layer's reduce-scatter.
  EXPECT_EQ(count(CommKind::kAllGather, hidden / 4), 4 * 3 + 1 + 1);
  // Re-gathers on the "tp" stream: per layer the two latents' shards (256 · 512 · 2 and
  // 256 · 256 · 2 B) and FC1's 1 MiB; one for the output layer.
  const RankZero spans = SpansOf(result);
  EXPECT_EQ(std::count(spans.regather_bytes.begin(), spans.regather_bytes.end(), 256 * 512 * 2), 4);
  EXPECT_EQ(std::count(spans.regather_bytes.begin(), spans.regather_bytes.end(), 256 * 256 * 2), 4);
  EXPECT_EQ(std::count(spans.regather_bytes.begin(), spans.regather_bytes.end(), hidden / 4), 5);
}

}  // namespace
}  // namespace dtsim::strategies
