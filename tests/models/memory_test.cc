// The memory model: ZeRO's per-stage state, micro-batches in flight per schedule, activations
// per stage, tensor-parallel parameter shards — each expectation derived in its comment.
#include "models/memory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "models/parameters.h"

namespace dtsim::models {
namespace {

ModelSpec Preset(const char* name) {
  Expected<ModelSpec> model = ModelPreset(name);
  EXPECT_TRUE(model.ok());
  return *model;
}

TEST(MemoryTest, ZeroStagesDivideModelStatesAsThePaperSays) {
  // Rajbhandari et al. SC'20 Fig. 1: 2Ψ fp16 parameters + 2Ψ fp16 gradients + 12Ψ Adam state
  // (fp32 master, momentum, variance) per device, N = 64: stage 0 16Ψ; stage 1 4Ψ + 12Ψ/N;
  // stage 2 2Ψ + 14Ψ/N; stage 3 16Ψ/N (7.5B: 120, 31.4, 16.6, 1.9 GB).
  const ModelSpec model = Preset("megatron-7.5b");
  const auto psi = static_cast<double>(CountParameters(model).total);
  const double n = 64;
  const double expected[] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n,
                             16 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 2048, .dtype = DType::kFp16},
                    .data_parallel = 64,
                    .zero_stage = stage,
                    .param_dtype = DType::kFp16,
                    .grad_dtype = DType::kFp16};
    Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
    ASSERT_TRUE(memory.ok()) << memory.error().ToString();
    EXPECT_EQ(memory->parameter_count, CountParameters(model).total);
    const double states =
        static_cast<double>(memory->parameters + memory->gradients + memory->optimizer_state);
    EXPECT_NEAR(states, expected[stage], 3) << "ZeRO stage " << stage;  // ceil per part
  }
}

TEST(MemoryTest, MicrobatchesInFlightPerSchedule) {
  // p = 8, m = 64, v = 4 (notes §7.2): GPipe keeps all 64; 1F1B rank r keeps p − r;
  // interleaved rank 0: (2·7 + 3·8 + 1) / 4 = 9.75 stage-equivalents.
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kGpipe, 8, 0, 1, 64), 64);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 0, 1, 64), 8);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 7, 1, 64), 1);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 0, 1, 3), 3);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kInterleaved, 8, 0, 4, 64), 9.75);
}

// GPT-3 175B, t = 8 with sequence parallelism and selective recompute, p = 16, b = 1,
// s = 2048, 1F1B, DP 8 with ZeRO-1.
MemoryPlan Gpt3SelectiveSequenceParallel() {
  return {.shard = {.micro_batch = 1,
                    .seq_len = 2048,
                    .dtype = DType::kBf16,
                    .tensor_parallel = 8,
                    .sequence_parallel = true},
          .recompute = Recompute::kSelective,
          .pipeline_stages = 16,
          .microbatches = 64,
          .data_parallel = 8,
          .zero_stage = 1};
}

TEST(MemoryTest, FirstStageHoldsAllLayersWorthOfActivations) {
  // Stage 0 holds p = 16 micro-batches of 96/16 = 6 layers, each 34·s·b·h/t bytes (Korthikanti
  // §4.3: L layers' worth, independent of p), plus per micro-batch the embedding's int64 ids
  // 8·s·b and its dropout mask s·b·h/t.
  const ModelSpec model = Preset("gpt3-175b");
  const MemoryPlan plan = Gpt3SelectiveSequenceParallel();
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  const int64_t sbh = 2048LL * 12288;
  EXPECT_EQ(memory->activations, 16 * (6 * 34 * sbh / 8 + 8 * 2048 + sbh / 8));
  EXPECT_DOUBLE_EQ(memory->microbatches_in_flight, 16);
}

