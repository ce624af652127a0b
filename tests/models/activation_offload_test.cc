// Activation offloading as Transformer Engine runs it (models/activation_offload.h): its window
// map and what stays on the device, and the memory model's peak under it — each expectation
// derived in its comment.
#include "models/activation_offload.h"

#include <gtest/gtest.h>

#include <vector>

#include "models/memory.h"

namespace dtsim::models {
namespace {

TEST(ActivationOffloadTest, WindowsSpreadTheCopiesOverTheLayersAsTransformerEngineDoes) {
  // layer_window_map: w_i = ⌊L/N⌋(i + 1) − 1, plus i + 1 for the first L mod N groups and
  // L mod N after them.
  // L = 32, N = 16: ⌊L/N⌋ = 2, no remainder: 1, 3, …, 31.
  std::vector<int> even;
  for (int i = 0; i < 16; ++i) even.push_back(2 * i + 1);
  EXPECT_EQ(OffloadWindows(32, 16), even);
  // L = 80, N = 30 (Megatron-Bridge's Llama 3 70B GB300 recipe): ⌊L/N⌋ = 2, 20 spare: the first
  // 20 windows 3(i + 1) − 1 = 2, 5, …, 59; then 2(i + 1) − 1 + 20 = 61, 63, …, 79.
  const std::vector<int> bridge = OffloadWindows(80, 30);
  ASSERT_EQ(bridge.size(), 30u);
  EXPECT_EQ(bridge[0], 2);
  EXPECT_EQ(bridge[19], 59);
  EXPECT_EQ(bridge[20], 61);
  EXPECT_EQ(bridge[29], 79);
  // L = 4, N = 3: ⌊L/N⌋ = 1, 1 spare: 0 + 1 = 1, then 1 + 1 = 2, 2 + 1 = 3.
  EXPECT_EQ(OffloadWindows(4, 3), (std::vector<int>{1, 2, 3}));
  // N = 1: the one copy is waited for at the last layer.
  EXPECT_EQ(OffloadWindows(12, 1), (std::vector<int>{11}));
  EXPECT_TRUE(OffloadWindows(12, 0).empty());
}

TEST(ActivationOffloadTest, AnchorsOfBothHandlers) {
  // TE 2.10's synchronizer: a_i = L − N − 1 + i (L = 32, N = 16: 15 … 30); v1: the windows.
  const std::vector<int> synchronizer = OffloadAnchors(32, 16, OffloadHandler::kSynchronizer);
  ASSERT_EQ(synchronizer.size(), 16u);
  EXPECT_EQ(synchronizer.front(), 15);
  EXPECT_EQ(synchronizer.back(), 30);
  EXPECT_EQ(OffloadAnchors(32, 16, OffloadHandler::kV1), OffloadWindows(32, 16));
  // N = L − 1: each layer is anchored at itself (its copy must be out before the next layer).
  EXPECT_EQ(OffloadAnchors(4, 3, OffloadHandler::kSynchronizer), (std::vector<int>{0, 1, 2}));
}

TEST(ActivationOffloadTest, AnOffloadedLayerIsBackFromItsAnchorsBackwardOn) {
  const std::vector<int> windows = OffloadWindows(32, 16);  // w_i = 2i + 1
  // Layer 3 (w = 7): away at the loss (now = 32) and through layer 8's backward, back from
  // layer 7's.
  EXPECT_FALSE(OffloadedLayerResident(windows, 3, 32));
  EXPECT_FALSE(OffloadedLayerResident(windows, 3, 8));
  EXPECT_TRUE(OffloadedLayerResident(windows, 3, 7));
  EXPECT_TRUE(OffloadedLayerResident(windows, 3, 3));
  // Layers from N on are never offloaded.
  EXPECT_TRUE(OffloadedLayerResident(windows, 16, 32));
}

MemoryPlan LlamaPlan(int offloaded, OffloadHandler handler = OffloadHandler::kSynchronizer) {
  return MemoryPlan{.shard = {.micro_batch = 1, .seq_len = 4096, .dtype = DType::kBf16},
                    .offloaded_layers = offloaded,
                    .offload_handler = handler};
}

TEST(ActivationOffloadTest, ThePeakKeepsTheLayersNotOffloaded) {
  // A 16-layer model with a tiny vocabulary, so the peak is the start of the backward pass
  // (layer 15's backward, its working set beside everything kept) with or without offloading.
  // There the layers ≥ N are on the device and, of the offloaded ones, those anchored at
  // layer 15 or later. Under TE 2.10 none is (a_{N−1} = L − 2 = 14): the peak's activations
  // drop by N layers' kept bytes K, as its docstring says ((L − N)·T at most). Under v1 group
  // N − 1 is (w_{N−1} = L − 1 = 15): N − 1 layers, and N = 1 saves nothing at the peak — its
  // one layer comes back as the backward starts.
  const ModelSpec model{.name = "offload-test",
                        .transformer = {.layers = 16,
                                        .hidden = 2048,
                                        .heads = 16,
                                        .kv_heads = 16,
                                        .ffn_hidden = 8192,
                                        .vocab = 128,
                                        .max_seq = 4096}};
  const Expected<MemoryBreakdown> none = EstimateMemory(model, LlamaPlan(0));
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  const int64_t kept = LayerKeptBytes(model.transformer, LlamaPlan(0), 0);
  ASSERT_GT(kept, 0);
  for (const int offloaded : {1, 4, 8, 15}) {
    const Expected<MemoryBreakdown> synchronizer = EstimateMemory(model, LlamaPlan(offloaded));
    ASSERT_TRUE(synchronizer.ok()) << synchronizer.error().ToString();
    EXPECT_EQ(none->activations - synchronizer->activations, offloaded * kept) << offloaded;
    EXPECT_EQ(synchronizer->temporary, none->temporary) << offloaded;
    const Expected<MemoryBreakdown> v1 =
        EstimateMemory(model, LlamaPlan(offloaded, OffloadHandler::kV1));
    ASSERT_TRUE(v1.ok()) << v1.error().ToString();
    EXPECT_EQ(none->activations - v1->activations, (offloaded - 1) * kept) << offloaded;
    EXPECT_EQ(v1->temporary, none->temporary) << offloaded;
  }
}

}  // namespace
}  // namespace dtsim::models
