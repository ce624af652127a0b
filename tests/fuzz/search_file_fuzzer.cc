// `dtsim search --merge SHARD.json...`: a search result file (one shard's), and the merge of
// the shards it completes (itself, or itself and a copy as the other of two shards).
#include "tests/fuzz/fuzz_support.h"
#include "tools/results/search_results.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string path = fuzz::ScratchFile("shard.json", fuzz::Text(data, size));
  Expected<results::SearchFile> file = results::ReadSearchFile(path);
  if (!fuzz::Succeeded(file)) return 0;
  std::vector<results::SearchFile> shards = {*file};
  if (file->shards == 2) {
    shards.push_back(*file);
    shards.back().shard = 3 - file->shard;
  }
  (void)fuzz::Succeeded(results::MergeSearchFiles(std::move(shards), /*rerank=*/0));
  return 0;
}
