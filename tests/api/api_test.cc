// tools/api: a config given as a document runs as the same config read from its file; the
// overrides apply in order; the calls' own arguments are checked and named; a sweep and a search
// through the API are what the commands print and write (tests/cli covers those).
#include "tools/api/api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/base/json_reader.h"
#include "tools/results/provenance.h"

namespace dtsim::api {
namespace {

using testing::HasSubstr;

const std::string kSmall = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";

Json Document(const std::string& path) {
  Expected<Json> json = ReadJsonFile(path);
  EXPECT_TRUE(json.ok());
  return json.ok() ? *json : Json();
}

TEST(ApiTest, DocumentSimulatesAsItsFile) {
  results::ResetProvenance("simulate", {});
  const Expected<OrderedJson> from_file = SimulateJson({.path = kSmall});
  ASSERT_TRUE(from_file.ok()) << from_file.error().ToString();
  const Expected<OrderedJson> from_document = SimulateJson({.document = Document(kSmall)});
  ASSERT_TRUE(from_document.ok()) << from_document.error().ToString();
  EXPECT_EQ((*from_file)["iteration_time_ns"], (*from_document)["iteration_time_ns"]);
  EXPECT_EQ((*from_file)["stages"], (*from_document)["stages"]);
  EXPECT_EQ((*from_document)["provenance"]["command"], "simulate");
}

TEST(ApiTest, OverridesApplyInOrder) {
  const ConfigInput input{.path = kSmall,
                          .overrides = {"parallelism.pipeline.size=4", "parallelism.data=1"}};
  const Expected<Json> json = ReadConfigInput(input);
  ASSERT_TRUE(json.ok()) << json.error().ToString();
  EXPECT_EQ((*json)["parallelism"]["pipeline"]["size"], 4);
  EXPECT_EQ((*json)["parallelism"]["data"], 1);
  // 1 × TP 4 × PP 4: two stages more than the file's plan.
  const Expected<OrderedJson> result = SimulateJson(input);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ((*result)["stages"].size(), 4U);
}

TEST(ApiTest, DocumentErrorsNameThePathAndNoFile) {
  Json config = Document(kSmall);
  config["parallelism"]["tensor"]["size"] = 3;
  const Expected<OrderedJson> result = SimulateJson({.document = config});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().location(), "parallelism.tensor");
  EXPECT_EQ(result.error().value(), "3");
  EXPECT_EQ(result.error().file(), "");
  const Expected<OrderedJson> from_file =
      SimulateJson({.path = kSmall, .overrides = {"parallelism.tensor.size=3"}});
  ASSERT_FALSE(from_file.ok());
  EXPECT_EQ(from_file.error().file(), kSmall);
}

TEST(ApiTest, SweepChecksItsAxes) {
  const ConfigInput input{.path = kSmall};
  Expected<results::SweepDocument> sweep = RunSweep(input, {}, 1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.error().ToString(), HasSubstr("at least one key to vary"));
  sweep = RunSweep(input, {{.key = "parallelism.data", .values = {}}}, 1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.error().ToString(), HasSubstr("no values to vary it over"));
  sweep = RunSweep(
      input,
      {{.key = "parallelism.data", .values = {"1"}}, {.key = "parallelism.data", .values = {"2"}}},
      1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.error().ToString(), HasSubstr("key varied twice"));
  // What would make the points other than asked: a value twice (1 and 1.0 are one number), a
  // key whose values replace an earlier axis's or a --set's at every point.
  sweep = RunSweep(input, {{.key = "training.micro_batch", .values = {"1", "2", "1.0"}}}, 1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_EQ(sweep.error().ToString(),
            "training.micro_batch: a value listed twice (two identical points), got 1.0");
  sweep = RunSweep(input,
                   {{.key = "cluster.nodes", .values = {"1", "2"}},
                    {.key = "cluster", .values = {"\"dgx-a100\""}}},
                   1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.error().ToString(),
              HasSubstr("cluster: its values would replace the varied cluster.nodes"));
  sweep = RunSweep({.path = kSmall, .overrides = {"training.micro_batch=4"}},
                   {{.key = "training", .values = {"{}"}}}, 1);
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.error().ToString(),
              HasSubstr("training: varied and set (--set training.micro_batch=4)"));
  // Varying inside what a --set gives, or after a parent's axis, is well defined.
  sweep = RunSweep({.path = kSmall, .overrides = {"parallelism.tensor.size=4"}},
                   {{.key = "parallelism.tensor.mode", .values = {"\"1d\""}}}, 1);
  EXPECT_TRUE(sweep.ok()) << sweep.error().ToString();
  // Two points, the second failing: TP 3 does not divide the heads.
  sweep = RunSweep(input, {{.key = "parallelism.tensor.size", .values = {"4", "3"}}}, 2);
  ASSERT_TRUE(sweep.ok()) << sweep.error().ToString();
  ASSERT_EQ(sweep->points.size(), 2U);
  EXPECT_TRUE(sweep->points[0].result.has_value());
  EXPECT_FALSE(sweep->points[1].result.has_value());
  EXPECT_THAT(sweep->points[1].error, HasSubstr("parallelism.tensor"));
}

TEST(ApiTest, SearchChecksItsCall) {
  const ConfigInput input{.path = kSmall};
  const auto error_at = [&input](const SearchCall& call) {
    const Expected<results::SearchFile> file = RunSearch(input, call);
    return file.ok() ? std::string("ok") : file.error().location();
  };
  EXPECT_EQ(error_at({.gpus = 16, .top = 0}), "top");
  EXPECT_EQ(error_at({.gpus = 16, .rerank = -1}), "rerank");
  EXPECT_EQ(error_at({.gpus = 16, .threads = -2}), "threads");
  EXPECT_EQ(error_at({.gpus = -16}), "gpus");
  EXPECT_EQ(error_at({.gpus = 16, .ranks = "all"}), "ranks");
  EXPECT_EQ(error_at({.gpus = 16, .shard = 3, .shards = 2}), "shard");
  EXPECT_EQ(error_at({}), "cluster.nodes");  // the example leaves the cluster's size to its plan
}

TEST(ApiTest, SearchFileJsonHoldsEveryPlan) {
  results::ResetProvenance("search", {});
  const Expected<results::SearchFile> file =
      RunSearch({.path = kSmall}, {.gpus = 16, .top = 3, .rerank = 1, .threads = 2});
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  const OrderedJson json = results::SearchFileJson(*file);
  EXPECT_EQ(json["format"], "dtsim.search");
  EXPECT_EQ(json["plans"].size(), file->result.plans.size());
  EXPECT_EQ(json["plans"][0].size(), json["columns"].size());
  ASSERT_FALSE(json["ranking"].empty());
  EXPECT_EQ(json["settings"]["top"], 3);
  // The document reads back as the search it came from.
  const Expected<results::SearchFile> read =
      results::SearchFileFromJson(Json::parse(DumpJson(json)), "search.json");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->result.ranking, file->result.ranking);
}

}  // namespace
}  // namespace dtsim::api