TEST(MemoryTest, DTensorSequenceParallelismKeepsTheGatheredInputs) {
  // The same plan with sequence parallelism as PyTorch's DTensor runs it (torchtitan's apply_tp:
  // the q/k/v projection and the MLP's first linear save their input gathered whole, not the
  // sequence shard Megatron-Core saves and gathers again): each layer keeps two more inputs'
  // worth of the other ranks' tokens, 2 · 2 B · (s·b − s·b/t) · h; the output layer one more
  // (its input, the last stage's). Stage 0 holds 16 micro-batches of 6 layers, as above.
  const ModelSpec model = Preset("gpt3-175b");
  MemoryPlan plan = Gpt3SelectiveSequenceParallel();
  const Expected<MemoryBreakdown> megatron = EstimateMemory(model, plan);
  ASSERT_TRUE(megatron.ok()) << megatron.error().ToString();
  plan.shard.saves_gathered_inputs = true;
  const Expected<MemoryBreakdown> dtensor = EstimateMemory(model, plan);
  ASSERT_TRUE(dtensor.ok()) << dtensor.error().ToString();
  const int64_t sbh = 2048LL * 12288;
  EXPECT_EQ(dtensor->activations - megatron->activations, 16 * 6 * 2 * 2 * (sbh - sbh / 8));
}

TEST(MemoryTest, TensorParallelParameterShard) {
  // LLaMA-2 70B at t = 8, one stage: per layer Q and O 2·h·h/8, K and V one replicated-free
  // KV head each 2·h·128, two RMSNorms 2·h, SwiGLU 3·h·f/8; plus the V/8 × h embedding shard,
  // the final norm h and the untied V/8 × h output shard (32,000 pads to 32,768 = 32·128·8).
  const ModelSpec model = Preset("llama2-70b");
  const int64_t h = 8192, f = 28672, v = 32768;
  const int64_t layer = 2 * h * h / 8 + 2 * h * 128 + 2 * h + 3 * h * f / 8;
  const MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 4096, .tensor_parallel = 8}};
  EXPECT_EQ(StageParameterCount(model, plan), 80 * layer + v / 8 * h + h + v / 8 * h);
}

TEST(MemoryTest, PlanErrors) {
  const ModelSpec model = Preset("gpt3-175b");
  MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 2048}, .pipeline_stages = 7};
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.error().ToString().find("(7) must divide layers (96)"), std::string::npos)
      << memory.error().ToString();
  plan.pipeline_stages = 1;
  plan.zero_stage = 4;
  EXPECT_FALSE(EstimateMemory(model, plan).ok());
}

TEST(MemoryTest, RecsysAndVisionModels) {
  // DLRM: tables split 8 ways (ceil), the MLPs replicated.
  const ModelSpec dlrm = Preset("dlrm-mlperf");
  const ParameterCount count = CountParameters(dlrm);
  const MemoryPlan plan{.shard = {.micro_batch = 2048, .dtype = DType::kFp32},
                        .param_dtype = DType::kFp32,
                        .grad_dtype = DType::kFp32,
                        .embedding_shards = 8};
  EXPECT_EQ(StageParameterCount(dlrm, plan), count.layers + (count.embedding + 7) / 8);
  Expected<MemoryBreakdown> memory = EstimateMemory(Preset("resnet-50"), plan);
  ASSERT_TRUE(memory.ok());
  // fp32 weights need no master copy: Adam keeps 8 bytes per parameter.
  EXPECT_EQ(memory->optimizer_state, 8 * 25'557'032LL);
  EXPECT_GT(memory->activations, 0);
}

// Llama 3 8B: h = 4,096, 32 layers, a layer's parameters 2·h² (q, o) + 2·h·1,024 (k, v: 8 KV
// heads of 128) + 3·h·14,336 (SwiGLU) + 2·h (norms) = 218,112,000; vocabulary 128,256 (a
// multiple of 128: no padding). Two sequences of 8,192 tokens: 16,384 tokens, 2,101,346,304
// logits.
constexpr int64_t kLlama3Layer = 218'112'000;
constexpr int64_t kLlama3Logits = 16'384LL * 128'256;

MemoryPlan Llama3OneGpu(Framework framework, Recompute recompute) {
  return MemoryPlan{
      .shard = {.micro_batch = 2, .seq_len = 8192, .flash_attention = true, .dropout = false},
      .recompute = recompute,
      .framework = framework,
      .param_dtype = DType::kFp32,
      .grad_dtype = DType::kFp32};
}

