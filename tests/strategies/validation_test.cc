// The accuracy report over ../shared/validation/published-points.json: every point simulated,
// the error per point printed (the figures docs/validation.md quotes). The bound checked is a
// sanity bound — a model this far off is broken — not a tuned target.
#include "strategies/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace dtsim::strategies {
namespace {

TEST(ValidationTest, EveryPublishedPoint) {
  const std::string path = std::string(DTSIM_SHARED_DIR) + "/validation/published-points.json";
  Expected<Json> points = ReadJsonFile(path);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  Expected<ValidationReport> report = Validate(*points, path);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->rows.size(), (*points)["points"].size());
  for (const UnsimulatedPoint& point : report->unsimulated) ADD_FAILURE() << point.reason;
  for (const ValidationRow& row : report->rows) {
    std::printf("%-58s %-24s %9.2f %9.2f %+7.1f%%\n", row.id.c_str(), row.metric.c_str(),
                row.measured, row.predicted, 100 * row.Error());
    EXPECT_LT(std::abs(row.Error()), 0.5) << row.id;
  }
  std::printf("MAPE over %zu points: %.1f%%\n", report->rows.size(),
              report->mean_absolute_percentage_error);
}

TEST(ValidationTest, APointThatCannotBeSimulatedIsListedWithTheReason) {
  const Json points = Json::parse(R"({"points": [{"id": "x", "category": "vision"}]})");
  Expected<ValidationReport> report = Validate(points, "p.json");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(report->rows.empty());
  ASSERT_EQ(report->unsimulated.size(), 1u);
  EXPECT_EQ(report->unsimulated[0].id, "x");
  EXPECT_EQ(report->unsimulated[0].category, "vision");
  EXPECT_EQ(report->unsimulated[0].reason.substr(0, 50),
            "p.json: points[0].metrics: no absolute measured me");
  // Fields of the wrong type are reasons, never a crash.
  const Json odd = Json::parse(R"({"points": [7, {"id": 3, "category": 5, "model": [],
    "parallel": {"fsdp": "yes"}, "metrics": [{"name": 3, "unit": 7, "value": 1,
    "kind": "measured"}, "x"]}, {"category": "megatron_weak_scaling", "model": 1}]})");
  report = Validate(odd, "p.json");
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(report->rows.empty());
  ASSERT_EQ(report->unsimulated.size(), 3u);
  EXPECT_EQ(report->unsimulated[1].id, "points[1]");
  // A file that is not a measurements file is an error.
  EXPECT_FALSE(Validate(Json::parse(R"({"rows": []})"), "p.json").ok());
}

}  // namespace
}  // namespace dtsim::strategies
