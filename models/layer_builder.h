// Internal to models/: builds a forward op list and the backward list it implies.
#pragma once

#include <optional>
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
    last_begin_ = ops_.forward.size();
    return Append(std::move(op), saved_bytes, std::move(backward));
  }

  // An FP8 linear's casts (Transformer Engine): its input quantized in forward, the gradient of
  // its output in backward, each at `bytes_per_element` (Fp8QuantizeBytes).
  struct Fp8Casts {
    int64_t input_elements = 0;
    int64_t grad_elements = 0;
    double bytes_per_element = 0;
  };

  // A GEMM with a weight: x (m×k) · W (k×n), `batch` times (MoE: local experts; SUMMA: the q
  // steps over k-blocks). Backward: dgrad dx = dy·Wᵀ, wgrad dW = xᵀ·dy. `model_share` scales
  // the FLOPs MFU counts (MoE experts: routed / capacity-padded tokens). With `fp8` the three
  // GEMMs run in FP8 after the casts it names (the input's before the forward GEMM, the output
  // gradient's before the backward ones), and the forward records the weight it quantizes.
  Op& Linear(std::string_view name, DType dtype, int64_t m, int64_t n, int64_t k,
             double saved_bytes, int64_t batch = 1, double model_share = 1.0,
             const std::optional<Fp8Casts>& fp8 = std::nullopt) {
    const size_t begin = ops_.forward.size();
    const DType gemm_dtype = fp8 ? DType::kFp8 : dtype;
    std::vector<Op> backward;
    if (fp8) {
      Append(Op::Streaming(Name(name) + ".quantize", OpKind::kQuantize, Pass::kForward, dtype,
                           fp8->input_elements, fp8->bytes_per_element),
             0, {});
      backward.push_back(Op::Streaming(Name(name) + ".grad_quantize", OpKind::kQuantize,
                                       Pass::kBackward, dtype, fp8->grad_elements,
                                       fp8->bytes_per_element));
    }
    backward.push_back(WeightGemm(Name(name) + ".dgrad", Pass::kBackward, gemm_dtype, {m, k, n},
                                  batch, Op::WeightGemm::kDgrad, model_share, m * k, k * n));
    backward.push_back(WeightGemm(Name(name) + ".wgrad", Pass::kBackward, gemm_dtype, {k, n, m},
                                  batch, Op::WeightGemm::kWgrad, model_share, m * k, k * n));
    Op forward = WeightGemm(Name(name), Pass::kForward, gemm_dtype, {m, n, k}, batch,
                            Op::WeightGemm::kForward, model_share, m * k, k * n);
    if (fp8) forward.fp8_weight_elements = k * n * batch;
    forward.output_bytes = m * n * batch * DTypeBytes(dtype);  // in the activation dtype
    Op& added = Append(std::move(forward), saved_bytes, std::move(backward));
    last_begin_ = begin;
    return added;
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

  // The widths of the tensor-parallel boundaries Boundaries() set, forward and backward
  // (Op::reduce_columns and Op::gather_columns; 0: the hidden size).
  struct Widths {
    int64_t reduce = 0;
    int64_t gather = 0;
  };
  void BoundaryWidths(Widths forward, Widths backward) {
    Op& op = ops_.forward.back();
    op.reduce_columns = forward.reduce;
    op.gather_columns = forward.gather;
    Op& last = pending_.back().back();
    last.reduce_columns = backward.reduce;
    last.gather_columns = backward.gather;
  }

  // Marks the last Linear as column-parallel over a sequence-parallel input saved as its shard:
  // its dgrad runs beside the all-gather of the `bytes` each rank holds (Op::regather_bytes).
  void RegatherInput(int64_t bytes) {
    for (Op& op : pending_.back()) {
      if (op.weight_gemm == Op::WeightGemm::kDgrad) op.regather_bytes = bytes;
    }
  }

  // Marks the ops the last Forward, Linear or Stream added (an FP8 linear's casts too), and
  // their backward ops, as an expert's.
  void MarkExpert() {
    for (size_t i = last_begin_; i < ops_.forward.size(); ++i) {
      ops_.forward[i].expert = true;
      for (Op& op : pending_[i]) op.expert = true;
    }
  }

  LayerOps Finish() && {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      for (Op& op : *it) ops_.backward.push_back(std::move(op));
    }
    return std::move(ops_);
  }

 private:
  struct Dims {
    int64_t m, n, k;
  };

  // One of a weight's GEMMs, with its role and operand blocks (Op::WeightGemm).
  static Op WeightGemm(std::string name, Pass pass, DType dtype, Dims dims, int64_t batch,
                       Op::WeightGemm role, double model_share, int64_t activation_block,
                       int64_t weight_block) {
    Op op = Op::Gemm(std::move(name), pass, dtype, dims.m, dims.n, dims.k, batch);
    op.weight_gemm = role;
    op.model_flops *= model_share;
    op.activation_block = activation_block;
    op.weight_block = weight_block;
    return op;
  }

  Op& Append(Op op, double saved_bytes, std::vector<Op> backward) {
    op.saved_bytes = static_cast<int64_t>(saved_bytes);
    ops_.forward.push_back(std::move(op));
    pending_.push_back(std::move(backward));
    return ops_.forward.back();
  }

  std::string prefix_;
  LayerOps ops_;
  std::vector<std::vector<Op>> pending_;
  size_t last_begin_ = 0;  // the first forward op of the last Forward, Linear or Stream
};

}  // namespace dtsim::models
