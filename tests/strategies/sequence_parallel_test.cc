// Megatron's sequence parallelism as Megatron-Core runs it: a column-parallel linear saves only
// its input's sequence shard, and its backward all-gathers the shard again for the weight
// gradient, beside the dgrad GEMM (models/transformer_ops.cc RegatherSequenceShard;
// docs/strategies.md, "Sequence parallelism").
#include <gtest/gtest.h>

#include <algorithm>
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
  std::vector<Span> compute, regathers;
  std::vector<int64_t> regather_bytes;
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
    } else if (graph.name(stream.name) == StreamName(StreamRole::kTensor)) {
      out.regathers.push_back(span);
      out.regather_bytes.push_back(graph.comm(task.comm).size.count());
      EXPECT_EQ(graph.comm(task.comm).kind, graph::CommKind::kAllGather);
    }
  }
  const auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  std::sort(out.compute.begin(), out.compute.end(), by_start);
  std::sort(out.regathers.begin(), out.regathers.end(), by_start);  // (the bytes are all equal)
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
