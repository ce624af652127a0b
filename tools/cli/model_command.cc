#include "tools/cli/model_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <array>
#include <utility>

#include "models/model_spec.h"
#include "models/ops.h"
#include "tools/api/api.h"
#include "tools/cli/command_line.h"
#include "tools/results/model_report.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ModelOptions {
  std::string model;
  api::ModelQuery query;  // the options read straight into it, but --no-dropout
  bool no_dropout = false;
  bool ops = false;
  std::string result_path;
  bool quiet = false;
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
      "gpu", po::value(&o.query.gpu)->value_name("PRESET"), "GPU preset (default a100-sxm4-80gb)")(
      "micro-batch", AtLeastValue(&o.query.micro_batch, 1, "micro-batch")->value_name("B"),
      "micro-batch size (default 1)")("seq",
                                      AtLeastValue(&o.query.seq_len, 1, "seq")->value_name("S"),
                                      "sequence length (default: max_seq)")(
      "dtype", po::value(&o.query.dtype)->value_name("D"),
      "activation dtype (default bf16); fp8: BF16 activations with the linear layers' GEMMs in "
      "FP8, as Transformer Engine runs them")(
      "fp8-recipe", po::value(&o.query.fp8_recipe)->value_name("R"),
      "with --dtype fp8: delayed (default), current, blockwise or mxfp8")(
      "tp", AtLeastValue(&o.query.tensor_parallel, 1, "tp")->value_name("T"),
      "tensor-parallel size (default 1)")("sp", po::bool_switch(&o.query.sequence_parallel),
                                          "sequence parallelism")(
      "flash", po::bool_switch(&o.query.flash_attention), "fused (flash) attention")(
      "no-dropout", po::bool_switch(&o.no_dropout), "train without dropout")(
      "recompute", po::value(&o.query.recompute)->value_name("R"),
      "none, selective, full or selective_op")(
      "recompute-modules", po::value(&o.query.recompute_modules)->value_name("LIST"),
      "with --recompute selective: the modules it re-runs, comma-separated (Megatron-Core's "
      "--recompute-modules: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, "
      "shared_experts; default core_attn)")(
      "layer", po::value(&o.query.layer)->value_name("N"),
      "the transformer layer shown, from 0 (default 0; a MoE model's first MoE layer follows "
      "its dense ones)")("ops", po::bool_switch(&o.ops), "list every op of the layer")(
      "output,o", po::value(&o.result_path)->value_name("FILE"),
      "write the model, its parameters and the layer's ops as JSON "
      "(docs/formats/model-report.md)")("quiet,q", po::bool_switch(&o.quiet),
                                        "print nothing on success");
  return description;
}

std::string Billions(int64_t count) {
  return fmt::format("{:.3f} B", static_cast<double>(count) / 1e9);
}

void PrintParameters(std::ostream& out, const results::ModelReport& report) {
  const models::ParameterCount& count = report.parameters;
  fmt::print(out, "parameters  {} total: embedding {}, layers {}, output {}", Billions(count.total),
             Billions(count.embedding), Billions(count.layers), Billions(count.output));
  if (count.active != count.total) fmt::print(out, "; active per token {}", Billions(count.active));
  if (count.mtp > 0) {
    fmt::print(out, "; and {} in {} multi-token-prediction module(s)", Billions(count.mtp),
               report.model.transformer.mtp_layers);
  }
  fmt::print(out, "\n");
}

void PrintOps(std::ostream& out, const std::vector<results::PricedOp>& ops) {
  for (const results::PricedOp& priced : ops) {
    const models::Op& op = priced.op;
    fmt::print(out, "  {:<24} {:<9} {:>10.3f} {:>10.3f} {:>10.1f} {:>10.3f}\n", op.name,
               models::PassName(op.pass), op.flops / 1e9, op.bytes / 1e6, priced.seconds * 1e6,
               static_cast<double>(op.saved_bytes) / 1e6);
  }
}

