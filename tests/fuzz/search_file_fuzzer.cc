// `dtsim search --merge SHARD.json... --top 2 --emit DIR`, as a user runs it on search files: one
// shard's file merged with the shards it completes (itself, or itself and a copy as the other
// of two shards), then what the command does with the merge: the counts, the top plans and why
// the best wins printed, and the best two emitted as dtsim configs (each read back) and as
// Megatron-LM, DeepSpeed and Megatron-Bridge arguments, into a scratch directory.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "sim/base/json_reader.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/cli/search_command.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string_view text = fuzz::Text(data, size);
  const std::string path = fuzz::ScratchFile("shard.json", text);
  std::vector<std::string> args = {"--merge", path};
  const Expected<Json> json = ParseJson(text, path);
  if (json.ok() && json->is_object() && json->contains("shard") && json->contains("shards") &&
      (*json)["shards"] == 2 && ((*json)["shard"] == 1 || (*json)["shard"] == 2)) {
    Json other = *json;
    other["shard"] = (*json)["shard"] == 1 ? 2 : 1;
    args.push_back(fuzz::ScratchFile("shard_other.json",
                                     other.dump(-1, ' ', false, Json::error_handler_t::replace)));
  }
  const std::string emit = (std::filesystem::path(path).parent_path() / "plans").string();
  args.insert(args.end(), {"--top", "2", "--emit", emit});
  std::ostringstream out;
  const cli::CommandOutcome outcome = cli::SearchCommand(args, out);
  if (outcome.kind != cli::CommandOutcome::Kind::kOk) {
    if (!outcome.error) __builtin_trap();  // a failure must say why
    fuzz::CheckError(*outcome.error);
  }
  return 0;
}
