// Internal to models/: builds a forward op list and the backward list it implies.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/ops.h"

namespace dtsim::models {

// Collects a forward list and, per forward op, the backward ops it implies; the backward list
// is their reverse.
class LayerBuilder {
 public:
  explicit LayerBuilder(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string Name(std::string_view name) const { return prefix_ + std::string(name); }

  Op& Forward(Op op, double saved_bytes, std::vector<Op> backward) {
    op.saved_bytes = static_cast<int64_t>(saved_bytes);
    ops_.forward.push_back(std::move(op));
    pending_.push_back(std::move(backward));
    return ops_.forward.back();
  }

  // A GEMM with a weight: x (m×k) · W (k×n), `batch` times (MoE: local experts; SUMMA: the q
  // steps over k-blocks). Backward: dgrad dx = dy·Wᵀ, wgrad dW = xᵀ·dy. `model_share` scales
  // the FLOPs MFU counts (MoE experts: routed / capacity-padded tokens).
  Op& Linear(std::string_view name, DType dtype, int64_t m, int64_t n, int64_t k,
             double saved_bytes, int64_t batch = 1, double model_share = 1.0) {
    std::vector<Op> backward;
    backward.push_back(Op::Gemm(Name(name) + ".dgrad", Pass::kBackward, dtype, m, k, n, batch));
    backward.back().weight_gemm = Op::WeightGemm::kDgrad;
    backward.push_back(Op::Gemm(Name(name) + ".wgrad", Pass::kBackward, dtype, k, n, m, batch));
    backward.back().weight_gemm = Op::WeightGemm::kWgrad;
    Op forward = Op::Gemm(Name(name), Pass::kForward, dtype, m, n, k, batch);
    forward.weight_gemm = Op::WeightGemm::kForward;
    for (Op* op : {&forward, &backward[0], &backward[1]}) {
      op->model_flops *= model_share;
      op->activation_block = m * k;
      op->weight_block = k * n;
    }
    return Forward(std::move(forward), saved_bytes, std::move(backward));
  }

  // An elementwise op over `elements`, with its forward and backward bytes per element.
  Op& Stream(std::string_view name, OpKind kind, DType dtype, int64_t elements,
             double forward_bytes, double backward_bytes, double saved_bytes) {
    std::vector<Op> backward;
    backward.push_back(
        Op::Streaming(Name(name) + ".bwd", kind, Pass::kBackward, dtype, elements, backward_bytes));
    return Forward(Op::Streaming(Name(name), kind, Pass::kForward, dtype, elements, forward_bytes),
                   saved_bytes, std::move(backward));
  }

  // Marks the op added last: the collective after it in forward (and recompute) and after the
  // last of its backward ops (a GEMM's wgrad, an elementwise op's backward).
  void Boundaries(Op::Boundary forward, Op::Boundary backward) {
    ops_.forward.back().boundary = forward;
    pending_.back().back().boundary = backward;
  }

  // Marks the op added last, and its backward ops, as an expert's.
  void MarkExpert() {
    ops_.forward.back().expert = true;
    for (Op& op : pending_.back()) op.expert = true;
  }

  LayerOps Finish() && {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      for (Op& op : *it) ops_.backward.push_back(std::move(op));
    }
    return std::move(ops_);
  }

 private:
  std::string prefix_;
  LayerOps ops_;
  std::vector<std::vector<Op>> pending_;
};

}  // namespace dtsim::models
