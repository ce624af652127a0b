// The analytical model against published NCCL bus bandwidths
// (tests/data/network/published_busbw.json; docs/network.md, "Bus bandwidth against
// nccl-tests"), and the reader of that file.
#include "network/published_busbw.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "tests/testing/temp_dir.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using testing::HasSubstr;

const std::string kPublished = DTSIM_SOURCE_DIR "/tests/data/network/published_busbw.json";

TEST(PredictBusbwTest, RingOnOneDgxA100Node) {
  // 4 GiB over 8 GPUs, ring: 8.4 us collective latency + 14 · 2 us + 1.75 · 4294967296 B /
  // (300 GB/s · 0.775 = 2.325e11 B/s) = 32327710.8 -> 32327711 ns; t = 32364111 ns.
  // busbw = 4294967296 / t · 2 · 7/8 = 232.24 GB/s.
  const Expected<PredictedBusbw> predicted =
      PredictBusbw("dgx-a100", CommKind::kAllReduce, 8, int64_t{4} << 30);
  ASSERT_TRUE(predicted.ok()) << predicted.error().ToString();
  EXPECT_EQ(predicted->algorithm, "ring");
  EXPECT_EQ(predicted->time, Nanoseconds(32'364'111));
  EXPECT_NEAR(predicted->busbw, 4294967296.0 / 32364111e-9 * 1.75 / 1e9, 1e-9);
  EXPECT_NEAR(predicted->busbw, 232.24, 0.01);
}

// Every published point is priced. Points a preset's efficiency was fitted to stay within 2%;
// scored points (an algorithm dtsim models) from 1 GiB within 5%, and none outside the band
// the model reaches today, 0.7 to 2.5 times the published figure (docs/network.md lists
// every ratio; the low end is the DGX H100's 1 MiB all-reduce, 0.73, where NCCL runs a
// low-latency protocol dtsim does not model): a change that moves a prediction out of it
// fails here.
TEST(PublishedBusbwTest, ModelStaysWithinItsBandOnEveryPublishedPoint) {
  const Expected<std::vector<PublishedCurve>> curves = ReadPublishedCurves(kPublished);
  ASSERT_TRUE(curves.ok()) << curves.error().ToString();
  int scored = 0;
  for (const PublishedCurve& curve : *curves) {
    for (const PublishedPoint& point : curve.points) {
      const Expected<PredictedBusbw> predicted =
          PredictBusbw(curve.preset, curve.kind, curve.gpus, point.size, curve.algorithm);
      ASSERT_TRUE(predicted.ok()) << curve.id << ": " << predicted.error().ToString();
      const double ratio = predicted->busbw / point.busbw;
      const std::string where = curve.id + " at " + std::to_string(point.size) + " B";
      if (curve.fitted) {
        EXPECT_NEAR(ratio, 1.0, 0.02) << where;
        continue;
      }
      if (!curve.Scored(point)) continue;
      ++scored;
      // The two all-to-all curves are not measured: a maintainer's rule that an all-to-all
      // across nodes runs at one NIC's rate, taken as 48.5 GB/s on NDR (the ring's rate). The
      // measured all-to-all across ten H100 nodes ran 8% below it (44.7 GB/s a NIC,
      // ../shared/network/measured-collectives.json), as NCCL's 128 KiB point-to-point
      // messages keep 0.912 of the ring's rate (NetMessageEfficiency): 10% for them.
      const double band = curve.kind == graph::CommKind::kAllToAll ? 0.10 : 0.05;
      if (point.size >= (int64_t{1} << 30)) {
        EXPECT_NEAR(ratio, 1.0, band) << where;
      }
      EXPECT_GE(ratio, 0.7) << where;
      EXPECT_LE(ratio, 2.5) << where;
    }
  }
  EXPECT_GE(scored, 40);
}

// A directory per test: ctest runs this fixture's tests in parallel processes, which shared
// one file in the temporary directory and read each other's writes.
class PublishedFileTest : public testing_support::TempDirTest {
 protected:
  std::string Write(const std::string& text) {
    const std::string path = Path("published_busbw_test.json");
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  std::string ErrorOf(const std::string& text) {
    const Expected<std::vector<PublishedCurve>> curves = ReadPublishedCurves(Write(text));
    return curves.ok() ? "(loaded fine)" : curves.error().ToString();
  }
};

TEST_F(PublishedFileTest, BadInputNamesTheFileAndPath) {
  const std::string curve = R"("id": "x", "preset": "dgx-a100", "kind": "all_reduce", "gpus": 8,
                               "source": "s")";
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{)" + curve +
                      R"(, "points": [[1048576, 18.0]]}]})"),
              "(loaded fine)");
  EXPECT_THAT(ErrorOf(R"({"format": "other", "curves": []})"),
              HasSubstr("format: expected \"dtsim.published_busbw\", got \"other\""));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{)" + curve +
                      R"(, "points": [[1048576]]}]})"),
              HasSubstr("curves[0].points[0]: expected [size in bytes, busbw in GB/s]"));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{)" + curve +
                      R"(, "points": [[1048576, -3]]}]})"),
              HasSubstr("curves[0].points[0][1]: expected a positive bus bandwidth in GB/s"));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{"id": "x",
                         "preset": "dgx-a10", "kind": "all_reduce", "gpus": 8, "source": "s",
                         "points": [[1, 1]]}]})"),
              HasSubstr("curves[0].preset: unknown cluster preset"));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{"id": "x",
                         "preset": "dgx-a100", "kind": "broadcast", "gpus": 8, "source": "s",
                         "points": [[1, 1]]}]})"),
              HasSubstr("curves[0].kind: expected \"all_reduce\" or \"all_to_all\""));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{)" + curve +
                      R"(, "points": [[1, 1]], "gpu": 8}]})"),
              HasSubstr("curves[0].gpu: unknown key"));
  EXPECT_THAT(ErrorOf("{"), HasSubstr("published_busbw_test.json"));
  EXPECT_THAT(ErrorOf(R"({"format": "dtsim.published_busbw", "curves": [{)" + curve +
                      R"(, "algorithm": "rign", "points": [[1, 1]]}]})"),
              HasSubstr("curves[0].algorithm: unknown all_reduce algorithm"));
}

TEST_F(PublishedFileTest, ReadsWhatACurveSays) {
  const Expected<std::vector<PublishedCurve>> curves = ReadPublishedCurves(
      Write(R"({"format": "dtsim.published_busbw", "curves": [{"id": "x", "preset": "dgx-h100",
               "kind": "all_reduce", "gpus": 8, "source": "s", "algorithm": "ring",
               "modeled_up_to": 1048576, "points": [[1048576, 40], [2097152, 60]]}]})"));
  ASSERT_TRUE(curves.ok()) << curves.error().ToString();
  const PublishedCurve& curve = curves->front();
  EXPECT_EQ(curve.algorithm, "ring");
  EXPECT_FALSE(curve.fitted);
  EXPECT_TRUE(curve.Scored(curve.points[0]));   // ran an algorithm dtsim models
  EXPECT_FALSE(curve.Scored(curve.points[1]));  // above modeled_up_to: listed, not scored
  EXPECT_EQ(PredictBusbw("dgx-h100", CommKind::kAllReduce, 8, 1 << 20, curve.algorithm)->algorithm,
            "ring");
  EXPECT_EQ(PredictBusbw("dgx-h100", CommKind::kAllReduce, 8, 1 << 20)->algorithm, "nvls");
}

}  // namespace
}  // namespace dtsim::network
