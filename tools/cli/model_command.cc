#include "tools/cli/model_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <span>

#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "sim/base/strings.h"
#include "tools/cli/command_line.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ModelOptions {
  std::string model;
  std::string gpu = "a100-sxm4-80gb";
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  // 0: the model's max_seq
  std::string dtype = "bf16";
  std::string fp8_recipe = "delayed";
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  bool flash = false;
  bool no_dropout = false;
  std::string recompute = "none";
  std::string recompute_modules;
  int layer = 0;
  bool ops = false;
  bool help = false;
};

po::options_description Describe(ModelOptions& o) {
  po::options_description description(
      "Usage: dtsim model MODEL [options]\n\n"
      "MODEL is a preset (gpt3-175b, llama3-70b, mixtral-8x7b, resnet-50, ...) or a model JSON\n"
      "file (docs/models.md). Prints its parameters and, for transformers, one layer on one\n"
      "tensor-parallel rank: FLOPs, bytes and roofline time per op on the GPU, and the layer's\n"
      "activation memory.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "gpu", po::value(&o.gpu)->value_name("PRESET"), "GPU preset (default a100-sxm4-80gb)")(
      "micro-batch", po::value(&o.micro_batch)->value_name("B"), "micro-batch size (default 1)")(
      "seq", po::value(&o.seq_len)->value_name("S"), "sequence length (default: max_seq)")(
      "dtype", po::value(&o.dtype)->value_name("D"),
      "activation dtype (default bf16); fp8: BF16 activations with the linear layers' GEMMs in "
      "FP8, as Transformer Engine runs them")(
      "fp8-recipe", po::value(&o.fp8_recipe)->value_name("R"),
      "with --dtype fp8: delayed (default), current, blockwise or mxfp8")(
      "tp", po::value(&o.tensor_parallel)->value_name("T"), "tensor-parallel size (default 1)")(
      "sp", po::bool_switch(&o.sequence_parallel), "sequence parallelism")(
      "flash", po::bool_switch(&o.flash), "fused (flash) attention")(
      "no-dropout", po::bool_switch(&o.no_dropout), "train without dropout")(
      "recompute", po::value(&o.recompute)->value_name("R"),
      "none, selective, full or selective_op")(
      "recompute-modules", po::value(&o.recompute_modules)->value_name("LIST"),
      "with --recompute selective: the modules it re-runs, comma-separated (Megatron-Core's "
      "--recompute-modules: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, "
      "shared_experts; default core_attn)")(
      "layer", po::value(&o.layer)->value_name("N"),
      "the transformer layer shown, from 0 (default 0; a MoE model's first MoE layer follows "
      "its dense ones)")("ops", po::bool_switch(&o.ops), "list every op of the layer");
  return description;
}

Expected<models::ModelSpec> LoadModel(const std::string& name) {
  if (!name.ends_with(".json") && !std::filesystem::exists(name)) {
    return models::ModelPreset(name);
  }
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(name));
  Expected<models::ModelSpec> model = models::ModelFromJson(json, "");
  if (!model.ok()) return std::move(model).error().InFile(name);
  return model;
}

std::string Billions(int64_t count) {
  return fmt::format("{:.3f} B", static_cast<double>(count) / 1e9);
}

void PrintParameters(std::ostream& out, const models::ModelSpec& model) {
  const models::ParameterCount count = models::CountParameters(model);
  fmt::print(out, "parameters  {} total: embedding {}, layers {}, output {}", Billions(count.total),
             Billions(count.embedding), Billions(count.layers), Billions(count.output));
  if (count.active != count.total) fmt::print(out, "; active per token {}", Billions(count.active));
  if (count.mtp > 0) {
    fmt::print(out, "; and {} in {} multi-token-prediction module(s)", Billions(count.mtp),
               model.transformer.mtp_layers);
  }
  fmt::print(out, "\n");
}

Expected<models::Recompute> ParseRecompute(const std::string& text) {
  const auto names = models::RecomputeNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<models::Recompute>(i);
  }
  return Error("expected " + JoinQuoted(names), "--recompute", Quote(text));
}