TEST(MemoryTest, LossWorkingSetPerKernel) {
  // Megatron: the bf16 logits beside the fp32 softmax built in place (2 B a logit); PyTorch:
  // nll_loss's fp32 gradient and log_softmax's fp32 input gradient (4 + 4), or in forward the
  // bf16 logits and their fp32 copy (2 + 4): 8. In fp32, the forward's 4 + 4 = 8 as well.
  EXPECT_EQ(LossWorkingBytes(LossKernel::kMegatronFused, kLlama3Logits, DType::kBf16),
            2 * kLlama3Logits);
  EXPECT_EQ(LossWorkingBytes(LossKernel::kEager, kLlama3Logits, DType::kBf16), 8 * kLlama3Logits);
  EXPECT_EQ(LossWorkingBytes(LossKernel::kMegatronFused, 1000, DType::kFp32), 4000);
  EXPECT_EQ(LossWorkingBytes(LossKernel::kEager, 1000, DType::kFp32), 8000);
  // loss_parallel (PyTorch with tensor parallelism, the rank's vocabulary shard): the bf16
  // logits, their fp32 copy, the copy less its maxima and exp of that (2 + 4 + 4 + 4) in
  // forward; in backward zeros, exp(log_softmax) and their sum (4 + 4 + 4): 14.
  EXPECT_EQ(LossWorkingBytes(LossKernel::kLossParallel, 1000, DType::kBf16), 14000);
  // Compiled: the backward's bf16 gradient beside the kept bf16 logits, 2 B a logit.
  EXPECT_EQ(LossWorkingBytes(LossKernel::kCompiled, 1000, DType::kBf16), 2000);
}

TEST(MemoryTest, PyTorchPeaksAtTheLossBeforeAnyGradientExists) {
  // One GPU, one micro-batch, no recompute: the peak is at the loss, where every layer's
  // activations are kept and the 128k-vocabulary loss holds its working set. Megatron's
  // gradient buffers exist then (8.03B fp32 gradients); PyTorch's zero_grad(set_to_none) freed
  // its gradients, and under autocast each layer keeps its matmuls' bf16 weight copies and its
  // two norms' inputs in fp32 (the residual stream is fp32: 2 more bytes for each of 16,384 ×
  // 4,096 elements): 32 × (218,112,000 × 2 + 2 × 16,384 × 4,096 × 2) B more activations. Megatron's
  // working set there is the logits GEMM's operands (16,384 × 4,096 in, 4,096 × 128,256 weight, the
  // logits out, 2 B each), more than its loss's 2 B a logit; PyTorch's the loss's 8 B a logit.
  const ModelSpec model = Preset("llama3-8b");
  Expected<MemoryBreakdown> megatron =
      EstimateMemory(model, Llama3OneGpu(Framework::kMegatron, Recompute::kNone));
  Expected<MemoryBreakdown> pytorch =
      EstimateMemory(model, Llama3OneGpu(Framework::kPyTorch, Recompute::kNone));
  ASSERT_TRUE(megatron.ok() && pytorch.ok());
  EXPECT_EQ(megatron->gradients, 4 * CountParameters(model).total);
  EXPECT_EQ(pytorch->gradients, 0);
  EXPECT_EQ(pytorch->activations - megatron->activations,
            32 * (kLlama3Layer * 2 + 2 * 16'384LL * 4'096 * 2));
  EXPECT_EQ(megatron->temporary, (16'384LL * 4'096 + 4'096LL * 128'256 + kLlama3Logits) * 2);
  EXPECT_EQ(pytorch->temporary, 8 * kLlama3Logits);
  // Over 2 tensor-parallel ranks PyTorch's loss is loss_parallel's over half the vocabulary
  // (128,256 / 2), 14 B a logit; Megatron's stays at the logits GEMM's operands.
  MemoryPlan split = Llama3OneGpu(Framework::kPyTorch, Recompute::kNone);
  split.shard.tensor_parallel = 2;
  const Expected<MemoryBreakdown> loss_parallel = EstimateMemory(model, split);
  ASSERT_TRUE(loss_parallel.ok()) << loss_parallel.error().ToString();
  EXPECT_EQ(loss_parallel->temporary, 14 * (kLlama3Logits / 2));
  // The loss compiled keeps the bf16 logits for its backward, 2 B a logit where eager keeps
  // the fp32 log-softmax (4), and holds beside them only its bf16 gradient (2 B a logit), less
  // than the logits GEMM's operands, Megatron's working set there.
  MemoryPlan compiled_plan = Llama3OneGpu(Framework::kPyTorch, Recompute::kNone);
  compiled_plan.shard.compiled_loss = true;
  const Expected<MemoryBreakdown> compiled = EstimateMemory(model, compiled_plan);
  ASSERT_TRUE(compiled.ok()) << compiled.error().ToString();
  EXPECT_EQ(pytorch->activations - compiled->activations, 2 * kLlama3Logits);
  EXPECT_EQ(compiled->temporary, megatron->temporary);
}

