#include "sim/graph/graph_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtsim::graph {
namespace {

using testing::HasSubstr;

// A graph document with the standard header around `body` (the rest of the top-level object).
Json Document(const std::string& body) {
  return Json::parse(R"({"format": "dtsim.task_graph", "version": "1.0", )" + body + "}");
}

Expected<TaskGraph> Load(const std::string& body) {
  return TaskGraphFromJson(Document(body), "g.json");
}

std::string LoadError(const std::string& body) {
  const Expected<TaskGraph> graph = Load(body);
  return graph.ok() ? "(loaded fine)" : graph.error().ToString();
}

TEST(GraphJsonTest, LoadsTheShippedExample) {
  const Expected<TaskGraph> graph = LoadTaskGraph(DTSIM_EXAMPLES_DIR "/pipeline_2x2.json");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  EXPECT_EQ(graph->task_count(), 40u);
  EXPECT_EQ(graph->rank_count(), 4);
  // 2 all-reduces + 2 replicas x 2 micro-batches x (activation + gradient) send/recv pairs.
  EXPECT_EQ(graph->comm_count(), 2u + 2 * 2 * 2);
}

TEST(GraphJsonTest, QuantityAndIntegerFormsAreEquivalent) {
  const Expected<TaskGraph> graph = Load(R"(
    "collectives": [{"id": 1, "op": "broadcast", "size": "1 KiB", "group": [0, 1], "root": 1}],
    "tasks": [
      {"id": "a", "rank": 0, "duration": "1.5 us"},
      {"id": "b", "rank": 0, "duration_ns": 1500, "deps": ["a"]},
      {"id": 7, "rank": 0, "kind": "collective", "collective": "1", "deps": ["b"]},
      {"id": "d", "rank": 1, "kind": "collective", "collective": "1"},
      {"id": "e", "rank": 1, "duration": "1 us", "deps": [7]}])");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  EXPECT_EQ(graph->task(TaskId(0)).duration, graph->task(TaskId(1)).duration);
  EXPECT_EQ(graph->comm(CommId(0)).size, Bytes(1024));
  EXPECT_EQ(graph->comm(CommId(0)).root, 1);
  EXPECT_EQ(graph->external_id(TaskId(2)), "7");
  EXPECT_EQ(graph->dependencies(TaskId(4))[0], TaskId(2));  // integer id 7 in "deps"
}

TEST(GraphJsonTest, WriteThenReadGivesTheSameGraph) {
  const Expected<TaskGraph> original = LoadTaskGraph(DTSIM_EXAMPLES_DIR "/pipeline_2x2.json");
  ASSERT_TRUE(original.ok());
  const Json written = TaskGraphToJson(*original);
  const Expected<TaskGraph> reread = TaskGraphFromJson(written, "written");
  ASSERT_TRUE(reread.ok()) << reread.error().ToString();
  EXPECT_EQ(TaskGraphToJson(*reread), written);
  ASSERT_EQ(reread->task_count(), original->task_count());
  for (uint32_t t = 0; t < original->task_count(); ++t) {
    const Task& a = original->task(TaskId(t));
    const Task& b = reread->task(TaskId(t));
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.duration, b.duration);
    EXPECT_EQ(original->external_id(TaskId(t)), reread->external_id(TaskId(t)));
    EXPECT_EQ(original->dependencies(TaskId(t)).size(), reread->dependencies(TaskId(t)).size());
  }
}

TEST(GraphJsonTest, PricedAsGroupsRoundTrip) {
  // One simulated member of a collective priced over eight ranks (symmetric simulation).
  const Json document = Json::parse(R"({
    "format": "dtsim.task_graph", "version": "1.0",
    "collectives": [{"id": "tp0", "op": "all_reduce", "size_bytes": 1000, "group": [0],
                     "priced_as": [0, 1, 2, 3, 4, 5, 6, 7]}],
    "tasks": [{"id": "a", "rank": 0, "stream": "compute", "kind": "collective",
               "collective": "tp0"}]})");
  const Expected<TaskGraph> graph = TaskGraphFromJson(document, "g.json");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  const Communication& comm = graph->comm(CommId(0));
  EXPECT_EQ(graph->group(comm.group).size(), 1u);
  EXPECT_EQ(graph->group(comm.priced_group).size(), 8u);
  EXPECT_EQ(graph->rank_count(), 8);
  EXPECT_EQ(TaskGraphToJson(*graph)["collectives"][0]["priced_as"],
            document["collectives"][0]["priced_as"]);
  Json bad = document;
  bad["collectives"][0]["priced_as"] = {1, 2};
  EXPECT_EQ(TaskGraphFromJson(bad, "g.json").error().ToString(),
            "g.json: collectives[0].priced_as: priced_as must contain every member of the group, "
            "got 0");
}

