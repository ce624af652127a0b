// `dtsim replay --comm-groups FILE`: ASTRA-sim's comm group file {"<pg_name>": [rank, ...]}.
#include "tests/fuzz/fuzz_support.h"
#include "traces/chakra_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string path = fuzz::ScratchFile("comm_groups.json", fuzz::Text(data, size));
  (void)fuzz::Succeeded(traces::ReadChakraCommGroups(path));
  return 0;
}
