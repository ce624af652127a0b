// The pipeline schedules' registry: each schedule's pass order on small cases written out by
// hand, every order runs each chunk pass once forward then once backward, and the memory
// model's micro-batches in flight equal the peak of live activations along the order it
// describes — the two consumers of one entry cannot drift.
#include "models/pipeline_schedules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace dtsim::models {
namespace {

// "F0 F1 B0 …" with ".c" after the micro-batch when the chunk is not 0.
std::string Order(const std::vector<PipelineStep>& steps) {
  std::string out;
  for (const PipelineStep& step : steps) {
    if (!out.empty()) out += ' ';
    out += step.pass == Pass::kForward ? 'F' : 'B';
    out += std::to_string(step.microbatch);
    if (step.chunk != 0) {
      out += '.';  // not "." + to_string(...): GCC 12 -O2 warns (-Wrestrict) on that, wrongly
      out += std::to_string(step.chunk);
    }
  }
  return out;
}

TEST(PipelineSchedulesTest, OrdersOfSmallCases) {
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kGpipe, 4, 0, 3)), "F0 F1 F2 B0 B1 B2");
  // 1F1B, p = 4, m = 6: stage 0 warms up with p − 0 − 1 = 3 forwards, stage 3 with none.
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kOneForwardOneBackward, 4, 0, 6)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kOneForwardOneBackward, 4, 3, 6)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Interleaved, p = 2, v = 2, m = 4, stage 1: warm-up 2·0 + 1·2 = 2 chunk forwards; groups of
  // p = 2 micro-batches per chunk, forward chunks 0,1,0,1…, backward chunks 1,0,1,0…
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kInterleaved, 2, 1, 4, 2)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  // m = p warms up like any m (Megatron-Core): stage 1 of 2, v = 2, 2 warm-up forwards; stage
  // 0's 2·1 + 2 = 4 are all its forwards.
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kInterleaved, 2, 1, 2, 2)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1");
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kInterleaved, 2, 0, 2, 2)),
            "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
  // Megatron-Core's all-to-all overlap warms up one chunk forward more (2 + 1 = 3 on stage 1),
  // so that each steady forward runs beside the backward of an earlier micro-batch: F1.1 with
  // B0.1, F2 with B1.1, …
  EXPECT_EQ(Order(StageSchedule(PipelineSchedule::kInterleaved, 2, 1, 4, 2, 1)),
            "F0 F1 F0.1 F1.1 B0.1 F2 B1.1 F3 B0 F2.1 B1 F3.1 B2.1 B3.1 B2 B3");
  // Without a pipeline (1F1B on one stage): F0, then F(i + 1) beside B(i), then B(m − 1).
  const std::vector<PipelineStep> one_stage =
      StageSchedule(PipelineSchedule::kOneForwardOneBackward, 1, 0, 3, 1, 1);
  EXPECT_EQ(Order(one_stage), "F0 F1 B0 F2 B1 B2");
  const auto beside = [](const std::vector<PipelineStep>& steps) {
    std::string out;
    for (const PipelineStep& step : steps) out += step.beside_next ? "1" : "0";
    return out;
  };
  EXPECT_EQ(beside(one_stage), "010100");
  // When the extra forward leaves no steady state (stage 0 of 2, m = 2: both forwards warm
  // up), no forward runs beside a backward.
  EXPECT_EQ(beside(StageSchedule(PipelineSchedule::kOneForwardOneBackward, 2, 0, 2, 1, 1)), "0000");
  EXPECT_EQ(beside(StageSchedule(PipelineSchedule::kOneForwardOneBackward, 1, 0, 3)), "000000");
}

// The peak, along `steps`, of chunk passes run forward whose backward has not run yet. A
// forward that runs beside the backward after it (beside_next) changes nothing with it.
int64_t PeakLive(const std::vector<PipelineStep>& steps) {
  int64_t live = 0;
  int64_t peak = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].beside_next) {
      EXPECT_TRUE(i + 1 < steps.size() && steps[i + 1].pass == Pass::kBackward);
      ++i;
      continue;
    }
    live += steps[i].pass == Pass::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(PipelineSchedulesTest, EveryChunkPassRunsOnceForwardThenBackward) {
  for (const PipelineScheduleEntry& entry : PipelineSchedules()) {
    for (int stages : {2, 4, 8}) {
      for (int64_t m : {int64_t{8}, int64_t{16}, int64_t{24}}) {
        for (int chunks : entry.virtual_stages ? std::vector<int>{2, 3} : std::vector<int>{1}) {
          for (int stage = 0; stage < stages * 2; ++stage) {
            // Stages 0 … p − 1, then again with one extra warm-up forward (the all-to-all
            // overlap's).
            const int extra = stage / stages;
            std::map<std::pair<int64_t, int>, int> state;  // 1 after forward, 2 after backward
            const std::vector<PipelineStep> steps =
                entry.steps(stages, stage % stages, m, chunks, extra);
            ASSERT_EQ(steps.size(), static_cast<size_t>(2 * m * chunks)) << entry.name;
            for (const PipelineStep& step : steps) {
              int& s = state[{step.microbatch, step.chunk}];
              EXPECT_EQ(s, step.pass == Pass::kForward ? 0 : 1)
                  << entry.name << " p=" << stages << " s=" << stage << " m=" << m
                  << " mb=" << step.microbatch << " chunk=" << step.chunk;
              ++s;
            }
            EXPECT_EQ(state.size(), static_cast<size_t>(m * chunks)) << entry.name;
          }
        }
      }
    }
  }
}

TEST(PipelineSchedulesTest, InFlightIsThePeakOfTheOrder) {
  // The memory model charges in_flight stage activations; a chunk is 1/v of a stage, so the
  // order's peak of live chunk passes over v must equal it.
  for (const PipelineScheduleEntry& entry : PipelineSchedules()) {
    for (int stages : {2, 4, 8}) {
      for (int64_t m : {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{8}, int64_t{16}, int64_t{24}}) {
        for (int chunks : entry.virtual_stages ? std::vector<int>{2, 3} : std::vector<int>{1}) {
          if (entry.virtual_stages && m % stages != 0) continue;
          for (int extra : {0, 1}) {
            // With one extra warm-up forward each steady forward runs beside the backward after
            // it (Megatron-Core's all-to-all overlap): the pair adds and frees one chunk pass
            // together, and the peak is as without the extra forward.
            for (int stage = 0; stage < stages; ++stage) {
              const double peak =
                  static_cast<double>(PeakLive(entry.steps(stages, stage, m, chunks, extra))) /
                  chunks;
              EXPECT_DOUBLE_EQ(entry.in_flight(stages, stage, m, chunks), peak)
                  << entry.name << " p=" << stages << " s=" << stage << " m=" << m
                  << " v=" << chunks << " extra=" << extra;
            }
          }
        }
      }
    }
  }
}

TEST(PipelineSchedulesTest, RegistryByNameAndByEnum) {
  ASSERT_EQ(PipelineScheduleNames().size(), 3U);
  for (const PipelineScheduleEntry& entry : PipelineSchedules()) {
    EXPECT_EQ(&PipelineScheduleOf(entry.schedule), &entry);
    Expected<const PipelineScheduleEntry*> found = FindPipelineSchedule(entry.name);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, &entry);
  }
  Expected<const PipelineScheduleEntry*> typo = FindPipelineSchedule("1f1f");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().message().find("did you mean \"1f1b\""), std::string::npos)
      << typo.error().ToString();
}

}  // namespace
}  // namespace dtsim::models