TEST(GraphJsonTest, StreamOrdersAndEagerSendsRoundTrip) {
  const Expected<TaskGraph> graph = Load(R"(
    "streams": [{"rank": 0, "name": "gpu", "order": "ready_first"},
                {"rank": 1, "name": "recv", "order": "unbounded"}],
    "tasks": [
      {"id": "a", "rank": 0, "stream": "gpu", "duration": "1 us"},
      {"id": "s", "rank": 0, "stream": "comm", "kind": "send", "peer": 1, "size": "1 KiB",
       "eager": true},
      {"id": "r", "rank": 1, "stream": "recv", "kind": "recv", "peer": 0}])");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  EXPECT_EQ(graph->stream(graph->task(TaskId(0)).stream).order, StreamOrder::kReadyFirst);
  EXPECT_EQ(graph->stream(graph->task(TaskId(1)).stream).order, StreamOrder::kInOrder);
  EXPECT_EQ(graph->stream(graph->task(TaskId(2)).stream).order, StreamOrder::kUnbounded);
  EXPECT_TRUE(graph->comm(graph->task(TaskId(1)).comm).eager);
  const Json written = TaskGraphToJson(*graph);
  EXPECT_EQ(written["streams"].size(), 2u);  // the in-order "comm" stream is the default
  EXPECT_EQ(written["tasks"][1]["eager"], true);
  const Expected<TaskGraph> reread = TaskGraphFromJson(written, "written");
  ASSERT_TRUE(reread.ok()) << reread.error().ToString();
  EXPECT_EQ(TaskGraphToJson(*reread), written);
}

struct BadGraph {
  const char* what;
  const char* body;
  const char* error;
};

class BadGraphTest : public testing::TestWithParam<BadGraph> {};