// "mla_up_proj,mlp" → the modules' bits (models::RecomputeModule); empty: the core attention.
Expected<uint8_t> ParseRecomputeModules(const std::string& text, models::Recompute recompute) {
  if (text.empty()) return static_cast<uint8_t>(models::kRecomputeCoreAttn);
  if (recompute != models::Recompute::kSelective) {
    return Error("the modules name what --recompute selective re-runs", "--recompute-modules",
                 Quote(text));
  }
  uint8_t mask = 0;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, end - at);
    const std::optional<uint8_t> bit = models::RecomputeModuleBit(name);
    if (!bit) {
      return Error("unknown recompute module" + DidYouMean(name, models::RecomputeModuleNames()) +
                       "; known: " + JoinQuoted(models::RecomputeModuleNames()),
                   "--recompute-modules", Quote(name));
    }
    mask |= *bit;
    at = end + 1;
  }
  return mask;
}

struct PassTotals {
  double flops = 0, model_flops = 0, bytes = 0, seconds = 0;
};

PassTotals PrintOps(std::ostream& out, const std::vector<models::Op>& ops,
                    const models::OpCostModel& cost, bool each) {
  PassTotals totals;
  for (const models::Op& op : ops) {
    const double seconds = cost.Price(op)->duration.ToSecondsDouble();
    totals.flops += op.flops;
    totals.model_flops += op.model_flops;
    totals.bytes += op.bytes;
    totals.seconds += seconds;
    if (each) {
      fmt::print(out, "  {:<24} {:<9} {:>10.3f} {:>10.3f} {:>10.1f} {:>10.3f}\n", op.name,
                 models::PassName(op.pass), op.flops / 1e9, op.bytes / 1e6, seconds * 1e6,
                 static_cast<double>(op.saved_bytes) / 1e6);
    }
  }
  return totals;
}

Status PrintLayer(std::ostream& out, const models::ModelSpec& model, const ModelOptions& o) {
  const models::TransformerSpec& spec = model.transformer;
  // FP8 training keeps BF16 activations; its recipe says how the FP8 GEMMs' inputs are scaled.
  const bool fp8 = o.dtype == "fp8";
  const std::optional<DType> dtype = fp8 ? DType::kBf16 : DTypeFromName(o.dtype);
  if (!dtype) return Error("unknown dtype", "--dtype", Quote(o.dtype));
  models::Fp8Recipe recipe = models::Fp8Recipe::kNone;
  if (fp8) {
    const std::span<const std::string_view> names = models::Fp8RecipeNames().subspan(1);
    const auto it = std::find(names.begin(), names.end(), o.fp8_recipe);
    if (it == names.end()) {
      return Error("unknown FP8 recipe" + DidYouMean(o.fp8_recipe, names) +
                       "; recipes: " + JoinQuoted(names),
                   "--fp8-recipe", Quote(o.fp8_recipe));
    }
    recipe = static_cast<models::Fp8Recipe>(it - names.begin() + 1);
  }
  DTSIM_ASSIGN_OR_RETURN(const models::Recompute recompute, ParseRecompute(o.recompute));
  DTSIM_ASSIGN_OR_RETURN(const uint8_t modules,
                         ParseRecomputeModules(o.recompute_modules, recompute));
  if (o.layer < 0 || o.layer >= spec.layers) {
    return Error(fmt::format("the model has layers 0 to {}", spec.layers - 1), "--layer",
                 std::to_string(o.layer));
  }
  DTSIM_ASSIGN_OR_RETURN(const models::GpuSpec gpu, models::GpuPreset(o.gpu));
  const models::TransformerShard shard{.micro_batch = o.micro_batch,
                                       .seq_len = o.seq_len > 0 ? o.seq_len : spec.max_seq,
                                       .dtype = *dtype,
                                       .tensor_parallel = o.tensor_parallel,
                                       .sequence_parallel = o.sequence_parallel,
                                       .flash_attention = o.flash,
                                       .dropout = !o.no_dropout,
                                       .fp8 = recipe,
                                       .recompute_modules = modules};
  DTSIM_RETURN_IF_ERROR(models::ValidateShard(spec, shard));
  const models::RooflineCostModel roofline(gpu);
  const models::LayerOps layer = models::TransformerLayerOps(spec, o.layer, shard);
  fmt::print(out,
             "layer {} on one of {} tensor-parallel ranks: micro-batch {} × sequence {}, {}{}{}; "
             "{} roofline\n",
             o.layer, shard.tensor_parallel, shard.micro_batch, shard.seq_len, o.dtype,
             shard.sequence_parallel ? ", sequence parallel" : "",
             shard.flash_attention ? ", flash attention" : "", gpu.name);
  if (o.ops) {
    fmt::print(out, "  {:<24} {:<9} {:>10} {:>10} {:>10} {:>10}\n", "op", "pass", "GFLOP", "MB",
               "time us", "saved MB");
  }
  const PassTotals forward = PrintOps(out, layer.forward, roofline, o.ops);
  const PassTotals backward = PrintOps(out, layer.backward, roofline, o.ops);
  const PassTotals again = PrintOps(out, models::RecomputeOps(layer, recompute), roofline, o.ops);
  for (const auto& [name, totals] :
       {std::pair{"forward", forward}, {"backward", backward}, {"recompute", again}}) {
    fmt::print(out, "  {:<9} {:>10.3f} GFLOP ({:.3f} model)  {:>10.3f} MB  {:>9.3f} ms\n", name,
               totals.flops / 1e9, totals.model_flops / 1e9, totals.bytes / 1e6,
               totals.seconds * 1e3);
  }
  const int64_t activations = models::LayerActivationBytes(layer, recompute, shard, spec.hidden);
  const std::string policy =
      modules == models::kRecomputeCoreAttn
          ? o.recompute
          : fmt::format("{} of {}", o.recompute, models::RecomputeModulesText(modules));
  fmt::print(out, "  activations kept per layer and micro-batch ({} recompute): {:.3f} MB\n",
             policy, static_cast<double>(activations) / 1e6);
  return Status::Ok();
}

