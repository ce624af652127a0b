// Op decompositions of the non-transformer presets: a bottleneck ResNet (convolutions as
// implicit GEMMs) and DLRM (embedding bags, MLPs, dot-product interaction).
#include <fmt/format.h>

#include <algorithm>

#include "models/layer_builder.h"
#include "models/ops.h"
#include "models/resnet.h"

namespace dtsim::models {
namespace {

// A convolution priced as the implicit GEMM cuDNN runs: M = batch·out², N = C_out,
// K = C_in·r². Its signature keeps the convolution's own shape for measured tables.
void Conv(LayerBuilder& layer, const ConvLayer& conv, int64_t batch, DType dtype) {
  const int64_t m = batch * conv.out_size * conv.out_size;
  const int64_t k = conv.in_channels * conv.kernel * conv.kernel;
  traces::OpSignature signature{.op = "conv2d", .dtype = dtype, .dims = {}};
  signature.SetDim("batch", batch);
  signature.SetDim("in_channels", conv.in_channels);
  signature.SetDim("out_channels", conv.out_channels);
  signature.SetDim("size", conv.in_size);
  signature.SetDim("kernel", conv.kernel);
  signature.SetDim("stride", conv.stride);
  std::vector<Op> backward;
  backward.push_back(
      Op::Gemm(conv.name + ".dgrad", Pass::kBackward, dtype, m, k, conv.out_channels));
  backward.push_back(
      Op::Gemm(conv.name + ".wgrad", Pass::kBackward, dtype, k, conv.out_channels, m));
  backward[0].signature = signature;
  backward[0].signature.op = "conv2d_dgrad";
  backward[1].signature = signature;
  backward[1].signature.op = "conv2d_wgrad";
  Op forward = Op::Gemm(conv.name, Pass::kForward, dtype, m, conv.out_channels, k);
  forward.signature = std::move(signature);
  forward.weight_gemm = Op::WeightGemm::kForward;
  backward[0].weight_gemm = Op::WeightGemm::kDgrad;
  backward[1].weight_gemm = Op::WeightGemm::kWgrad;
  for (Op* op : {&forward, &backward[0], &backward[1]}) {
    op->activation_block = m * k;
    op->weight_block = k * conv.out_channels;
  }
  const double input = static_cast<double>(batch) * conv.in_channels * conv.in_size * conv.in_size;
  layer.Forward(std::move(forward), DTypeBytes(dtype) * input, std::move(backward));
}

void MlpChain(LayerBuilder& layer, std::string_view prefix, int64_t batch, int64_t input,
              const std::vector<int64_t>& widths, DType dtype) {
  const double e = DTypeBytes(dtype);
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string name = fmt::format("{}.fc{}", prefix, i);
    layer.Linear(name, dtype, batch, widths[i], input, e * batch * input);
    layer.Stream(name + ".relu", OpKind::kActivation, dtype, batch * widths[i], 2 * e, 3 * e, 0);
    input = widths[i];
  }
}

}  // namespace

LayerOps ResNetOps(const ResNetSpec& spec, int64_t micro_batch, DType dtype) {
  const double e = DTypeBytes(dtype);
  LayerBuilder layer("");
  for (const ConvLayer& conv : ResNetConvs(spec)) {
    Conv(layer, conv, micro_batch, dtype);
    const int64_t elements = micro_batch * conv.out_channels * conv.out_size * conv.out_size;
    // BatchNorm saves its input; ReLU's output is the next convolution's saved input.
    layer.Stream(conv.name + ".bn", OpKind::kBatchNorm, dtype, elements, 2 * e, 3 * e,
                 e * elements);
    if (conv.residual_end) {
      layer.Stream(conv.name + ".residual", OpKind::kElementwise, dtype, elements, 3 * e, 3 * e, 0);
    }
    if (conv.name.find("downsample") == std::string::npos) {
      layer.Stream(conv.name + ".relu", OpKind::kActivation, dtype, elements, 2 * e, 3 * e, 0);
    }
    if (conv.name == "stem") {
      const int64_t pooled =
          micro_batch * conv.out_channels * ResNetPooledSize(spec) * ResNetPooledSize(spec);
      // Max pool reads the stem's output and keeps it (plus indices) for its backward.
      layer.Stream("stem.maxpool", OpKind::kPool, dtype, elements, e + e * pooled / elements, 2 * e,
                   e * elements);
    }
  }
  const int64_t features = ResNetFeatures(spec);
  const int64_t last = ResNetPooledSize(spec) >> (spec.blocks.size() - 1);
  layer.Stream("avgpool", OpKind::kPool, dtype, micro_batch * features * last * last, e, e, 0);
  layer.Linear("fc", dtype, micro_batch, spec.classes, features, e * micro_batch * features);
  layer.Stream("loss", OpKind::kCrossEntropy, dtype, micro_batch * spec.classes, e + 4, 4 + e,
               4.0 * micro_batch * spec.classes);
  return std::move(layer).Finish();
}