TEST_P(BadGraphTest, ReportsFilePathAndValue) {
  EXPECT_EQ(LoadError(GetParam().body), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadGraphTest,
    testing::Values(
        BadGraph{"missing field", R"("tasks": [{"id": "a", "duration": "1 us"}])",
                 "g.json: tasks[0].rank: missing required field"},
        BadGraph{"unknown stream order",
                 R"("streams": [{"rank": 0, "name": "gpu", "order": "ready-first"}],
                    "tasks": [])",
                 "g.json: streams[0].order: unknown stream order (did you mean "
                 "\"ready_first\"?); expected one of \"in_order\", \"ready_first\", "
                 "\"unbounded\", got \"ready-first\""},
        BadGraph{"stream declared twice",
                 R"("streams": [{"rank": 0, "name": "gpu", "order": "ready_first"},
                                {"rank": 0, "name": "gpu", "order": "unbounded"}],
                    "tasks": [])",
                 "g.json: streams[1].name: stream \"gpu\" of rank 0 is declared twice, got "
                 "\"gpu\""},
        BadGraph{
            "eager recv",
            R"("tasks": [{"id": "s", "rank": 0, "kind": "send", "peer": 1, "size": "1 B"},
                              {"id": "r", "rank": 1, "kind": "recv", "peer": 0, "eager": true}])",
            "g.json: tasks[1].eager: only a send can be eager; a recv ends when its data is in "
            "either way"},
        BadGraph{"wrong type", R"("tasks": [{"id": "a", "rank": "zero", "duration": "1 us"}])",
                 "g.json: tasks[0].rank: expected an integer, got \"zero\""},
        BadGraph{"rank out of range",
                 R"("tasks": [{"id": "a", "rank": 99999999, "duration": "1 us"}])",
                 "g.json: tasks[0].rank: must be in [0, 4194303], got 99999999"},
        BadGraph{"unknown key",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us", "dep": []}])",
                 "g.json: tasks[0].dep: unknown key (did you mean \"deps\"?)"},
        BadGraph{"unknown top-level key", R"("task": [])",
                 "g.json: task: unknown key (did you mean \"tasks\"?)"},
        BadGraph{"negative duration", R"("tasks": [{"id": "a", "rank": 0, "duration": "-5 us"}])",
                 "g.json: tasks[0].duration: duration must not be negative, got \"-5 us\""},
        BadGraph{"negative duration_ns", R"("tasks": [{"id": "a", "rank": 0, "duration_ns": -5}])",
                 "g.json: tasks[0].duration_ns: duration must not be negative, got -5"},
        BadGraph{"bad unit", R"("tasks": [{"id": "a", "rank": 0, "duration": "5 sec"}])",
                 "g.json: tasks[0].duration: unknown duration unit \"sec\" (did you mean \"s\"?), "
                 "got \"5 sec\""},
        BadGraph{"both duration forms",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us", "duration_ns": 1}])",
                 "g.json: tasks[0]: give either \"duration\" or \"duration_ns\", not both"},
        BadGraph{"no duration", R"("tasks": [{"id": "a", "rank": 0}])",
                 "g.json: tasks[0]: missing required field \"duration\" (or \"duration_ns\")"},
        BadGraph{"dangling dependency",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us"},
                              {"id": "b", "rank": 0, "duration": "1 us", "deps": ["a", "nope"]}])",
                 "g.json: tasks[1].deps[1]: dependency on an unknown task id, got \"nope\""},
        BadGraph{"duplicate id",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us"},
                              {"id": "a", "rank": 1, "duration": "1 us"}])",
                 "g.json: tasks[1].id: duplicate task id, got \"a\""},
        BadGraph{"bad id", R"("tasks": [{"id": -3, "rank": 0, "duration": "1 us"}])",
                 "g.json: tasks[0].id: expected a non-empty string or a non-negative integer, "
                 "got -3"},
        BadGraph{"unknown kind", R"("tasks": [{"id": "a", "rank": 0, "kind": "compte"}])",
                 "g.json: tasks[0].kind: unknown task kind (did you mean \"compute\"?); expected "
                 "one of \"compute\", \"memcpy\", \"collective\", \"send\", \"recv\", \"delay\", "
                 "got \"compte\""},
        BadGraph{"communication with a duration",
                 R"("tasks": [{"id": "a", "rank": 0, "kind": "send", "peer": 1,
                               "size": "1 MiB", "duration": "1 us"}])",
                 "g.json: tasks[0].duration: a send task takes the time the network model gives "
                 "it; remove the fixed duration"},
        BadGraph{"send without size",
                 R"("tasks": [{"id": "a", "rank": 0, "kind": "send", "peer": 1}])",
                 "g.json: tasks[0]: missing required field \"size\" (or \"size_bytes\")"},
        BadGraph{
            "send to self",
            R"("tasks": [{"id": "a", "rank": 2, "kind": "send", "peer": 2, "size": "1 B"}])",
            "g.json: tasks[0].peer: a task cannot send to or receive from its own rank, got 2"},
        BadGraph{"unmatched send",
                 R"("tasks": [{"id": "a", "rank": 0, "kind": "send", "peer": 1, "size": "1 B"}])",
                 "g.json: task \"a\" (rank 0, stream \"compute\") has no matching recv on rank 1 "
                 "(rank 0 to rank 1, tag 0; pairs match in order)"},
        BadGraph{"unknown collective reference",
                 R"("tasks": [{"id": "a", "rank": 0, "kind": "collective", "collective": "x"}])",
                 "g.json: tasks[0].collective: no collective with this id in \"collectives\", "
                 "got \"x\""},
        BadGraph{
            "unknown collective op",
            R"("collectives": [{"id": "c", "op": "allreduce", "size": "1 B", "group": [0]}],
                    "tasks": [])",
            "g.json: collectives[0].op: unknown collective op (did you mean \"all_reduce\"?); "
            "expected one of \"all_reduce\", \"all_gather\", \"reduce_scatter\", "
            "\"all_to_all\", \"broadcast\", \"reduce\", \"barrier\", \"shift\", got \"allreduce\""},
        BadGraph{
            "bad size unit",
            R"("collectives": [{"id": "c", "op": "all_reduce", "size": "4 MiBs", "group": [0]}],
                    "tasks": [])",
            "g.json: collectives[0].size: unknown size unit \"MiBs\" (did you mean \"MiB\"?), "
            "got \"4 MiBs\""},
        BadGraph{"empty group",
                 R"("collectives": [{"id": "c", "op": "all_reduce", "size": "1 B", "group": []}],
                    "tasks": [])",
                 "g.json: collectives[0].group: expected a non-empty array of ranks, got []"},
        BadGraph{
            "repeated rank in group",
            R"("collectives": [{"id": "c", "op": "all_reduce", "size": "1 B", "group": [0, 1, 0]}],
                    "tasks": [])",
            "g.json: collectives[0].group[2]: rank appears twice in the group, got 0"},
        BadGraph{"broadcast without root",
                 R"("collectives": [{"id": "c", "op": "broadcast", "size": "1 B", "group": [0, 1]}],
                    "tasks": [])",
                 "g.json: collectives[0].root: missing required field (a broadcast needs a root "
                 "rank)"},
        BadGraph{"root outside the group",
                 R"("collectives": [{"id": "c", "op": "reduce", "size": "1 B", "group": [0, 1],
                                     "root": 5}], "tasks": [])",
                 "g.json: collectives[0].root: root is not a member of the group, got 5"},
        BadGraph{"duplicate collective id",
                 R"("collectives": [{"id": "c", "op": "barrier", "size": "0 B", "group": [0]},
                                    {"id": "c", "op": "barrier", "size": "0 B", "group": [0]}],
                    "tasks": [])",
                 "g.json: collectives[1].id: duplicate collective id, got \"c\""},
        BadGraph{
            "collective posted by part of its group",
            R"("collectives": [{"id": "c", "op": "all_reduce", "size": "1 B", "group": [0, 1]}],
                    "tasks": [{"id": "a", "rank": 0, "kind": "collective", "collective": "c"}])",
            "g.json: collective \"c\" (all_reduce of 1 B over ranks [0, 1]) is posted by only "
            "part of its group: rank 1 never posts it"},
        BadGraph{"cycle",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us", "deps": ["b"]},
                              {"id": "b", "rank": 1, "duration": "1 us", "deps": ["a"]}])",
                 "g.json: dependency cycle; each must finish before the next:\n"
                 "    task \"a\" (rank 0, stream \"compute\")\n"
                 "    -> (dependency) task \"b\" (rank 1, stream \"compute\")\n"
                 "    -> (dependency) task \"a\" (rank 0, stream \"compute\")"},
        BadGraph{"tasks not an array", R"("tasks": {})",
                 "g.json: tasks: expected an array, got {}"},
        BadGraph{"tasks missing", R"("metadata": {})", "g.json: tasks: missing required field"},
        BadGraph{"task not an object", R"("tasks": [3])",
                 "g.json: tasks[0]: expected a JSON object, got 3"},
        BadGraph{"missing id", R"("tasks": [{"rank": 0, "duration": "1 us"}])",
                 "g.json: tasks[0].id: missing required field"},
        BadGraph{"fractional duration_ns",
                 R"("tasks": [{"id": "a", "rank": 0, "duration_ns": 1.5}])",
                 "g.json: tasks[0].duration_ns: expected an integer, got 1.5"},
        BadGraph{"duration not a string", R"("tasks": [{"id": "a", "rank": 0, "duration": 5}])",
                 "g.json: tasks[0].duration: expected a quantity with a unit, such as \"2 us\", "
                 "got 5"},
        BadGraph{"stream not a string",
                 R"("tasks": [{"id": "a", "rank": 0, "stream": 1, "duration": "1 us"}])",
                 "g.json: tasks[0].stream: expected a string, got 1"},
        BadGraph{"peer missing", R"("tasks": [{"id": "a", "rank": 0, "kind": "recv"}])",
                 "g.json: tasks[0].peer: missing required field"},
        BadGraph{"tag not an integer",
                 R"("tasks": [{"id": "a", "rank": 0, "kind": "recv", "peer": 1, "tag": "x"}])",
                 "g.json: tasks[0].tag: expected an integer, got \"x\""},
        BadGraph{
            "negative size_bytes",
            R"("tasks": [{"id": "a", "rank": 0, "kind": "send", "peer": 1, "size_bytes": -1}])",
            "g.json: tasks[0].size_bytes: must be at least 0, got -1"},
        BadGraph{"recv size differs from its send",
                 R"("tasks": [{"id": "s", "rank": 0, "kind": "send", "peer": 1, "size": "2 KiB"},
                              {"id": "r", "rank": 1, "kind": "recv", "peer": 0, "size_bytes": 1}])",
                 "g.json: task \"r\" (rank 1, stream \"compute\") expects 1 B but its send task "
                 "\"s\" (rank 0, stream \"compute\") carries 2048 B"},
        BadGraph{"collective posted by a non-member",
                 R"("collectives": [{"id": "c", "op": "barrier", "size": "0 B", "group": [0]}],
                    "tasks": [{"id": "a", "rank": 0, "kind": "collective", "collective": "c"},
                              {"id": "b", "rank": 3, "kind": "collective", "collective": "c"}])",
                 "g.json: task \"b\" (rank 3, stream \"compute\") posts collective \"c\" "
                 "(barrier of 0 B over ranks [0]), but rank 3 is not in its group"},
        BadGraph{"deps not an array",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us", "deps": "b"}])",
                 "g.json: tasks[0].deps: expected an array of task ids, got \"b\""},
        BadGraph{"dependency of the wrong type",
                 R"("tasks": [{"id": "a", "rank": 0, "duration": "1 us", "deps": [{}]}])",
                 "g.json: tasks[0].deps[0]: expected a task id, got {}"},
        BadGraph{"collectives not an array", R"("collectives": {}, "tasks": [])",
                 "g.json: collectives: expected an array, got {}"},
        BadGraph{"group missing",
                 R"("collectives": [{"id": "c", "op": "barrier", "size": "0 B"}], "tasks": [])",
                 "g.json: collectives[0].group: missing required field"},
        BadGraph{"bad rank in group",
                 R"("collectives": [{"id": "c", "op": "barrier", "size": "0 B", "group": [0, -1]}],
                    "tasks": [])",
                 "g.json: collectives[0].group[1]: must be in [0, 4194303], got -1"},
        BadGraph{"unknown key in a collective",
                 R"("collectives": [{"id": "c", "op": "barrier", "size": "0 B", "group": [0],
                                     "algorithim": "ring"}], "tasks": [])",
                 "g.json: collectives[0].algorithim: unknown key (did you mean \"algorithm\"?)"}),
    [](const testing::TestParamInfo<BadGraph>& param_info) {
      std::string name = param_info.param.what;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

// A task keeps its category in 16 bits, 0 meaning none: the 65,535th distinct one is an input
// error naming the task, not the builder's internal check (issue 26's audit).
TEST(GraphJsonTest, TooManyCategoriesIsAnError) {
  Json document = Document(R"("tasks": [])");
  for (int i = 0; i <= 65534; ++i) {
    document["tasks"].push_back({{"id", std::to_string(i)},
                                 {"rank", 0},
                                 {"duration", "1 us"},
                                 {"category", std::to_string(i) + "c"}});
  }
  const Expected<TaskGraph> graph = TaskGraphFromJson(document, "g.json");
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.error().ToString(),
            "g.json: tasks[65534].category: more than 65534 distinct task categories, got "
            "\"65534c\"");
  document["tasks"].erase(65534);
  EXPECT_TRUE(TaskGraphFromJson(document, "g.json").ok());
}