Status Execute(const ModelOptions& o, std::ostream& out) {
  DTSIM_ASSIGN_OR_RETURN(const models::ModelSpec model, LoadModel(o.model));
  fmt::print(out, "model       {} ({})\n", model.name, models::ModelFamilyName(model.family));
  if (model.family == models::ModelFamily::kTransformer) {
    const models::TransformerSpec& t = model.transformer;
    fmt::print(
        out,
        "            {} layers, hidden {}, {} heads ({} KV) of {}, ffn {} ({}), vocab {}, "
        "{}, {} positions{}\n",
        t.layers, t.hidden, t.heads, t.kv_heads, t.head_dim(), t.ffn_hidden,
        models::ActivationName(t.activation), t.vocab, models::NormName(t.norm),
        models::PositionEmbeddingName(t.position),
        t.moe.enabled() ? fmt::format(", {} experts top-{}", t.moe.experts, t.moe.top_k) : "");
    if (t.mla.enabled()) {
      fmt::print(out,
                 "            latent attention: query latent {}, KV latent {}, heads {} + {} "
                 "rotary, values {}\n",
                 t.mla.q_lora_rank, t.mla.kv_lora_rank, t.mla.qk_nope_head_dim,
                 t.mla.qk_rope_head_dim, t.mla.v_head_dim);
    }
    if (t.moe.shared_experts > 0 || t.moe.first_dense_layers > 0) {
      fmt::print(out, "            {} shared expert(s), {} dense layer(s) first\n",
                 t.moe.shared_experts, t.moe.first_dense_layers);
    }
    fmt::print(out, "            KV cache {} bytes per token in bf16\n",
               models::KvCacheBytesPerToken(t, DType::kBf16));
  }
  PrintParameters(out, model);
  if (model.family == models::ModelFamily::kTransformer) return PrintLayer(out, model, o);
  return Status::Ok();
}

}  // namespace

CommandOutcome ModelCommand(std::span<const std::string> args, std::ostream& out) {
  ModelOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "model", options.model, options.help,
                        "missing the MODEL", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
