// The network-model registry: every entry makes the model it names, prepared for a graph, and a
// wrong name is an error that lists the registered ones.
#include "network/network_models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim::network {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

// 12 ranks all-reducing 64 MiB: a 0-node dgx-a100 is sized to ceil(12 / 8) = 2 nodes.
graph::TaskGraph TwelveRankAllReduce() {
  graph::TaskGraphBuilder builder;
  std::vector<int32_t> group;
  for (int32_t r = 0; r < 12; ++r) group.push_back(r);
  const graph::CommId ar =
      builder.AddCollective(graph::CommKind::kAllReduce, Bytes(64 << 20), group, "grads");
  for (int32_t r : group) builder.AddCollectiveTask(builder.Stream(r, "dp"), ar, "ar", "dp");
  return std::move(builder).Build().value();
}

TEST(NetworkModelsTest, TheRegistryListsEveryModelOnce) {
  EXPECT_THAT(NetworkModelNames(), ElementsAre("analytical", "flow"));
  ASSERT_EQ(NetworkModels().size(), NetworkModelNames().size());
  EXPECT_EQ(DefaultNetworkModel().name, "analytical");
  EXPECT_FALSE(DefaultNetworkModel().shares_links);
  EXPECT_EQ(LinkSharingNetworkModel().name, "flow");
  EXPECT_TRUE(LinkSharingNetworkModel().shares_links);
}

TEST(NetworkModelsTest, EachEntryMakesThePreparedModelItNames) {
  const graph::TaskGraph graph = TwelveRankAllReduce();
  for (const NetworkModelEntry& entry : NetworkModels()) {
    Expected<std::unique_ptr<ClusterModel>> model =
        MakePreparedModel(entry, *ClusterPreset("dgx-a100", 0), graph);
    ASSERT_TRUE(model.ok()) << entry.name << ": " << model.error().ToString();
    EXPECT_EQ((*model)->name(), entry.name);
    EXPECT_EQ((*model)->cluster().nodes, 2) << entry.name;
    engine::Simulator simulator(graph, **model);
    ASSERT_TRUE(simulator.Run().ok()) << entry.name;
    EXPECT_GT(simulator.Summarize().makespan.ns(), 0) << entry.name;
  }
}

TEST(NetworkModelsTest, PrepareErrorsComeBackFromTheFactory) {
  // 12 ranks do not fit one 8-GPU node.
  Expected<std::unique_ptr<ClusterModel>> model = MakePreparedModel(
      DefaultNetworkModel(), *ClusterPreset("dgx-a100", 1), TwelveRankAllReduce());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.error().ToString(), HasSubstr("12"));
}

TEST(NetworkModelsTest, AnUnknownNameSuggestsTheNearest) {
  EXPECT_EQ((*FindNetworkModel("flow"))->name, "flow");
  const Expected<const NetworkModelEntry*> wrong = FindNetworkModel("flw");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().ToString(),
            "unknown network model (did you mean \"flow\"?); registered: \"analytical\", "
            "\"flow\", got \"flw\"");
}

}  // namespace
}  // namespace dtsim::network
