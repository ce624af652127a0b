// 2D (Optimus/SUMMA) and 2.5D (Tesseract) tensor parallelism: bytes per layer against the
// reference numbers of the parallelism notes (§4.4, §5.2, §11), compute and activations split
// q²(·d) ways, the depth all-reduce folded into data parallelism, symmetric = full ranks, and
// the config errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/memory.h"
#include "models/ops.h"
#include "strategies/config.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

constexpr int64_t kMiB = 1 << 20;

// The notes' worked example: one layer of h = 4096 (32 heads, f = 4h, biases), b = 8,
// s = 2048 (B = 16,384 tokens), fp16 (e = 2); a small vocabulary keeps the ends cheap.
Json GridConfig(const Json& tensor) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 1, "hidden": 4096, "heads": 32,
              "vocab": 1024, "max_seq": 2048},
    "training": {"global_batch": 8, "micro_batch": 8, "seq_len": 2048, "precision": "fp16",
                 "grad_precision": "fp16"},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 1, "pipeline": 1}
  })");
  json["parallelism"]["tensor"] = tensor;
  return json;
}

// RankBytes counts each broadcast or reduce at its size: what it costs over the link
// ("broadcast-equivalent" bytes).

TEST(TensorGridTest, TwoDimensionalBytesPerLayerMatchTheNotes) {
  // Per linear and micro-batch (notes §4.2), forward: q broadcasts of the X block
  // (B/q × h_in/q) over ROW and q of the W block (h_in/q × h_out/q) over COL =
  // (B·h_in + h_in·h_out)·e/q; backward the same again as broadcasts plus as reduces. Over a
  // layer (Σh_in = 7h, Σh_in·h_out = 12h², §4.4): (16384·7·4096 + 12·4096²)·2/2 = 640 MiB
  // forward, 1280 MiB backward — broadcasts 640 + 640 MiB, reduces 640 MiB.
  const SimulationResult result = SimulateJson(GridConfig({{"size", 4}, {"mode", "2d"}}));
  EXPECT_EQ(RankBytes(result, graph::CommKind::kBroadcast, "layer0."), 1280 * kMiB);
  EXPECT_EQ(RankBytes(result, graph::CommKind::kReduce, "layer0."), 640 * kMiB);
  // LayerNorm2D: two all-reduces of the B/q token statistics per norm and pass (2 norms ×
  // 2 passes × 2 × 8192 tokens × 2 bytes).
  EXPECT_EQ(RankBytes(result, graph::CommKind::kAllReduce, "layer0."), 8 * 8192 * 2);
  // Received per rank: (q − 1)/q of the 1920 MiB = 960 MiB (notes §11), against 1D's 768 MiB
  // at t = 4: 2D moves more at small q, as the ColossalAI doc warns.
}

TEST(TensorGridTest, TesseractBytesPerLayerAndTheDepthAllReduce) {
  // Paper semantics (notes §5.2): the batch splits over d·q, so activation blocks shrink by d
  // while weight blocks stay: forward (B·7h/d + 12h²)·e/q = (16384·7·4096/2 + 12·4096²)·2/2
  // = 416 MiB, backward 832 MiB (broadcasts 416 + 416, reduces 416).
  const SimulationResult result =
      SimulateJson(GridConfig({{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}));
  EXPECT_EQ(RankBytes(result, graph::CommKind::kBroadcast, "layer0."), 832 * kMiB);
  EXPECT_EQ(RankBytes(result, graph::CommKind::kReduce, "layer0."), 416 * kMiB);
  // The depth layers' weight gradients are summed once per iteration, with data parallelism:
  // rank 0's gradients all-reduced with its depth replica (rank 0 + q² = 4). The layer's
  // weights 12h²/q² = 50,331,648 elements are the notes' 96 MiB in fp16; with its 13h biases
  // and norms /q² (13,312), the embedding ((1024 + 2048)·4096/q² = 3,145,728) and the final
  // norm (2h/q² = 2,048): 53,492,736 elements × 2 bytes.
  const graph::TaskGraph& graph = result.iteration->graph;
  int64_t gradient_bytes = 0;
  for (size_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(static_cast<uint32_t>(c)));
    if (comm.kind != graph::CommKind::kAllReduce) continue;
    const std::span<const int32_t> group = graph.group(comm.group);
    // (The ROW group {0, 1} all-reduces the norms' statistics.)
    if (group.size() == 2 && group[0] == 0 && group[1] == 4) gradient_bytes += comm.size.count();
  }
  EXPECT_EQ(12LL * 4096 * 4096 / 4 * 2, 96 * kMiB);
  EXPECT_EQ(gradient_bytes, 53'492'736LL * 2);
}