TEST(MemoryTest, FsdpKeepsTheRootGatheredBesideTwoLayers) {
  // FSDP2 over 8 GPUs (ZeRO-3, PyTorch): fp32 shards, gathered in bf16. At the loss: its 8 B a
  // logit, the layer computing and the one prefetched (2 × 218,112,000 × 2 B), and the root
  // module — embedding and output layer 2 × 128,256 × 4,096, final norm 4,096 — gathered:
  // 1,050,677,248 × 2 B. The sharded gradients do not exist yet; nor do autocast copies (the
  // gathered weights are bf16 already).
  const ModelSpec model = Preset("llama3-8b");
  MemoryPlan plan = Llama3OneGpu(Framework::kPyTorch, Recompute::kNone);
  plan.data_parallel = 8;
  plan.zero_stage = 3;
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  EXPECT_EQ(memory->temporary, 8 * kLlama3Logits + 2 * kLlama3Layer * 2 + 1'050'677'248LL * 2);
  EXPECT_EQ(memory->gradients, 0);
  // fp32 parameters over 8 ranks: 4 B and Adam's 8 B a parameter, no master copy.
  const int64_t parameters = CountParameters(model).total;
  EXPECT_EQ(memory->parameters, (parameters * 4 + 7) / 8);
  EXPECT_EQ(memory->optimizer_state, (parameters * 8 + 7) / 8);
}

// Llama 3 8B under DeepSpeed over 8 GPUs, bf16 parameters and gradients, full recompute.
MemoryPlan DeepSpeedOverEight(int zero_stage) {
  MemoryPlan plan = Llama3OneGpu(Framework::kDeepSpeed, Recompute::kFull);
  plan.param_dtype = DType::kBf16;
  plan.grad_dtype = DType::kBf16;
  plan.data_parallel = 8;
  plan.zero_stage = zero_stage;
  return plan;
}

TEST(MemoryTest, DeepSpeedZero3GathersWhatItsCoordinatorKeeps) {
  // DeepSpeed's ZeRO-3 over 8 GPUs, bf16 parameters, Llama 3 8B: at the turn from forward to
  // backward the output layer is in use (128,256 × 4,096 + the final norm's 4,096 = 525,340,672
  // elements, "tail"); a layer stays gathered while 2 × what follows it is under
  // max_reuse_distance; the backward prefetches min(what was released, prefetch_bucket_size,
  // max_live_parameters − what is live). Each plan differs from `none` (nothing reused or
  // prefetched: the tail alone) by its gathered elements × 2 B.
  const ModelSpec model = Preset("llama3-8b");
  const MemoryPlan plan = DeepSpeedOverEight(3);
  const auto memory = [&](DeepSpeedZero zero) {
    MemoryPlan with = plan;
    with.deepspeed = zero;
    Expected<MemoryBreakdown> estimate = EstimateMemory(model, with);
    EXPECT_TRUE(estimate.ok()) << estimate.error().ToString();
    return *estimate;
  };
  const MemoryBreakdown none = memory({.prefetch_bucket_size = 0, .max_reuse_distance = 0});
  // DeepSpeed's defaults: 2 × tail = 1,050,681,344 ≥ 1e9 reuses no layer; the prefetch is its
  // bucket, 5e7 (room: 1e9 − 525,340,672).
  EXPECT_EQ(memory({}).temporary - none.temporary, 50'000'000LL * 2);
  // A reuse distance of 2 × (tail + one layer) + 1 keeps the last two layers (961,564,672 live),
  // and the prefetch fills max_live_parameters' room: 38,435,328, 1e9 gathered in all.
  const int64_t reuse = 2 * (525'340'672LL + kLlama3Layer) + 1;
  EXPECT_EQ(memory({.max_reuse_distance = reuse}).temporary - none.temporary,
            (2 * kLlama3Layer + 38'435'328LL) * 2);
  // The gradient bucket: reduce_bucket_size elements in the parameters' dtype, unless
  // contiguous_gradients is off.
  EXPECT_EQ(memory({}).gradients - memory({.contiguous_gradients = false}).gradients,
            500'000'000LL * 2);
  EXPECT_EQ(memory({.reduce_bucket_size = 1000}).gradients -
                memory({.contiguous_gradients = false}).gradients,
            2000);
}

TEST(MemoryTest, DeepSpeedZero1And2MakeTheirBucketEachBackward) {
  // ZeRO-1 and 2 (stage_1_and_2.py): the backward pass makes one bucket of reduce_bucket_size
  // elements in the parameters' dtype, two with overlap_comm; under a pipeline the bucket comes
  // after the backward passes (not at the peak). Megatron holds none.
  const ModelSpec model = Preset("llama3-8b");
  const auto gradients = [&](int stage, bool overlap, bool contiguous, int stages = 1,
                             Framework framework = Framework::kDeepSpeed) {
    MemoryPlan with = DeepSpeedOverEight(stage);
    with.overlap_gradient_reduce = overlap;
    with.deepspeed.contiguous_gradients = contiguous;
    with.deepspeed.reduce_bucket_size = 1000;
    with.pipeline_stages = stages;
    with.framework = framework;
    Expected<MemoryBreakdown> memory = EstimateMemory(model, with);
    EXPECT_TRUE(memory.ok()) << memory.error().ToString();
    return memory->gradients;
  };
  for (const int stage : {1, 2}) {
    EXPECT_EQ(gradients(stage, false, true) - gradients(stage, false, false), 2000) << stage;
    EXPECT_EQ(gradients(stage, true, true) - gradients(stage, true, false), 4000) << stage;
  }
  EXPECT_EQ(gradients(1, false, true, 2), gradients(1, false, false, 2));
  EXPECT_EQ(gradients(1, false, true, 1, Framework::kMegatron),
            gradients(1, false, false, 1, Framework::kMegatron));
}

TEST(MemoryTest, FsdpUnderPipeliningKeepsTheStageGathered) {
  // FSDP2 over 8 ranks on each of 2 pipeline stages, 8 micro-batches: no resharding between
  // micro-batches, so stage 0 (16 layers and the embedding: P = 16 × 218,112,000 + 128,256 ×
  // 4,096 parameters) keeps all P gathered in bf16 (2 B) and accumulates unsharded fp32
  // gradients (4 B) beside its fp32 shards (4 P / 8), against FSDP2's two layers and the root
  // without pipelining. Its peak, the backward of its last layer, adds that layer's largest op.
  const ModelSpec model = Preset("llama3-8b");
  MemoryPlan plan = Llama3OneGpu(Framework::kPyTorch, Recompute::kNone);
  plan.pipeline_stages = 2;
  plan.microbatches = 8;
  plan.data_parallel = 8;
  plan.zero_stage = 3;
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  const int64_t p = 16 * kLlama3Layer + 128'256LL * 4'096;
  EXPECT_EQ(memory->parameter_count, p);
  EXPECT_EQ(memory->gradients, (4 * p + 7) / 8 + 4 * p);
  const LayerOps layer = TransformerLayerOps(model.transformer, 15, plan.shard);
  int64_t largest_op = 0;
  for (const Op& op : layer.backward) largest_op = std::max<int64_t>(largest_op, op.bytes);
  for (const Op& op : layer.forward) largest_op = std::max<int64_t>(largest_op, op.bytes);
  EXPECT_EQ(memory->temporary, largest_op + 2 * p);
}

TEST(MemoryTest, RecomputingALayerRestoresWhatItDropped) {
  // The first of two pipeline stages of GPT-3 1.3B (no loss there), full recompute: its peak is
  // the backward of its last layer, with every layer's input kept for the micro-batches in
  // flight and that layer's working set: all it would keep without recompute, less the input
  // it kept, plus its largest op. Megatron's gradient buffers exist throughout.
  const ModelSpec model = Preset("gpt3-1.3b");
  const TransformerShard shard{.micro_batch = 4, .seq_len = 2048};
  const MemoryPlan plan{
      .shard = shard, .recompute = Recompute::kFull, .pipeline_stages = 2, .microbatches = 8};
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  const LayerOps layer = TransformerLayerOps(model.transformer, 0, shard);
  const int64_t h = 2048;
  const int64_t input = 2 * 2048 * 4 * h;  // 2·s·b·h
  EXPECT_EQ(LayerActivationBytes(layer, Recompute::kFull, shard, h), input);
  const int64_t none = LayerActivationBytes(layer, Recompute::kNone, shard, h);
  int64_t largest_op = 0;
  for (const Op& op : layer.backward) largest_op = std::max<int64_t>(largest_op, op.bytes);
  for (const Op& op : layer.forward) largest_op = std::max<int64_t>(largest_op, op.bytes);
  EXPECT_EQ(memory->temporary, none - input + largest_op);
  // 1F1B keeps 2 micro-batches on stage 0: 12 layers' inputs and the embedding's int64 ids and
  // dropout mask (8·s·b + s·b·h) each.
  EXPECT_EQ(memory->activations, 2 * (12 * input + 8 * 2048 * 4 + 2048 * 4 * h));
  EXPECT_GT(memory->gradients, 0);
}

TEST(MemoryTest, Fp8ParametersAreTheirRowWiseCopy) {
  // Llama 3 8B in FP8 (delayed scaling: 1 B a quantized element) with bf16 parameters on one
  // GPU. Its FP8 GEMM weights: 32 layers × (q, o 2·h² + k, v 2·h·1,024 + SwiGLU 3·h·14,336) =
  // 32 × 218,103,808 = 6,979,321,856 (the norms, embedding and output layer stay bf16).
  // Transformer Engine keeps each quantized row- and column-wise: 2 B a weight beside its 2 B
  // bf16 parameter. As FP8 parameters (Megatron-Core's --fp8-param-gather) the row-wise copy is
  // the parameter: the parameters take 2·P − F bytes, the copies F — 2·F less in all.
  constexpr int64_t kFp8Weights = 32 * 218'103'808LL;
  const ModelSpec model = Preset("llama3-8b");
  MemoryPlan plan = Llama3OneGpu(Framework::kMegatron, Recompute::kNone);
  plan.shard.fp8 = Fp8Recipe::kDelayed;
  plan.param_dtype = DType::kBf16;
  Expected<MemoryBreakdown> copies = EstimateMemory(model, plan);
  plan.fp8_params = true;
  Expected<MemoryBreakdown> fp8 = EstimateMemory(model, plan);
  ASSERT_TRUE(copies.ok() && fp8.ok());
  const int64_t parameters = CountParameters(model).total;
  EXPECT_EQ(copies->parameters, 2 * parameters);
  EXPECT_EQ(copies->fp8_weights, 2 * kFp8Weights);
  EXPECT_EQ(fp8->parameters, 2 * parameters - kFp8Weights);
  EXPECT_EQ(fp8->fp8_weights, kFp8Weights);
  EXPECT_EQ(copies->total() - fp8->total(), 2 * kFp8Weights);
  // The optimizer keeps its fp32 master copy either way: 12 B a parameter.
  EXPECT_EQ(fp8->optimizer_state, 12 * parameters);
}

TEST(MemoryTest, OptimizerStateInSixteenBits) {
  // Adam beside bf16 parameters, over 8 data-parallel ranks under ZeRO-1: fp32 moments and
  // master copy, 12 B a parameter; bf16 moments, 2·2 + 4 = 8; everything bf16 (Apex's
  // DistributedFusedAdam with dtype bf16), 6. With fp32 parameters there is no master copy:
  // bf16 moments alone, 4.
  EXPECT_EQ(OptimizerStateBytes(Optimizer::kAdam, DType::kBf16), 12);
  EXPECT_EQ(OptimizerStateBytes(Optimizer::kAdam, DType::kBf16,
                                {.master = DType::kFp32, .moments = DType::kBf16}),
            8);
  EXPECT_EQ(OptimizerStateBytes(Optimizer::kAdam, DType::kBf16,
                                {.master = DType::kBf16, .moments = DType::kBf16}),
            6);
  EXPECT_EQ(OptimizerStateBytes(Optimizer::kAdam, DType::kFp32,
                                {.master = DType::kBf16, .moments = DType::kBf16}),
            4);
  EXPECT_EQ(OptimizerStateBytes(Optimizer::kSgd, DType::kBf16), 8);
  const ModelSpec model = Preset("llama3-8b");
  MemoryPlan plan = Llama3OneGpu(Framework::kMegatron, Recompute::kNone);
  plan.param_dtype = DType::kBf16;
  plan.data_parallel = 8;
  plan.zero_stage = 1;
  plan.optimizer_state = {.master = DType::kBf16, .moments = DType::kBf16};
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok());
  const int64_t parameters = CountParameters(model).total;
  EXPECT_EQ(memory->optimizer_state, (parameters * 6 + 7) / 8);
}

}  // namespace
}  // namespace dtsim::models
