// The shared measured NCCL collectives (../shared/network/measured-collectives.json) read, and
// the analytical model's time for them: the reader's conventions and where the model stands.
#include "network/measured_collectives.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/testing/temp_dir.h"

namespace dtsim::network {
namespace {

using testing::HasSubstr;

const std::string kShared = DTSIM_SHARED_DIR "/network/measured-collectives.json";

class MeasuredCollectivesTest : public testing_support::TempDirTest {};

TEST_F(MeasuredCollectivesTest, ReadsEveryMeasuredRecordOfTheSharedFile) {
  const Expected<MeasuredCollectives> measured = ReadMeasuredCollectives(kShared);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  EXPECT_EQ(measured->points.size(), 272u);
  EXPECT_EQ(measured->other_records, 33);  // vendor summaries and NCCL's model parameters
  std::map<graph::CommKind, int> kinds;
  for (const MeasuredCollective& point : measured->points) {
    EXPECT_FALSE(point.preset.empty()) << point.system;
    ++kinds[point.kind];
  }
  EXPECT_EQ(kinds[graph::CommKind::kAllReduce], 112);
  EXPECT_EQ(kinds[graph::CommKind::kSendRecv], 40);
}

// Across ten H100 nodes (one or two GPUs each, one NIC per GPU used) the ring and tree collectives
// are within 7% of NCCL at every size; send/recv and all-to-all, NCCL's point-to-point traffic in
// 128 KiB network messages (2 channels × 14 GB/s × 0.97 × 0.912 = 24.8 GB/s a send, 44.2 GB/s a
// NIC for the all-to-all, nccl_p2p.h), within 3%. The send/recv on one GPU a node is the curve
// the message cost was fitted on; the all-to-all and both on two GPUs a node check it. Before
// the message cost both were 7–15% faster than measured; before NCCL's channels one send filled
// the NIC, twice as fast.
TEST_F(MeasuredCollectivesTest, TheModelAgainstTenH100Nodes) {
  const Expected<MeasuredCollectives> measured = ReadMeasuredCollectives(kShared);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  int scored = 0;
  for (const MeasuredCollective& point : measured->points) {
    if (point.nodes != 10) continue;
    const Expected<PredictedCollective> predicted = PredictMeasuredCollective(point);
    ASSERT_TRUE(predicted.ok()) << point.id << ": " << predicted.error().ToString();
    const double ratio =
        static_cast<double>(predicted->time.ns()) / static_cast<double>(point.time.ns());
    if (point.kind == graph::CommKind::kAllReduce || point.kind == graph::CommKind::kAllGather ||
        point.kind == graph::CommKind::kReduceScatter) {
      EXPECT_NEAR(ratio, 1.0, 0.07) << point.id << " (" << predicted->algorithm << ")";
    } else if (point.kind == graph::CommKind::kSendRecv) {
      EXPECT_NEAR(ratio, 1.0, 0.03) << point.id;
    } else if (point.kind == graph::CommKind::kAllToAll && point.size >= int64_t{64} << 20) {
      EXPECT_NEAR(ratio, 1.0, 0.03) << point.id;
    }
    ++scored;
  }
  EXPECT_EQ(scored, 100);
}

// Send/recv on one H100 node follows NCCL's channel doubling (nccl_p2p.h): 4 channels of
// 20.55 GB/s for 32 and 64 MiB among 8 GPUs, 8 for 128 MiB, 16 for 256 MiB, NVLink beyond —
// every point within 10%, where one NVLink-rate send was 2–4× too fast below 256 MiB.
TEST_F(MeasuredCollectivesTest, SendRecvOnOneNodeFollowsNcclChannels) {
  const Expected<MeasuredCollectives> measured = ReadMeasuredCollectives(kShared);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  int scored = 0;
  for (const MeasuredCollective& point : measured->points) {
    if (point.nodes != 1 || point.kind != graph::CommKind::kSendRecv) continue;
    const Expected<PredictedCollective> predicted = PredictMeasuredCollective(point);
    ASSERT_TRUE(predicted.ok()) << point.id << ": " << predicted.error().ToString();
    const double ratio =
        static_cast<double>(predicted->time.ns()) / static_cast<double>(point.time.ns());
    EXPECT_NEAR(ratio, 1.0, 0.1) << point.id;
    ++scored;
  }
  EXPECT_EQ(scored, 20);
}

// NVLS on one node, with NCCL's chunks (NvlsChunk, NvlsRate): from 32 MiB every point of the
// three H100/H200 curves where dtsim runs NVLS is within 10% of the measured time (the chunk
// overhead was fitted on the HGX H100 curve; the Azure H100 and H200 curves check it), where
// without the chunks 32–512 MiB were 0.77–0.94.
TEST_F(MeasuredCollectivesTest, NvlsFollowsNcclChunks) {
  const Expected<MeasuredCollectives> measured = ReadMeasuredCollectives(kShared);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  int scored = 0;
  for (const MeasuredCollective& point : measured->points) {
    if (point.nodes != 1 || point.kind != graph::CommKind::kAllReduce ||
        point.size < (int64_t{32} << 20)) {
      continue;
    }
    const Expected<PredictedCollective> predicted = PredictMeasuredCollective(point);
    ASSERT_TRUE(predicted.ok()) << point.id << ": " << predicted.error().ToString();
    if (predicted->algorithm != "nvls") continue;
    const double ratio =
        static_cast<double>(predicted->time.ns()) / static_cast<double>(point.time.ns());
    EXPECT_NEAR(ratio, 1.0, 0.1) << point.id;
    ++scored;
  }
  EXPECT_EQ(scored, 32);  // 10 + 2 × 9 on 8 GPUs (32 MiB–16 GiB, 32 MiB–8 GiB); 4 on 4 GPUs
}

// A record published as bus bandwidth only gets its time from the algorithm bandwidth:
// 1 MiB at 2.5 GB/s is 419.43 µs. Bad records are errors naming the record and field.
TEST_F(MeasuredCollectivesTest, ConventionsAndErrors) {
  std::ofstream(Path("m.json")) << R"([
    {"id": "a", "kind": "measured", "system": "8x H200", "gpus": 8, "nodes": 1,
     "collective": "all_reduce", "size_bytes": 1048576, "time_us": null, "algbw_GBps": 2.5},
    {"id": "b", "kind": "model_parameter", "name": "baseLat"}])";
  const Expected<MeasuredCollectives> read = ReadMeasuredCollectives(Path("m.json"));
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  ASSERT_EQ(read->points.size(), 1u);
  EXPECT_EQ(read->points[0].preset, "dgx-h200");
  EXPECT_EQ(read->points[0].time, DurationNs(419430));
  EXPECT_EQ(read->other_records, 1);
  std::ofstream(Path("bad.json")) << R"([{"id": "a", "kind": "measured", "system": "x",
     "gpus": 8, "nodes": 1, "collective": "gather", "size_bytes": 1, "time_us": 1}])";
  EXPECT_THAT(ReadMeasuredCollectives(Path("bad.json")).error().ToString(),
              HasSubstr("bad.json: [0].collective: expected all_reduce"));
  MeasuredCollective unknown = read->points[0];
  unknown.preset.clear();
  EXPECT_THAT(PredictMeasuredCollective(unknown).error().ToString(),
              HasSubstr("no cluster preset stands for the system"));
}

