#include "sim/graph/builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dtsim::graph {
namespace {

using testing::HasSubstr;

TEST(StringTableTest, ABufferReusedWithNewTextInternsTheNewText) {
  // The table remembers recent texts by address; the same buffer holding another text (a name
  // formatted into a reused string) must not get the old text's id.
  StringTable table;
  std::string buffer = "layer1 fwd";
  const NameId first = table.Intern(buffer);
  EXPECT_EQ(table.Intern(buffer), first);
  buffer[5] = '2';  // same address, same length, new text
  const NameId second = table.Intern(buffer);
  EXPECT_NE(second, first);
  EXPECT_EQ(table.Get(second), "layer2 fwd");
  EXPECT_EQ(table.Get(first), "layer1 fwd");
  EXPECT_EQ(table.Intern("layer1 fwd"), first);  // another address, found by hash
  buffer = "layer1 fwd";
  EXPECT_EQ(table.Intern(buffer), first);
  EXPECT_EQ(table.size(), 3u);  // "", "layer1 fwd", "layer2 fwd"
}

TEST(TaskGraphBuilderTest, BuildsCompactAdjacency) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  const TaskId a = builder.AddTask(s, TaskKind::kCompute, "a", "fwd", Microseconds(1));
  const TaskId b = builder.AddTask(s, TaskKind::kCompute, "b", "fwd", Microseconds(2));
  const TaskId c = builder.AddTask(builder.Stream(1, "compute"), TaskKind::kCompute, "c", "bwd",
                                   Microseconds(3));
  builder.AddDependency(c, a);
  builder.AddDependency(c, b);
  builder.AddDependency(c, a);  // duplicate, merged
  Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_TRUE(built.ok()) << built.error().ToString();
  const TaskGraph& graph = *built;
  EXPECT_EQ(graph.task_count(), 3u);
  EXPECT_EQ(graph.rank_count(), 2);
  EXPECT_EQ(graph.stream_count(), 2u);
  EXPECT_EQ(graph.dependency_count(), 2u);
  ASSERT_EQ(graph.dependencies(c).size(), 2u);
  EXPECT_EQ(graph.dependencies(c)[0], a);
  EXPECT_EQ(graph.dependencies(c)[1], b);
  ASSERT_EQ(graph.successors(a).size(), 1u);
  EXPECT_EQ(graph.successors(a)[0], c);
  ASSERT_EQ(graph.stream_tasks(s).size(), 2u);
  EXPECT_EQ(graph.stream_tasks(s)[1], b);
  EXPECT_EQ(graph.category_name(graph.task(c).category), "bwd");
  EXPECT_EQ(graph.rank_of(c), 1);
  EXPECT_EQ(sizeof(Task), 24u);  // large graphs depend on this staying small
}

TEST(TaskGraphBuilderTest, PairsSendsAndRecvsInOrderPerTag) {
  TaskGraphBuilder builder;
  const StreamId s0 = builder.Stream(0, "pp");
  const StreamId s1 = builder.Stream(1, "pp");
  const TaskId send_a = builder.AddSend(s0, 1, Bytes(10), 0, "", "");
  const TaskId send_b = builder.AddSend(s0, 1, Bytes(20), 0, "", "");
  const TaskId recv_a = builder.AddRecv(s1, 0, 0, "", "");
  const TaskId recv_b = builder.AddRecv(s1, 0, 0, "", "", Bytes(20));
  Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_TRUE(built.ok()) << built.error().ToString();
  const TaskGraph& graph = *built;
  ASSERT_EQ(graph.comm_count(), 2u);
  EXPECT_EQ(graph.task(send_a).comm, graph.task(recv_a).comm);
  EXPECT_EQ(graph.task(send_b).comm, graph.task(recv_b).comm);
  EXPECT_EQ(graph.comm(graph.task(send_b).comm).size, Bytes(20));
  EXPECT_EQ(graph.participants(graph.task(send_a).comm)[0], send_a);
}

TEST(TaskGraphBuilderTest, UnmatchedSendIsAnError) {
  TaskGraphBuilder builder;
  builder.AddSend(builder.Stream(0, "pp"), 1, Bytes(10), 7, "act", "");
  builder.AddRecv(builder.Stream(1, "pp"), 0, 8, "act", "");
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.error().message(),
            "task #0 (rank 0, stream \"pp\", act) has no matching recv on rank 1 "
            "(rank 0 to rank 1, tag 7; pairs match in order)");
}