models::TransformerShard GridShard(models::TensorLayout layout, int ranks, int depth) {
  return {.micro_batch = 8,
          .seq_len = 2048,
          .dtype = DType::kFp16,
          .tensor_parallel = ranks,
          .tensor_layout = layout,
          .tensor_depth = depth};
}

TEST(TensorGridTest, ComputeAndActivationsSplitOverTheGrid) {
  // Every GEMM and the core attention run on B/(q·d) tokens and h/q, a/q, f/q: a rank does
  // 1/(q²·d) of the layer and keeps 1/(q²·d) of its activations (notes §4.4).
  const models::ModelSpec model = *models::ModelPreset("gpt3-1.3b");
  const models::TransformerSpec& spec = model.transformer;
  const models::TransformerShard whole = GridShard(models::TensorLayout::k1D, 1, 1);
  const models::LayerOps one = models::TransformerLayerOps(spec, 0, whole);
  for (const auto& [layout, ranks, depth] :
       {std::tuple{models::TensorLayout::k2D, 4, 1}, std::tuple{models::TensorLayout::k2D, 16, 1},
        std::tuple{models::TensorLayout::k2p5D, 8, 2}}) {
    const models::TransformerShard shard = GridShard(layout, ranks, depth);
    ASSERT_TRUE(models::ValidateShard(spec, shard).ok());
    const models::LayerOps split = models::TransformerLayerOps(spec, 0, shard);
    EXPECT_DOUBLE_EQ(models::TotalModelFlops(split.forward) * ranks,
                     models::TotalModelFlops(one.forward));
    EXPECT_DOUBLE_EQ(models::TotalModelFlops(split.backward) * ranks,
                     models::TotalModelFlops(one.backward));
    for (const models::Recompute recompute :
         {models::Recompute::kNone, models::Recompute::kSelective, models::Recompute::kFull}) {
      EXPECT_EQ(models::LayerActivationBytes(split, recompute, shard, spec.hidden) * ranks,
                models::LayerActivationBytes(one, recompute, whole, spec.hidden));
    }
  }
}

// DP 2 × the grid × PP 2 on a 4-layer model of h = 1024.
Json SmallGridConfig(const Json& tensor) {
  Json json = GridConfig(tensor);
  json["model"]["layers"] = 4;
  json["model"]["hidden"] = 1024;
  json["model"]["heads"] = 16;
  json["training"]["global_batch"] = 64;
  json["training"]["micro_batch"] = 4;
  json["training"]["seq_len"] = 1024;
  json["parallelism"]["data"] = 2;
  json["parallelism"]["pipeline"] = 2;
  return json;
}

