#include "tools/results/model_report.h"

#include "tools/results/provenance.h"

namespace dtsim::results {
namespace {

OrderedJson Architecture(const models::ModelSpec& model) {
  OrderedJson out{{"name", model.name}, {"family", models::ModelFamilyName(model.family)}};
  if (model.family != models::ModelFamily::kTransformer) return out;
  const models::TransformerSpec& t = model.transformer;
  out.update(OrderedJson{{"layers", t.layers},
                         {"hidden", t.hidden},
                         {"heads", t.heads},
                         {"kv_heads", t.kv_heads},
                         {"head_dim", t.head_dim()},
                         {"ffn_hidden", t.ffn_hidden},
                         {"activation", models::ActivationName(t.activation)},
                         {"vocab", t.vocab},
                         {"norm", models::NormName(t.norm)},
                         {"position", models::PositionEmbeddingName(t.position)},
                         {"max_seq", t.max_seq}});
  if (t.moe.enabled()) {
    out["moe"] = {
        {"experts", t.moe.experts},
        {"top_k", t.moe.top_k},
        {"every", t.moe.every},
        {"expert_ffn_hidden", t.moe.expert_ffn_hidden > 0 ? t.moe.expert_ffn_hidden : t.ffn_hidden},
        {"shared_experts", t.moe.shared_experts},
        {"first_dense_layers", t.moe.first_dense_layers},
        {"moe_layers", t.MoeLayerCount()}};
    if (!t.moe.layers.empty()) out["moe"]["layers"] = t.moe.layers;
  }
  if (t.mla.enabled()) {
    out["mla"] = {{"q_lora_rank", t.mla.q_lora_rank},
                  {"kv_lora_rank", t.mla.kv_lora_rank},
                  {"qk_nope_head_dim", t.mla.qk_nope_head_dim},
                  {"qk_rope_head_dim", t.mla.qk_rope_head_dim},
                  {"v_head_dim", t.mla.v_head_dim}};
  }
  if (t.sliding_window > 0) {
    OrderedJson window = {{"tokens", t.sliding_window}, {"windowed_layers", t.WindowedLayers()}};
    if (t.chunked_attention) window["chunked"] = true;
    if (!t.window_layers.empty()) {
      window["pattern"] = t.window_layers;
    } else if (t.window_full_every > 0) {
      window["pattern"] = t.window_full_every;
    }
    out["sliding_window"] = std::move(window);
  }
  if (t.mtp_layers > 0) out["mtp_layers"] = t.mtp_layers;
  return out;
}

OrderedJson Totals(const PassTotals& t) {
  return {{"flops", t.flops},
          {"model_flops", t.model_flops},
          {"bytes", t.bytes},
          {"seconds", t.seconds}};
}

OrderedJson Ops(const std::vector<PricedOp>& ops) {
  OrderedJson out = OrderedJson::array();
  for (const PricedOp& priced : ops) {
    const models::Op& op = priced.op;
    out.push_back({{"name", op.name},
                   {"kind", models::OpKindName(op.kind)},
                   {"pass", models::PassName(op.pass)},
                   {"flops", op.flops},
                   {"model_flops", op.model_flops},
                   {"bytes", op.bytes},
                   {"seconds", priced.seconds},
                   {"saved_bytes", op.saved_bytes}});
  }
  return out;
}

OrderedJson Layer(const LayerReport& layer) {
  const models::TransformerShard& shard = layer.shard;
  return {{"layer", layer.layer},
          {"gpu", layer.gpu},
          {"micro_batch", shard.micro_batch},
          {"seq_len", shard.seq_len},
          {"dtype", layer.dtype},
          {"tensor_parallel", shard.tensor_parallel},
          {"sequence_parallel", shard.sequence_parallel},
          {"flash_attention", shard.flash_attention},
          {"dropout", shard.dropout},
          {"recompute", layer.recompute},
          {"recompute_policy", layer.recompute_policy},
          {"totals",
           {{"forward", Totals(layer.forward_totals)},
            {"backward", Totals(layer.backward_totals)},
            {"recompute", Totals(layer.recompute_totals)}}},
          {"activation_bytes", layer.activation_bytes},
          {"ops",
           {{"forward", Ops(layer.forward)},
            {"backward", Ops(layer.backward)},
            {"recompute", Ops(layer.recompute_ops)}}}};
}

}  // namespace

OrderedJson ModelReportJson(const ModelReport& report) {
  const models::ParameterCount& p = report.parameters;
  OrderedJson document = FormatHeader(kModelReportFormat);
  document["model"] = Architecture(report.model);
  document["parameters"] = {{"total", p.total},   {"embedding", p.embedding}, {"layers", p.layers},
                            {"output", p.output}, {"active", p.active},       {"expert", p.expert},
                            {"mtp", p.mtp}};
  if (report.model.family == models::ModelFamily::kTransformer) {
    document["kv_cache_bytes_per_token"] = report.kv_cache_bytes_per_token;
  }
  document["layer"] = report.layer ? Layer(*report.layer) : OrderedJson();
  document["provenance"] = ProvenanceJson();
  return document;
}

}  // namespace dtsim::results
