// The eager PyTorch loop replayed through the caching allocator (models/eager_allocations.h)
// against dtsim's own H200 runs of that loop (tests/data/measured/h200_gpt2_memory.json:
// tools/gpu_checks/gpt2_step.py, GPT-2 355M/774M/1.5B under four checkpointing policies), the
// peaks PyTorch reported after two warm-up steps over three timed ones. Prints every run; the
// bound is a sanity bound (the replay does not fit anything to these runs).
#include "models/eager_allocations.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "sim/base/json_reader.h"

namespace dtsim::models {
namespace {

using testing::HasSubstr;

constexpr double kGiB = 1 << 30;

EagerRun RunOf(const Json& run) {
  EagerRun out{.micro_batch = run["batch"].get<int64_t>(),
               .seq_len = run["seq"].get<int64_t>(),
               .warmup_steps = run["warmup"].get<int>(),
               .steps = run["steps"].get<int>()};
  const std::string policy = run["recompute"].get<std::string>();
  if (policy == "full") out.recompute = Recompute::kFull;
  if (policy == "every-2nd") {
    out.recompute = Recompute::kFull;
    out.recompute_every = 2;
  }
  if (policy == "op") out.recompute = Recompute::kSelectiveOp;
  if (run.contains("accumulate")) out.micro_batches = run["accumulate"].get<int>();
  if (run.contains("alloc_conf")) {
    out.expandable_segments = run["alloc_conf"].get<std::string>() == "expandable_segments:True";
  }
  if (run.contains("mode") && run["mode"].get<std::string>() == "ddp") out.ddp = true;
  if (run.contains("mode") && run["mode"].get<std::string>() == "fsdp2") {
    // llama_step.py's FSDP2 runs are one rank's, or rank 0 of a fake process group's.
    out.fsdp_ranks = run.contains("fake_world") ? run["fake_world"].get<int>() : 1;
    out.reshard_after_forward = run["reshard"].get<std::string>() == "default";
    out.clip_grad_norm = run["clip_norm"].get<double>() > 0;
    if (run.contains("cp")) out.context_ranks = run["cp"].get<int>();
  }
  return out;
}

// The model of a measured run: a GPT-2 preset, or llama_step.py's Llama-style decoder at the
// size the run names.
Expected<TransformerSpec> ModelOf(const Json& run) {
  const std::string name = run["model"].get<std::string>();
  if (name.starts_with("gpt2-")) {
    DTSIM_ASSIGN_OR_RETURN(const ModelSpec preset, ModelPreset(name));
    return preset.transformer;
  }
  // Llama 3's preset (RMSNorm, SwiGLU, rotary, no biases, untied output) at the run's size.
  DTSIM_ASSIGN_OR_RETURN(ModelSpec llama, ModelPreset("llama3-8b"));
  TransformerSpec& spec = llama.transformer;
  spec.layers = run["layers"].get<int>();
  spec.hidden = run["width"].get<int64_t>();
  spec.heads = run["heads"].get<int>();
  spec.kv_heads = run["kv_heads"].get<int>();
  spec.ffn_hidden = run["ffn"].get<int64_t>();
  spec.vocab = run["vocab"].get<int64_t>();
  spec.max_seq = run["seq"].get<int64_t>();
  return spec;
}

// Replays the runs of a measured-runs file in `mode` (eager or fsdp2), prints each against its
// measured peaks and returns the worst relative errors of allocated and reserved.
struct Worst {
  double allocated = 0;
  double reserved = 0;
  int runs = 0;
};
Worst CompareWithMeasured(const std::string& file_name, const std::string& mode = "eager") {
  const Expected<Json> file =
      ReadJsonFile(std::string(DTSIM_TEST_DATA_DIR) + "/measured/" + file_name);
  EXPECT_TRUE(file.ok()) << file.error().ToString();
  if (!file.ok()) return {};
  std::printf("%-34s %22s %22s %18s\n", "run", "allocated GiB (err)", "reserved GiB (err)",
              "reserve GiB");
  Worst worst;
  for (const Json& run : (*file)["runs"]) {
    if (run.contains("mode") ? run["mode"].get<std::string>() != mode : mode != "eager") continue;
    const std::string name = run.contains("name") ? run["name"].get<std::string>()
                                                  : run["model"].get<std::string>() + " " +
                                                        run["recompute"].get<std::string>();
    const Expected<TransformerSpec> model = ModelOf(run);
    EXPECT_TRUE(model.ok()) << name << ": " << model.error().ToString();
    if (!model.ok()) continue;
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(*model, RunOf(run));
    EXPECT_TRUE(peaks.ok()) << name << ": " << peaks.error().ToString();
    if (!peaks.ok()) continue;
    const auto measured_allocated = run["peak_allocated_bytes"].get<double>();
    const auto measured_reserved = run["peak_reserved_bytes"].get<double>();
    const double allocated_error = static_cast<double>(peaks->allocated) / measured_allocated - 1;
    const double reserved_error = static_cast<double>(peaks->reserved) / measured_reserved - 1;
    std::printf("%-34s %6.2f / %6.2f %+5.1f%% %6.2f / %6.2f %+5.1f%% %6.2f / %6.2f\n", name.c_str(),
                static_cast<double>(peaks->allocated) / kGiB, measured_allocated / kGiB,
                100 * allocated_error, static_cast<double>(peaks->reserved) / kGiB,
                measured_reserved / kGiB, 100 * reserved_error,
                static_cast<double>(peaks->reserved - peaks->allocated) / kGiB,
                (measured_reserved - measured_allocated) / kGiB);
    worst.allocated = std::max(worst.allocated, std::abs(allocated_error));
    worst.reserved = std::max(worst.reserved, std::abs(reserved_error));
    // Reserved is never below allocated, and the replay gives back every tensor it made.
    EXPECT_GE(peaks->reserved, peaks->allocated);
    ++worst.runs;
  }
  return worst;
}

TEST(EagerAllocationsTest, PeaksMatchTheMeasuredH200Runs) {
  const Worst worst = CompareWithMeasured("h200_gpt2_memory.json");
  EXPECT_EQ(worst.runs, 9);
  EXPECT_LT(worst.allocated, 0.06);
  EXPECT_LT(worst.reserved, 0.06);
}

TEST(EagerAllocationsTest, PeaksMatchTheRecordedH200Runs) {
  // tests/data/measured/h200_allocator_runs.json: Llama-style blocks (1.5B and 0.2B; none,
  // full, every-2nd and selective_op recompute) and GPT-2 355M, with the default allocator and
  // with expandable segments — the runs the Llama-style replay was written from — and four it
  // was checked on afterwards: one head per key-value head (no repeat_kv copies) and four of
  // Llama 3.1 8B's layers (heads of 128, 8,192 tokens); and three steps of 2 and 4 accumulated
  // micro-batches.
  const Worst worst = CompareWithMeasured("h200_allocator_runs.json");
  EXPECT_EQ(worst.runs, 19);  // 15 Llama-style, 4 GPT-2
  // A sanity bound: nothing is fitted to these runs (all were within 1.4% when written).
  EXPECT_LT(worst.allocated, 0.03);
  EXPECT_LT(worst.reserved, 0.03);
}

TEST(EagerAllocationsTest, Fsdp2PeaksMatchTheRecordedH200Runs) {
  // The five FSDP2 runs of h200_allocator_runs.json: Llama 3.2 1B's shape on one rank
  // (fully_shard per block and the root, bf16 parameters, fp32 reduction, clipping), no, full
  // and op checkpointing, blocks resharded after forward or not, with either allocator setting.
  const Worst worst = CompareWithMeasured("h200_allocator_runs.json", "fsdp2");
  EXPECT_EQ(worst.runs, 5);
  EXPECT_LT(worst.allocated, 0.03);
  EXPECT_LT(worst.reserved, 0.03);
}

// The allocations of 1 MiB and more of a run's last step, as the allocator's own record of it
// (tools/gpu_checks/memory_history.py) lists them: the bytes asked for, in order.
std::vector<int64_t> RecordedLastStep(const std::string& name) {
  const Expected<Json> record = ReadJsonFile(std::string(DTSIM_TEST_DATA_DIR) +
                                             "/measured/allocator_history/" + name + ".json.gz");
  EXPECT_TRUE(record.ok()) << record.error().ToString();
  if (!record.ok()) return {};
  const Json& events = (*record)["events"];
  std::vector<int64_t> sizes;
  for (size_t i = (*record)["steps"].back().get<size_t>(); i < events.size(); ++i) {
    const Json& event = events[i];  // [action, address, size, stream]
    const auto size = event[2].get<int64_t>();
    if (event[0].get<std::string>() == "alloc" && size >= kAllocatorSmallSize) {
      sizes.push_back(size);
    }
  }
  return sizes;
}

TEST(EagerAllocationsTest, TheLlamaStepAllocatesWhatTheRecordShows) {
  // The Llama-style replay against the record of the three runs it was written from
  // (tests/data/measured/allocator_history/): every allocation of 1 MiB or more of the last
  // step, the same requests in the same order (of the smaller ones — philox seeds, 1/rms,
  // cub's sort scratch — the replay leaves some out). Under autocast without and with full
  // checkpointing, and under FSDP2 on one rank (bf16 parameters cast from their shards,
  // the fp32 reduce-scatter's input and output, clipping's partial norms).
  const Expected<Json> file =
      ReadJsonFile(std::string(DTSIM_TEST_DATA_DIR) + "/measured/h200_allocator_runs.json");
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  for (const Json& run : (*file)["runs"]) {
    const std::string name = run["name"].get<std::string>();
    if (name != "llama-200m-b2s4k-none" && name != "llama-200m-b2s4k-full" &&
        name != "fsdp2-1b-none-exp") {
      continue;
    }
    const Expected<TransformerSpec> model = ModelOf(run);
    ASSERT_TRUE(model.ok());
    EagerRun loop = RunOf(run);
    loop.record_last_step = true;
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(*model, loop);
    ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
    std::vector<int64_t> replayed;
    for (const int64_t bytes : peaks->last_step) {
      if (bytes >= kAllocatorSmallSize) replayed.push_back(bytes);
    }
    const std::vector<int64_t> recorded = RecordedLastStep(name);
    std::printf("%s: %zu allocations of 1 MiB or more replayed, %zu recorded\n", name.c_str(),
                replayed.size(), recorded.size());
    const auto [mine, theirs] =
        std::mismatch(replayed.begin(), replayed.end(), recorded.begin(), recorded.end());
    const auto at = mine - replayed.begin();
    std::string around;
    for (auto i = std::max<ptrdiff_t>(at - 3, 0);
         i < std::min<ptrdiff_t>(at + 4, std::ssize(replayed)) && i < std::ssize(recorded); ++i) {
      around +=
          fmt::format(" {}/{}", replayed[static_cast<size_t>(i)], recorded[static_cast<size_t>(i)]);
    }
    EXPECT_TRUE(mine == replayed.end() && theirs == recorded.end())
        << name << ": first difference at allocation " << at
        << " (replayed/recorded bytes from three before it:" << around << ")";
  }
}

TEST(EagerAllocationsTest, MicroBatchesPastTheThirdRepeatIt) {
  // Each micro-batch after the first adds its gradients into .grad; from the second on the
  // allocator sees the same requests on the cache the one before left, so a step of more than
  // kMaxEagerReplayMicroBatches has the same peaks (which lets strategies::EagerLoopOf cap them).
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  Expected<ModelSpec> llama = ModelPreset("llama3-8b");
  ASSERT_TRUE(gpt2.ok() && llama.ok());
  TransformerSpec small_llama = llama->transformer;
  small_llama.layers = 4;
  for (const auto& [spec, recompute] : {std::pair{gpt2->transformer, Recompute::kNone},
                                        {gpt2->transformer, Recompute::kFull},
                                        {small_llama, Recompute::kSelectiveOp},
                                        {small_llama, Recompute::kNone}}) {
    EagerRun run{.micro_batch = 2, .seq_len = 1024, .recompute = recompute};
    run.micro_batches = kMaxEagerReplayMicroBatches;
    const Expected<EagerPeaks> capped = ReplayEagerTraining(spec, run);
    ASSERT_TRUE(capped.ok()) << capped.error().ToString();
    for (const int more : {4, 5, 8}) {
      run.micro_batches = more;
      const Expected<EagerPeaks> peaks = ReplayEagerTraining(spec, run);
      ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
      EXPECT_EQ(peaks->allocated, capped->allocated) << more;
      EXPECT_EQ(peaks->reserved, capped->reserved) << more;
    }
  }
}

TEST(EagerAllocationsTest, ReplaysOnlyTheLoopItModels) {
  const EagerRun run{.micro_batch = 1, .seq_len = 512};
  // Llama 3 8B is a Llama-style decoder (RMSNorm, SwiGLU, rotary, grouped-query attention):
  // replayed. Mixtral's MoE layers, Nemotron-4's squared-ReLU MLP and BERT's encoder are not.
  Expected<ModelSpec> llama = ModelPreset("llama3-8b");
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(ReplayEagerTraining(llama->transformer, run).ok());
  for (const auto& [preset, lacks] :
       {std::pair{"mixtral-8x7b", "this model has MoE or MLA layers"},
        {"nemotron-4-340b", "this model has another activation"},
        {"bert-large", "this model has an encoder's embeddings or heads"}}) {
    Expected<ModelSpec> model = ModelPreset(preset);
    ASSERT_TRUE(model.ok()) << preset;
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(model->transformer, run);
    ASSERT_FALSE(peaks.ok()) << preset;
    EXPECT_THAT(peaks.error().message(), HasSubstr(lacks)) << preset;
  }
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  ASSERT_TRUE(gpt2.ok());
  const Expected<EagerPeaks> selective = ReplayEagerTraining(
      gpt2->transformer, {.micro_batch = 1, .seq_len = 512, .recompute = Recompute::kSelective});
  ASSERT_FALSE(selective.ok());
  EXPECT_THAT(selective.error().message(), HasSubstr("not a PyTorch checkpoint policy"));
  // The replay's cost grows with the layers: past 1,024 it is refused (a 10^6-layer toy
  // model took minutes and gigabytes).
  TransformerSpec deep = gpt2->transformer;
  deep.layers = kMaxEagerReplayLayers + 1;
  const Expected<EagerPeaks> too_deep = ReplayEagerTraining(deep, run);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().ToString(),
            "layers: more than 1024 layers: the replay's cost grows with them and no model "
            "trained on one GPU has as many, got 1025");
}

TEST(EagerAllocationsTest, TheReserveIsTheCacheTheLossLeavesBehind) {
  // GPT-2 124M, 8 × 1024 tokens: the loss's fp32 tensors are 8,192 × 50,304 × 4 B = 1.54 GiB
  // each, the largest the loop makes. Reserved exceeds allocated by what the allocator cached
  // and could not reuse; without checkpointing, less than one of those tensors (the loss's
  // segments are reused by the next iteration's), and never less than nothing.
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  ASSERT_TRUE(gpt2.ok());
  const Expected<EagerPeaks> peaks =
      ReplayEagerTraining(gpt2->transformer, {.micro_batch = 8, .seq_len = 1024});
  ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
  const int64_t logits_fp32 = int64_t{8192} * 50304 * 4;
  EXPECT_GE(peaks->reserved, peaks->allocated);
  EXPECT_LT(peaks->reserved - peaks->allocated, logits_fp32);
  // Allocated at least holds the fp32 parameters and their two Adam moments (12 B each of
  // 50,304·768 + 1,024·768 + 12·(12·768² + 13·768) + 2·768 = 124,475,904 parameters) and, as the
  // loss's backward starts, three fp32 loss tensors at once: the saved log-softmax, nll_loss's
  // gradient and log_softmax's.
  const int64_t parameters = 124475904;
  EXPECT_GT(peaks->allocated, 12 * parameters + 3 * logits_fp32);
}

TEST(EagerAllocationsTest, ACompiledLossKeepsTheBf16LogitsInsteadOfItsFp32Tensors) {
  // A Llama-style decoder whose loss dwarfs the rest: 2 blocks of width 256, a 131,072-token
  // vocabulary, one sequence of 1,024 tokens: 2^27 logits, 256 MiB in bf16, 512 MiB in fp32.
  Expected<ModelSpec> llama = ModelPreset("llama3-8b");
  ASSERT_TRUE(llama.ok());
  TransformerSpec spec = llama->transformer;
  spec.layers = 2;
  spec.hidden = 256;
  spec.heads = 4;
  spec.kv_heads = 4;
  spec.ffn_hidden = 512;
  spec.vocab = 131072;
  const int64_t logits = int64_t{1024} * 131072;
  const EagerRun eager_run{.micro_batch = 1, .seq_len = 1024};
  EagerRun compiled_run = eager_run;
  compiled_run.compiled_loss = true;
  const Expected<EagerPeaks> eager = ReplayEagerTraining(spec, eager_run);
  const Expected<EagerPeaks> compiled = ReplayEagerTraining(spec, compiled_run);
  ASSERT_TRUE(eager.ok()) << eager.error().ToString();
  ASSERT_TRUE(compiled.ok()) << compiled.error().ToString();
  // Both peak as the loss's backward makes its gradient, over the same blocks' tensors, the
  // loss and its gradient (4 B each, 512 B blocks). Eager then holds log_softmax's output,
  // nll_loss's gradient and log_softmax's (the bf16 logits went at del logits): 12 B a logit;
  // compiled, the kept bf16 logits and their bf16 gradient, 4 B a logit, and the row maxima and
  // log-sum-exps, 2 × 4 B for each of the 1,024 tokens.
  EXPECT_EQ(eager->allocated - compiled->allocated, (12 - 4) * logits - 1024 * 2 * 4);
}

}  // namespace
}  // namespace dtsim::models