TEST(GraphJsonHeaderTest, RejectsOtherFormatsAndMajorVersions) {
  EXPECT_EQ(
      TaskGraphFromJson(Json::parse(R"({"format": "chrome", "version": "1.0", "tasks": []})"),
                        "g.json")
          .error()
          .ToString(),
      "g.json: format: not a task graph: expected format \"dtsim.task_graph\", got \"chrome\"");
  EXPECT_EQ(TaskGraphFromJson(Json::parse(R"({"format": "dtsim.task_graph", "version": "2.0",
                                               "tasks": []})"),
                              "g.json")
                .error()
                .ToString(),
            "g.json: version: unsupported version of dtsim.task_graph (this dtsim reads 1.x), got "
            "\"2.0\"");
  EXPECT_EQ(TaskGraphFromJson(Json::parse(R"({"format": "dtsim.task_graph", "version": "one",
                                               "tasks": []})"),
                              "g.json")
                .error()
                .ToString(),
            "g.json: version: expected a version \"MAJOR.MINOR\", got \"one\"");
  EXPECT_EQ(TaskGraphFromJson(Json::parse(R"({"version": "1.0", "tasks": []})"), "g.json")
                .error()
                .ToString(),
            "g.json: format: missing required field");
  EXPECT_EQ(TaskGraphFromJson(Json::parse("[]"), "g.json").error().ToString(),
            "g.json: expected a JSON object, got []");
  EXPECT_TRUE(TaskGraphFromJson(Json::parse(R"({"format": "dtsim.task_graph", "version": "1.7",
                                              "tasks": []})"),
                                "g.json")
                  .ok());
}

TEST(GraphJsonFileTest, SyntaxErrorsNameTheLine) {
  const Expected<TaskGraph> graph = LoadTaskGraph(DTSIM_TEST_DATA_DIR "/broken_graph.json");
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.error().ToString(), HasSubstr("broken_graph.json: line 4, column"));
}

}  // namespace
}  // namespace dtsim::graph
