#include "models/recompute_modules.h"

#include <algorithm>
#include <string_view>

namespace dtsim::models {

// Megatron-Core's selective recompute modules (RecomputeModule) over a layer's forward ops, by
// the names the builders give them (an FP8 linear's input cast goes with its GEMM):
// core_attn re-runs and frees the core attention (the ops flagged core_attention); layernorm
// re-runs the two pre-norms and frees their outputs where the GEMMs after them save them
// (attn.qkv's, MLA's q/q_down's, mlp.fc1's, the router's input); mla_up_proj re-runs the query and
// key/value up-projections and frees the Q, K, V they save for the core attention; mlp re-runs a
// dense layer's MLP with its pre-norm (Transformer Engine fuses it into fc1) and frees all but the
// norm's saved input, the module's; moe re-runs the MoE block from the router on and frees all
// but the router's saved input; moe_act re-runs the experts' activation and frees its output,
// which fc2 saves; shared_experts re-runs the shared experts and frees what they save.
void TagRecomputeModules(LayerOps& ops) {
  const bool moe_layer = std::any_of(ops.forward.begin(), ops.forward.end(),
                                     [](const Op& op) { return op.name == "moe.router"; });
  for (Op& op : ops.forward) {
    std::string_view name = op.name;
    const bool cast = name.ends_with(".quantize");
    if (cast) name.remove_suffix(std::string_view(".quantize").size());
    if (op.weight_gemm == Op::WeightGemm::kForward) {
      const bool saves_output =
          name == "attn.qkv" || name == "attn.q" || name == "attn.q_up" || name == "attn.kv_up";
      op.saved_input_bytes =
          saves_output ? std::max<int64_t>(op.saved_bytes - op.output_bytes, 0) : op.saved_bytes;
    }
    if (op.core_attention) {
      op.reruns_in |= kRecomputeCoreAttn;
      op.frees_all_in |= kRecomputeCoreAttn;
    }
    if (name == "attn.norm" || name == "mlp.norm") op.reruns_in |= kRecomputeLayerNorm;
    // The GEMMs whose saved input is a pre-norm's output (a MoE block's router saves it for
    // the shared experts too).
    if (!cast && (name == "attn.qkv" || name == "attn.q" || name == "attn.q_down" ||
                  name == "mlp.fc1" || name == "moe.router")) {
      op.frees_input_in |= kRecomputeLayerNorm;
    }
    if (name == "attn.q_up" || name == "attn.kv_up") {
      op.reruns_in |= kRecomputeMlaUpProj;
      op.frees_output_in |= kRecomputeMlaUpProj;
    }
    const bool layer_op = name == "mlp.residual" || name == "mlp.post_norm";  // not the MLP's
    if (!moe_layer && name.starts_with("mlp.") && !layer_op) {
      op.reruns_in |= kRecomputeMlp;
      if (name != "mlp.norm") op.frees_all_in |= kRecomputeMlp;
    }
    if (name.starts_with("moe.")) {
      op.reruns_in |= kRecomputeMoe;
      if (name != "moe.router") op.frees_all_in |= kRecomputeMoe;
    }
    if (name == "moe.expert.act") op.reruns_in |= kRecomputeMoeAct;
    if (name == "moe.expert.fc2" && !cast) op.frees_input_in |= kRecomputeMoeAct;
    if (name.starts_with("moe.shared.")) {
      op.reruns_in |= kRecomputeSharedExperts;
      op.frees_all_in |= kRecomputeSharedExperts;
    }
  }
}

}  // namespace dtsim::models