const std::string kVtrain = DTSIM_SHARED_DIR "/network/vtrain-allreduce";

// vTrain's curves on 2–8 GPUs of a V100 node (a DGX-1 hybrid cube-mesh): from 64 MiB, where
// bandwidth rules, the rings the first n GPUs' NVLinks hold (1, 2, 4, 2, 2, 4, 6 for n = 2…8)
// at 22.25 GB/s a link price them within 5% — except on 5 GPUs, whose two rings pass through
// GPU 0 to reach GPU 4 (NCCL's PATH_NVB) and reach only 1.65 links' worth (dtsim 17%
// optimistic: a relay's cost is not modelled). As a switch of 150 GB/s, as dtsim priced every
// subset before, the 2-GPU curve was 6.7 times too fast at 1 GiB.
TEST(VtrainCurvesTest, TheDgx1MeshAgainstVtrainsV100Curves) {
  const Expected<MeasuredCollectives> curves = ReadVtrainAllReduce(kVtrain);
  ASSERT_TRUE(curves.ok()) << curves.error().ToString();
  EXPECT_EQ(curves->points.size(), 154u);  // 2 systems × 7 GPU counts × 11 sizes, 1 MiB–1 GiB
  int scored = 0;
  for (const MeasuredCollective& point : curves->points) {
    if (point.preset != "dgx1-v100" || point.size < (int64_t{64} << 20)) continue;
    const Expected<PredictedCollective> predicted = PredictMeasuredCollective(point);
    ASSERT_TRUE(predicted.ok()) << point.id << ": " << predicted.error().ToString();
    const double ratio =
        static_cast<double>(predicted->time.ns()) / static_cast<double>(point.time.ns());
    if (point.gpus == 5) {
      EXPECT_NEAR(ratio, 0.83, 0.02) << point.id;
    } else {
      EXPECT_NEAR(ratio, 1.0, 0.05) << point.id;
    }
    ++scored;
  }
  EXPECT_EQ(scored, 35);  // 7 GPU counts × 64 MiB–1 GiB
}

// The reader takes every power-of-two size of each file and names the file and line of a bad
// row.
TEST_F(MeasuredCollectivesTest, VtrainFilesAndTheirErrors) {
  for (const char* system : {"a100", "v100"}) {
    std::filesystem::create_directories(Path(system));
    for (int gpus = 2; gpus <= 8; ++gpus) {
      std::ofstream(Path(fmt::format("{}/all_reduce_{}gpu.csv", system, gpus)))
          << "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"
          << "1048576,262144,float,70140,14.95,69870,15.01\n"
          << "2097152,524288,float,116000,18.08,114500,18.32\n"
          << "3145728,786432,float,162400,19.37,160700,19.57\n";
    }
  }
  const Expected<MeasuredCollectives> read = ReadVtrainAllReduce(Path(""));
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  ASSERT_EQ(read->points.size(), 28u);  // 1 and 2 MiB of 14 files; 3 MiB is not sampled
  EXPECT_EQ(read->points[0].preset, "dgx-a100");
  EXPECT_EQ(read->points[0].node_gpus, 8);
  EXPECT_EQ(read->points[0].time, DurationNs(70140));
  std::ofstream(Path("v100/all_reduce_3gpu.csv"))
      << "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"
      << "1048576,262144,float,7x,14.95,69870,15.01\n";
  EXPECT_THAT(ReadVtrainAllReduce(Path("")).error().ToString(),
              HasSubstr("all_reduce_3gpu.csv: line 2: expected a size in bytes and a time in ns"));
  std::ofstream(Path("v100/all_reduce_3gpu.csv")) << "bytes,time\n";
  EXPECT_THAT(ReadVtrainAllReduce(Path("")).error().ToString(),
              HasSubstr("all_reduce_3gpu.csv: expected the header"));
  std::filesystem::remove(Path("v100/all_reduce_3gpu.csv"));
  EXPECT_THAT(ReadVtrainAllReduce(Path("")).error().ToString(),
              HasSubstr("all_reduce_3gpu.csv: cannot open the file"));
}

}  // namespace
}  // namespace dtsim::network