void PrintLayer(std::ostream& out, const results::LayerReport& layer, bool each) {
  const models::TransformerShard& shard = layer.shard;
  fmt::print(out,
             "layer {} on one of {} tensor-parallel ranks: micro-batch {} × sequence {}, {}{}{}; "
             "{} roofline\n",
             layer.layer, shard.tensor_parallel, shard.micro_batch, shard.seq_len, layer.dtype,
             shard.sequence_parallel ? ", sequence parallel" : "",
             shard.flash_attention ? ", flash attention" : "", layer.gpu);
  if (each) {
    fmt::print(out, "  {:<24} {:<9} {:>10} {:>10} {:>10} {:>10}\n", "op", "pass", "GFLOP", "MB",
               "time us", "saved MB");
    PrintOps(out, layer.forward);
    PrintOps(out, layer.backward);
    PrintOps(out, layer.recompute_ops);
  }
  for (const auto& [name, totals] : {std::pair{"forward", layer.forward_totals},
                                     {"backward", layer.backward_totals},
                                     {"recompute", layer.recompute_totals}}) {
    fmt::print(out, "  {:<9} {:>10.3f} GFLOP ({:.3f} model)  {:>10.3f} MB  {:>9.3f} ms\n", name,
               totals.flops / 1e9, totals.model_flops / 1e9, totals.bytes / 1e6,
               totals.seconds * 1e3);
  }
  fmt::print(out, "  activations kept per layer and micro-batch ({} recompute): {:.3f} MB\n",
             layer.recompute_policy, static_cast<double>(layer.activation_bytes) / 1e6);
}

void PrintModel(std::ostream& out, const results::ModelReport& report) {
  const models::ModelSpec& model = report.model;
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
    if (t.moe.enabled()) {
      fmt::print(
          out, "            MoE on {} of {} layers{}{}\n", t.MoeLayerCount(), t.layers,
          t.moe.first_dense_layers > 0 ? fmt::format(" after {} dense", t.moe.first_dense_layers)
                                       : "",
          t.moe.shared_experts > 0 ? fmt::format(", {} shared expert(s)", t.moe.shared_experts)
                                   : "");
    }
    if (t.sliding_window > 0) {
      if (t.chunked_attention) {
        fmt::print(out, "            attention in chunks of {} tokens on {} of {} layers\n",
                   t.sliding_window, t.WindowedLayers(), t.layers);
      } else {
        fmt::print(out, "            sliding window of {} keys on {} of {} layers\n",
                   t.sliding_window, t.WindowedLayers(), t.layers);
      }
    }
    fmt::print(out, "            KV cache {} bytes per token in bf16\n",
               report.kv_cache_bytes_per_token);
  }
  PrintParameters(out, report);
}

// The API names its errors after ModelQuery's fields; the command line's after its options.
Error AsOption(Error error) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kOptions = {
      {{"seq_len", "--seq"},
       {"micro_batch", "--micro-batch"},
       {"dtype", "--dtype"},
       {"fp8_recipe", "--fp8-recipe"},
       {"recompute", "--recompute"},
       {"recompute_modules", "--recompute-modules"},
       {"layer", "--layer"},
       {"gpu", "--gpu"}}};
  for (const auto& [field, option] : kOptions) {
    if (error.location() == field) {
      return Error(error.message(), std::string(option), error.value()).InFile(error.file());
    }
  }
  return error;
}

Status Execute(const ModelOptions& o, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs({o.model}, {o.result_path}));
  api::ModelQuery query = o.query;
  query.dropout = !o.no_dropout;
  Expected<results::ModelReport> report = api::DescribeModel({.name = o.model}, query);
  if (!report.ok()) return AsOption(std::move(report).error());
  if (!o.result_path.empty()) {
    DTSIM_RETURN_IF_ERROR(
        results::WriteResultFile(o.result_path, results::ModelReportJson(*report)));
  }
  if (o.quiet) return Status::Ok();
  PrintModel(out, *report);
  if (report->layer) PrintLayer(out, *report->layer, o.ops);
  return Status::Ok();
}

}  // namespace

CommandOutcome ModelCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("model", {args.begin(), args.end()});
  ModelOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "model", options.model, options.help,
                        "missing the MODEL", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
