#include "traces/chakra_conventions.h"

#include <algorithm>

#include "traces/chakra_attrs.h"

namespace dtsim::traces {

ChakraConventions DetectChakraConventions(const ChakraTrace& trace) {
  const ChakraAttribute* schema = trace.MetadataAttr("schema");
  if (schema != nullptr && schema->AsString() == "symbolic_tensor_network") {
    return {.producer = "STAGE", .sizes_in_elements = true, .einsum_ops_are_multiply_adds = true};
  }
  return {};
}

std::optional<ChakraComputeWork> ChakraNodeWork(const ChakraNode& node,
                                                const ChakraConventions& conventions,
                                                int64_t element_bytes) {
  const std::optional<int64_t> ops = chakra::IntegerAttr(node, "num_ops");
  if (!ops || *ops < 0) return std::nullopt;
  const double size = static_cast<double>(
      std::max<int64_t>(0, chakra::IntegerAttr(node, "tensor_size").value_or(0)));
  const bool einsum = chakra::StringAttr(node, "op_type") == "M";
  ChakraComputeWork work;
  work.flops = static_cast<double>(*ops);
  work.bytes = size;
  work.matmul = conventions.producer.empty() || einsum;
  if (conventions.einsum_ops_are_multiply_adds && einsum) work.flops *= 2;
  if (conventions.sizes_in_elements) work.bytes *= static_cast<double>(element_bytes);
  return work;
}

}  // namespace dtsim::traces
