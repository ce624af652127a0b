// An op-cost table (docs/formats/op-costs.md), as a config's "profile" names it: the reader,
// then what a simulation asks of it: every op of a GPT-2 layer and its embedding and output
// priced through the measured ▸ interpolated ▸ roofline chain, and the GEMM efficiency fit.
#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "sim/base/json_reader.h"
#include "tests/fuzz/fuzz_support.h"
#include "traces/op_cost_table.h"

namespace {

std::vector<dtsim::models::Op> PricedOps() {
  using namespace dtsim::models;  // NOLINT(google-build-using-namespace)
  const ModelSpec model = *ModelPreset("gpt2-124m");
  const TransformerShard shard{.micro_batch = 2, .seq_len = 1024, .tensor_parallel = 2};
  std::vector<Op> ops;
  for (const LayerOps& layer :
       {TransformerLayerOps(model.transformer, 0, shard), EmbeddingOps(model.transformer, shard),
        OutputOps(model.transformer, shard)}) {
    ops.insert(ops.end(), layer.forward.begin(), layer.forward.end());
    ops.insert(ops.end(), layer.backward.begin(), layer.backward.end());
  }
  return ops;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  static const std::vector<models::Op> ops = PricedOps();
  static const models::GpuSpec gpu = *models::GpuPreset("h100-sxm5-80gb");
  const Expected<Json> json = ParseJson(fuzz::Text(data, size), "op_costs.json");
  if (!fuzz::Succeeded(json)) return 0;
  const Expected<traces::OpCostTable> table = traces::OpCostTableFromJson(*json);
  if (!fuzz::Succeeded(table)) return 0;
  (void)fuzz::Succeeded(models::FitMatrixEfficiency(*table, gpu, DType::kBf16));
  const Expected<std::unique_ptr<models::OpCostModel>> model =
      models::MakeCostModel("chain", gpu, &*table);
  if (!fuzz::Succeeded(model)) return 0;
  for (const models::Op& op : ops) {
    const std::optional<models::OpCost> cost = (*model)->Price(op);
    if (cost && cost->duration < DurationNs::Zero()) __builtin_trap();
  }
  return 0;
}