TEST(TaskGraphBuilderTest, UnmatchedRecvIsAnError) {
  TaskGraphBuilder builder;
  builder.AddRecv(builder.Stream(1, "pp"), 0, 0, "grad", "");
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.error().message(), HasSubstr("has no matching send on rank 0"));
}

TEST(TaskGraphBuilderTest, RecvSizeMustMatchItsSend) {
  TaskGraphBuilder builder;
  builder.AddSend(builder.Stream(0, "pp"), 1, Bytes(10), 0, "", "");
  builder.AddRecv(builder.Stream(1, "pp"), 0, 0, "", "", Bytes(11));
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.error().message(), HasSubstr("expects 11 B but its send"));
}

TEST(TaskGraphBuilderTest, CollectivePostedByPartOfItsGroup) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1, 2, 3};
  const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(1024), group, "grads");
  builder.AddCollectiveTask(builder.Stream(0, "dp"), ar, "", "");
  builder.AddCollectiveTask(builder.Stream(1, "dp"), ar, "", "");
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.error().message(),
            "collective \"grads\" (all_reduce of 1024 B over ranks [0, 1, 2, 3]) is posted by "
            "only part of its group: ranks 2, 3 never post it");
}

TEST(TaskGraphBuilderTest, CollectivePostedByNonMemberOrTwice) {
  {
    TaskGraphBuilder builder;
    const std::vector<int32_t> group = {0, 1};
    const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "x");
    builder.AddCollectiveTask(builder.Stream(0, "dp"), ar, "", "");
    builder.AddCollectiveTask(builder.Stream(1, "dp"), ar, "", "");
    builder.AddCollectiveTask(builder.Stream(2, "dp"), ar, "", "");
    EXPECT_THAT(std::move(builder).Build().error().message(),
                HasSubstr("but rank 2 is not in its group"));
  }
  {
    TaskGraphBuilder builder;
    const std::vector<int32_t> group = {0, 1};
    const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "x");
    builder.AddCollectiveTask(builder.Stream(0, "dp"), ar, "", "");
    builder.AddCollectiveTask(builder.Stream(0, "dp"), ar, "", "");
    EXPECT_THAT(std::move(builder).Build().error().message(), HasSubstr("rank 0 posts"));
  }
}

// Groups made once and names interned once give the graph the span and text calls give.
TEST(TaskGraphBuilderTest, GroupAndNameIdsBuildWhatSpansAndTextsBuild) {
  const std::vector<int32_t> members = {2, 0};
  const std::vector<int32_t> logical = {2, 0, 1, 3};
  const auto build = [&](bool ids) {
    TaskGraphBuilder builder;
    CommId comm;
    if (ids) {
      comm = builder.AddCollective(CommKind::kAllGather, Bytes(64), builder.MakeGroup(members),
                                   builder.MakeGroup(logical));
      builder.AddTask(builder.Stream(2, "compute"), TaskKind::kCompute, builder.Name("fwd"),
                      builder.Category("compute"), DurationNs(5));
    } else {
      comm = builder.AddCollective(CommKind::kAllGather, Bytes(64), members);
      builder.PriceAs(comm, logical);
      builder.AddTask(builder.Stream(2, "compute"), TaskKind::kCompute, "fwd", "compute",
                      DurationNs(5));
    }
    for (int32_t rank : members)
      builder.AddCollectiveTask(builder.Stream(rank, "tp"), comm, "", "");
    Expected<TaskGraph> graph = std::move(builder).Build();
    EXPECT_TRUE(graph.ok());
    return std::move(*graph);
  };
  const TaskGraph by_ids = build(true);
  const TaskGraph by_text = build(false);
  ASSERT_EQ(by_ids.comm_count(), 1u);
  const Communication& a = by_ids.comm(CommId(0));
  const Communication& b = by_text.comm(CommId(0));
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.size, b.size);
  EXPECT_THAT(by_ids.group(a.group), testing::ElementsAre(2, 0));
  EXPECT_THAT(by_ids.group(a.priced_group), testing::ElementsAre(2, 0, 1, 3));
  EXPECT_THAT(by_text.group(b.priced_group), testing::ElementsAre(2, 0, 1, 3));
  ASSERT_EQ(by_ids.task_count(), by_text.task_count());
  for (size_t i = 0; i < by_ids.task_count(); ++i) {
    const TaskId id(static_cast<uint32_t>(i));
    EXPECT_EQ(by_ids.name(by_ids.task(id).name), by_text.name(by_text.task(id).name));
    EXPECT_EQ(by_ids.category_name(by_ids.task(id).category),
              by_text.category_name(by_text.task(id).category));
  }
}