TEST(TensorGridTest, SymmetricRanksAgreeWithFullRanks) {
  // DP 2 × 2.5D (2×2×2) × PP 2, and DP 2 × 2D (2×2) × PP 2: every grid rank does the same
  // work, so one simulated rank per stage gives the full graph's iteration (within 0.1%).
  for (const Json& tensor :
       {Json{{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}, Json{{"size", 4}, {"mode", "2d"}}}) {
    ExpectSymmetricMatchesFull(SmallGridConfig(tensor), 4);
  }
}

TEST(TensorGridTest, BadGridsAreErrors) {
  EXPECT_THAT(ConfigError(GridConfig({{"size", 8}, {"mode", "2d"}})),
              HasSubstr("parallelism.tensor: 2D tensor parallelism needs a square number of "
                        "ranks (q×q), not 8"));
  EXPECT_THAT(ConfigError(GridConfig({{"size", 8}, {"mode", "2.5d"}, {"depth", 3}})),
              HasSubstr("needs q×q×depth ranks, not 8 with depth 3"));
  EXPECT_THAT(ConfigError(GridConfig({{"size", 4}, {"mode", "1d"}, {"depth", 2}})),
              HasSubstr("parallelism.tensor.depth: depth is a 2.5D setting"));
  EXPECT_THAT(ConfigError(GridConfig({{"size", 4}, {"mode", "3d"}})),
              HasSubstr("parallelism.tensor.mode"));
  EXPECT_THAT(ConfigError(GridConfig({{"size", 4}, {"mode", "2d"}, {"overlap", "none"}})),
              HasSubstr("parallelism.tensor.overlap: overlap is a 1D setting"));
  Json json = GridConfig({{"size", 8}, {"mode", "2.5d"}, {"depth", 2}});
  json["training"]["micro_batch"] = 2;
  EXPECT_THAT(ConfigError(json), HasSubstr("q × depth (the grid splits the batch) (4) must "
                                           "divide the micro-batch (2)"));
  json = GridConfig({{"size", 4}, {"mode", "2d"}, {"sequence_parallel", true}});
  EXPECT_THAT(ConfigError(json), HasSubstr("without sequence or expert parallelism"));
}

// The bytes of the collectives of `kind` over exactly the ranks {0, 4} (rank 0 and its depth
// replica on the 2×2×2 grid).
int64_t DepthPairBytes(const graph::TaskGraph& graph, graph::CommKind kind, int* count = nullptr) {
  int64_t bytes = 0;
  for (size_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(static_cast<uint32_t>(c)));
    const std::span<const int32_t> group = graph.group(comm.group);
    if (comm.kind != kind || group.size() != 2 || group[0] != 0 || group[1] != 4) continue;
    bytes += comm.size.count();
    if (count != nullptr) ++*count;
  }
  return bytes;
}

TEST(TensorGridTest, ZeroShardsOverTheReplicasAndTheDepthLayers) {
  // 2.5D 2×2×2, DP 1: rank 0 holds the same 53,492,736 weights as its depth replica, rank 4
  // (TesseractBytesPerLayerAndTheDepthAllReduce), so ZeRO shards them over those 2 ranks.
  constexpr int64_t kWeights = 53'492'736;
  Json json = GridConfig({{"size", 8}, {"mode", "2.5d"}, {"depth", 2}});
  json["parallelism"]["zero_stage"] = 1;
  const SimulationResult one = SimulateJson(json);
  const graph::TaskGraph& graph = one.iteration->graph;
  // ZeRO-1: the gradients reduce-scattered over the pair (fp16, 2 bytes), the optimizer state
  // halved (fp16 Adam: 12 bytes per parameter), the updated halves all-gathered after the step.
  EXPECT_EQ(DepthPairBytes(graph, graph::CommKind::kReduceScatter), kWeights * 2);
  EXPECT_EQ(DepthPairBytes(graph, graph::CommKind::kAllReduce), 0);
  EXPECT_EQ(DepthPairBytes(graph, graph::CommKind::kAllGather), kWeights / 2 * 2);
  const models::MemoryBreakdown& memory = one.iteration->stats.stage_memory.front();
  EXPECT_EQ(memory.parameter_count, kWeights);
  EXPECT_EQ(memory.optimizer_state, kWeights / 2 * 12);
  EXPECT_EQ(memory.parameters, kWeights * 2);
  // ZeRO-3: the parameters too; each piece (embedding, layer, final norm) is gathered before
  // its forward and its backward: twice the weights' halves, and no gather after the step.
  json["parallelism"]["zero_stage"] = 3;
  const SimulationResult three = SimulateJson(json);
  int gathers = 0;
  EXPECT_EQ(DepthPairBytes(three.iteration->graph, graph::CommKind::kAllGather, &gathers),
            2 * (kWeights / 2) * 2);
  EXPECT_EQ(gathers, 6);
  EXPECT_EQ(three.iteration->stats.stage_memory.front().parameters, kWeights / 2 * 2);
  // With data parallelism too (DP 2 × 2D 2×2 and × 2.5D 2×2×2, PP 2), symmetric ranks still
  // agree with full ones.
  for (const Json& tensor :
       {Json{{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}, Json{{"size", 4}, {"mode", "2d"}}}) {
    for (const int stage : {1, 3}) {
      Json small = SmallGridConfig(tensor);
      small["parallelism"]["zero_stage"] = stage;
      ExpectSymmetricMatchesFull(small, 4);
    }
  }
}

}  // namespace
}  // namespace dtsim::strategies