namespace {

// A table's bag: `rows_read` rows of `dim` read, `outputs` pooled vectors written; its backward
// scatters the output gradient into those rows (read the gradient, read and write each row) and,
// fused, updates the optimizer's `state_bytes` per element of those rows.
void EmbeddingBag(LayerBuilder& layer, const DlrmSpec& spec, const TableLookup& lookup, DType dtype,
                  double state_bytes) {
  const double e = DTypeBytes(dtype);
  const int64_t dim = spec.embedding_dim;
  const int64_t elements = std::max<int64_t>(lookup.rows_read, 1) * dim;
  const double written = e * static_cast<double>(lookup.outputs) /
                         static_cast<double>(std::max<int64_t>(lookup.rows_read, 1));
  Op bag = Op::Streaming(fmt::format("embedding.table{}", lookup.table), OpKind::kEmbedding,
                         Pass::kForward, dtype, elements, e + written);
  bag.signature.SetDim("rows", spec.table_rows[static_cast<size_t>(lookup.table)]);
  std::vector<Op> grad;
  grad.push_back(Op::Streaming(fmt::format("embedding.table{}.grad", lookup.table),
                               OpKind::kEmbedding, Pass::kBackward, dtype, elements,
                               3 * e + 2 * state_bytes));
  layer.Forward(std::move(bag), 8.0 * static_cast<double>(lookup.rows_read), std::move(grad));
}

}  // namespace

LayerOps DlrmEmbeddingOps(const DlrmSpec& spec, std::span<const TableLookup> lookups, DType dtype,
                          double state_bytes) {
  LayerBuilder layer("");
  for (const TableLookup& lookup : lookups) EmbeddingBag(layer, spec, lookup, dtype, state_bytes);
  return std::move(layer).Finish();
}

LayerOps DlrmOps(const DlrmSpec& spec, int64_t micro_batch, DType dtype) {
  const double e = DTypeBytes(dtype);
  LayerBuilder layer("");
  MlpChain(layer, "bottom", micro_batch, spec.dense_features, spec.bottom_mlp, dtype);
  const int64_t dim = spec.embedding_dim;
  for (size_t i = 0; i < spec.table_rows.size(); ++i) {
    // Each sample reads lookups_per_table rows of each table and writes their sum.
    const int64_t rows_read = micro_batch * spec.lookups_per_table;
    EmbeddingBag(layer, spec,
                 {.table = static_cast<int>(i), .rows_read = rows_read, .outputs = micro_batch},
                 dtype, 0);
  }
  // Interaction: a batched Z·Zᵀ over the F = tables + 1 vectors of each sample, then the upper
  // triangle concatenated with the bottom MLP's output.
  const auto vectors = static_cast<int64_t>(spec.table_rows.size()) + 1;
  std::vector<Op> interaction_backward;
  interaction_backward.push_back(
      Op::Gemm("interaction.dz", Pass::kBackward, dtype, vectors, dim, vectors, micro_batch));
  interaction_backward.push_back(
      Op::Gemm("interaction.dzt", Pass::kBackward, dtype, vectors, dim, vectors, micro_batch));
  layer.Forward(Op::Gemm("interaction", Pass::kForward, dtype, vectors, vectors, dim, micro_batch),
                e * micro_batch * vectors * dim, std::move(interaction_backward));
  layer.Stream("interaction.concat", OpKind::kElementwise, dtype,
               micro_batch * spec.InteractionWidth(), 2 * e, 2 * e, 0);
  MlpChain(layer, "top", micro_batch, spec.InteractionWidth(), spec.top_mlp, dtype);
  layer.Stream("loss", OpKind::kCrossEntropy, dtype, micro_batch, e + 4, 4 + e, 4.0 * micro_batch);
  return std::move(layer).Finish();
}

}  // namespace dtsim::models
