// dtsim's commands as functions of JSON documents: what `dtsim simulate`, `dtsim sweep` and
// `dtsim search` compute, without a command line, printing or files. The commands in tools/cli
// and the Python module (tools/python) both call these, so a config gives the same result
// through either.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "tools/api/sweep_axes.h"
#include "tools/results/model_report.h"
#include "tools/results/search_results.h"
#include "tools/results/sweep_result.h"

namespace dtsim::api {

// The config a call reads: the file at `path`, or `document` (what such a file holds; its
// relative paths are taken from the working directory and its errors name no file), then the
// overrides ("a.b.c=VALUE", as `--set` reads them) in order.
struct ConfigInput {
  std::string path;
  std::optional<Json> document;
  std::vector<std::string> overrides;

  // The file errors and results name: the path, or "" for a document.
  const std::string& Source() const { return path; }
};

// The document after the overrides; errors name the file and the key.
Expected<Json> ReadConfigInput(const ConfigInput& input);

// Called from any thread as work completes; `phase` names the step ("simulating").
using ProgressCallback = std::function<void(std::string_view phase, size_t done, size_t total)>;

// `dtsim simulate`: the result document of docs/formats/simulate-result.md, with provenance
// (the caller resets the process's provenance record first: results/provenance.h).
Expected<OrderedJson> SimulateJson(const ConfigInput& input);

// `dtsim sweep`: the config simulated at every combination of the axes' values (the first axis
// changing slowest), on `threads` threads (0: every core). A point that fails keeps its error;
// the sweep fails only when every point does.
Expected<results::SweepDocument> RunSweep(const ConfigInput& input, const std::vector<Axis>& axes,
                                          int threads, const ProgressCallback& progress = {});

// How `dtsim search` runs (strategies::SearchOptions, as the command line gives it).
struct SearchCall {
  int gpus = 0;  // search for this many GPUs instead of cluster.nodes (0: the cluster's)
  int top = 10;
  int rerank = 3;
  int threads = 0;
  int shard = 1;
  int shards = 1;
  std::string ranks = "symmetric";  // or "full"
};

// `dtsim search`: every plan of the config's "search" space, evaluated and ranked, with the
// settings that identify the search (so shards merge). An empty search is an error naming the
// constraints that emptied it, unless this is one shard of several.
Expected<results::SearchFile> RunSearch(const ConfigInput& input, const SearchCall& call,
                                        const ProgressCallback& progress = {});

// What `dtsim model` shows of one layer (its options; docs/cli.md).
struct ModelQuery {
  std::string gpu = "a100-sxm4-80gb";
  int64_t micro_batch = 1;
  int64_t seq_len = 0;         // 0: the model's max_seq
  std::string dtype = "bf16";  // or "fp8": BF16 activations, the linear layers' GEMMs in FP8
  std::string fp8_recipe;      // with dtype "fp8" (empty: "delayed"); an error with another dtype
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  bool flash_attention = false;
  bool dropout = true;
  std::string recompute = "none";
  std::string recompute_modules;  // "core_attn,mlp" with selective; empty: the core attention
  int layer = 0;
};

// A model to describe: a preset name or a model JSON file at `name` (a name ending in .json, or
// one that exists as a file, is read as a file), or `document` (docs/models.md).
struct ModelInput {
  std::string name;
  std::optional<Json> document;
};

// `dtsim model`: the model's parameters and, for a transformer, the queried layer on one
// tensor-parallel rank priced on the GPU's roofline. Errors name the option ("--tp") or the
// model file's JSON path.
Expected<results::ModelReport> DescribeModel(const ModelInput& input, const ModelQuery& query);

}  // namespace dtsim::api