TEST(TaskGraphBuilderDeathTest, GroupIdsKeepTheBuildersChecks) {
  TaskGraphBuilder builder;
  const GroupId pair = builder.MakeGroup(std::vector<int32_t>{0, 1});
  const GroupId other = builder.MakeGroup(std::vector<int32_t>{2, 3});
  EXPECT_DEATH(builder.AddCollective(CommKind::kAllReduce, Bytes(8), pair, other),
               "logical group must contain its members");
  EXPECT_DEATH(builder.AddCollective(CommKind::kBroadcast, Bytes(8), pair, pair),
               "rooted collectives");
  EXPECT_DEATH(builder.MakeGroup(std::vector<int32_t>{1, 1}), "duplicate rank");
}

TEST(CheckAcyclicTest, DependencyCycleIsReportedEdgeByEdge) {
  TaskGraphBuilder builder;
  const TaskId a = builder.AddTask(builder.Stream(0, "s"), TaskKind::kCompute, "a", "", {});
  const TaskId b = builder.AddTask(builder.Stream(1, "s"), TaskKind::kCompute, "b", "", {});
  const TaskId c = builder.AddTask(builder.Stream(2, "s"), TaskKind::kCompute, "c", "", {});
  builder.AddDependency(b, a);
  builder.AddDependency(c, b);
  builder.AddDependency(a, c);
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.error().message(),
            "dependency cycle; each must finish before the next:\n"
            "    task #0 (rank 0, stream \"s\", a)\n"
            "    -> (dependency) task #1 (rank 1, stream \"s\", b)\n"
            "    -> (dependency) task #2 (rank 2, stream \"s\", c)\n"
            "    -> (dependency) task #0 (rank 0, stream \"s\", a)");
}

TEST(CheckAcyclicTest, SelfDependency) {
  TaskGraphBuilder builder;
  const TaskId a = builder.AddTask(builder.Stream(0, "s"), TaskKind::kCompute, "a", "", {});
  builder.AddDependency(a, a);
  EXPECT_THAT(std::move(builder).Build().error().message(), HasSubstr("dependency cycle"));
}

TEST(CheckAcyclicTest, DependencyAgainstStreamOrder) {
  // On one stream "first" runs before "second", but "first" waits for "second".
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "s");
  const TaskId first = builder.AddTask(s, TaskKind::kCompute, "first", "", {});
  const TaskId second = builder.AddTask(s, TaskKind::kCompute, "second", "", {});
  builder.AddDependency(first, second);
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.error().message(), HasSubstr("(stream order)"));
  EXPECT_THAT(built.error().message(), HasSubstr("(dependency)"));
}

TEST(CheckAcyclicTest, CollectivesInCrossingOrderDeadlock) {
  // Rank 0 posts A then B on one stream; rank 1 posts B then A: neither can ever rendezvous.
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId a = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "A");
  const CommId b = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "B");
  const StreamId s0 = builder.Stream(0, "nccl");
  const StreamId s1 = builder.Stream(1, "nccl");
  builder.AddCollectiveTask(s0, a, "", "");
  builder.AddCollectiveTask(s0, b, "", "");
  builder.AddCollectiveTask(s1, b, "", "");
  builder.AddCollectiveTask(s1, a, "", "");
  const Expected<TaskGraph> built = std::move(builder).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.error().message(), HasSubstr("deadlock: communications are posted in an "
                                                 "order that can never rendezvous"));
  EXPECT_THAT(built.error().message(), HasSubstr("collective \"A\""));
  EXPECT_THAT(built.error().message(), HasSubstr("collective \"B\""));
}

TEST(CheckAcyclicTest, CollectivesInTheSameOrderOnDifferentStreamsAreFine) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId a = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "A");
  const CommId b = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "B");
  for (int32_t rank : group) {
    builder.AddCollectiveTask(builder.Stream(rank, "nccl"), a, "", "");
    builder.AddCollectiveTask(builder.Stream(rank, "nccl"), b, "", "");
  }
  EXPECT_TRUE(std::move(builder).Build().ok());
}

}  // namespace
}  // namespace dtsim::graph
