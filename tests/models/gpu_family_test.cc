// GpuFamilyOf: which GPU a name speaks of, for telling an op-cost table measured on one GPU
// from a config on another (strategies/simulate.cc) and a trace's device from `dtsim ops
// --gpu` (tools/cli/ops_command.cc).
#include <gtest/gtest.h>

#include "models/gpu.h"

namespace dtsim::models {
namespace {

TEST(GpuFamily, PresetsDeviceNamesAndCustomNamesNameTheirFamily) {
  EXPECT_EQ(GpuFamilyOf("h100-sxm5-80gb"), "h100");
  EXPECT_EQ(GpuFamilyOf("h100-pcie-80gb"), "h100");
  EXPECT_EQ(GpuFamilyOf("a100-sxm4-40gb"), "a100");
  // CUDA's device names (deviceProperties[0].name of the shared traces, the profiler's test).
  EXPECT_EQ(GpuFamilyOf("NVIDIA A100-PG509-200"), "a100");
  EXPECT_EQ(GpuFamilyOf("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuFamilyOf("Tesla V100-SXM2-32GB"), "v100");
  EXPECT_EQ(GpuFamilyOf("my-h200"), "h200");
  // GB200 holds "b200" but not as a word: the longer family wins.
  EXPECT_EQ(GpuFamilyOf("NVIDIA GB200"), "gb200");
  EXPECT_EQ(GpuFamilyOf("b200-sxm-180gb"), "b200");
}

TEST(GpuFamily, ANameThatSpeaksOfNoFamilyHasNone) {
  EXPECT_EQ(GpuFamilyOf(""), "");
  EXPECT_EQ(GpuFamilyOf("unknown"), "");
  EXPECT_EQ(GpuFamilyOf("custom-accelerator"), "");
  EXPECT_EQ(GpuFamilyOf("xa100"), "");      // not a word of the name
  EXPECT_EQ(GpuFamilyOf("h1000"), "");      // nor a longer number
  EXPECT_EQ(GpuFamilyOf("NVIDIA L4"), "");  // no preset of that family
}

}  // namespace
}  // namespace dtsim::models
