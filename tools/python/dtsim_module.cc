// The `dtsim._dtsim` extension module (pybind11): dtsim's commands as functions of JSON text,
// for the Python package beside it (dtsim/__init__.py), which turns dicts into JSON and the
// outcome into a dict or a dtsim.Error. Each call runs with the GIL released; calls run one at
// a time (a result's provenance and the files it read are recorded per process), each on every
// core where the command is parallel.
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "tools/api/api.h"
#include "tools/api/replay.h"
#include "tools/results/model_report.h"
#include "tools/results/provenance.h"
#include "tools/results/search_results.h"
#include "tools/results/sweep_result.h"

namespace dtsim::python {
namespace {

namespace py = pybind11;

// (result JSON text, None) or (None, (text, message, path, value, file)).
using ErrorParts = std::tuple<std::string, std::string, std::string, std::string, std::string>;
using Outcome = std::tuple<std::optional<std::string>, std::optional<ErrorParts>>;

Outcome Failed(const Error& error) {
  return {std::nullopt, ErrorParts{error.ToString(), error.message(), error.location(),
                                   error.value(), error.file()}};
}

// The config a call names: JSON text (from a dict), else a file path.
Expected<api::ConfigInput> Input(const std::string& config_json, const std::string& path,
                                 std::vector<std::string> overrides) {
  api::ConfigInput input{.path = path, .overrides = std::move(overrides)};
  if (!config_json.empty()) {
    DTSIM_ASSIGN_OR_RETURN(input.document, ParseJson(config_json, ""));
  }
  return input;
}

// Held by every call: the process has one provenance record and one registry of input files.
std::mutex& CallLock() {
  static std::mutex lock;
  return lock;
}

// Runs `work` (returning Expected<OrderedJson>) without the GIL, one call at a time, as
// `command` in the result's provenance.
template <typename Work>
Outcome Run(const char* command, Work work) {
  const py::gil_scoped_release unlocked;
  const std::lock_guard<std::mutex> held(CallLock());
  ForgetInputFiles();
  results::ResetProvenance(command, {"(python)"});
  Expected<OrderedJson> result = work();
  if (!result.ok()) return Failed(result.error());
  return {DumpJson(*result), std::nullopt};
}

Outcome Simulate(const std::string& config_json, const std::string& path,
                 std::vector<std::string> overrides) {
  return Run("simulate", [&]() -> Expected<OrderedJson> {
    DTSIM_ASSIGN_OR_RETURN(const api::ConfigInput input,
                           Input(config_json, path, std::move(overrides)));
    return api::SimulateJson(input);
  });
}

Outcome Sweep(const std::string& config_json, const std::string& path,
              std::vector<std::string> overrides,
              const std::vector<std::pair<std::string, std::vector<std::string>>>& vary,
              int threads) {
  return Run("sweep", [&]() -> Expected<OrderedJson> {
    DTSIM_ASSIGN_OR_RETURN(const api::ConfigInput input,
                           Input(config_json, path, std::move(overrides)));
    std::vector<api::Axis> axes;
    axes.reserve(vary.size());
    for (const auto& [key, values] : vary) axes.push_back({.key = key, .values = values});
    DTSIM_ASSIGN_OR_RETURN(const results::SweepDocument sweep, api::RunSweep(input, axes, threads));
    return results::SweepJson(sweep);
  });
}

Outcome Search(const std::string& config_json, const std::string& path,
               std::vector<std::string> overrides, const api::SearchCall& call) {
  return Run("search", [&]() -> Expected<OrderedJson> {
    DTSIM_ASSIGN_OR_RETURN(const api::ConfigInput input,
                           Input(config_json, path, std::move(overrides)));
    DTSIM_ASSIGN_OR_RETURN(const results::SearchFile file, api::RunSearch(input, call));
    return results::SearchFileJson(file);
  });
}

Outcome Model(const std::string& model_json, const std::string& name,
              const api::ModelQuery& query) {
  return Run("model", [&]() -> Expected<OrderedJson> {
    api::ModelInput input{.name = name};
    if (!model_json.empty()) {
      DTSIM_ASSIGN_OR_RETURN(input.document, ParseJson(model_json, ""));
    }
    DTSIM_ASSIGN_OR_RETURN(const results::ModelReport report, api::DescribeModel(input, query));
    return results::ModelReportJson(report);
  });
}

Outcome Replay(std::vector<std::string> traces, const std::string& what_if_json,
               const std::string& what_if_path, const std::string& comm_groups,
               std::optional<int64_t> element_bytes) {
  return Run("replay", [&]() -> Expected<OrderedJson> {
    api::ReplayInput input{.traces = std::move(traces),
                           .what_if_path = what_if_path,
                           .comm_groups = comm_groups,
                           .element_bytes = element_bytes};
    if (!what_if_json.empty()) {
      DTSIM_ASSIGN_OR_RETURN(input.what_if, ParseJson(what_if_json, ""));
    }
    return api::ReplayJson(input);
  });
}

}  // namespace
}  // namespace dtsim::python

PYBIND11_MODULE(_dtsim, module) {
  namespace py = pybind11;
  using namespace dtsim::python;  // NOLINT(google-build-using-namespace): the module's one block
  module.doc() = "dtsim's simulator; use the dtsim package, not this module";
  module.def("version", [] { return std::string(dtsim::results::DtsimVersion()); });
  module.def("commit", [] { return std::string(dtsim::results::DtsimCommit()); });
  module.def("simulate", &Simulate, py::arg("config_json"), py::arg("path"), py::arg("overrides"));
  module.def("sweep", &Sweep, py::arg("config_json"), py::arg("path"), py::arg("overrides"),
             py::arg("vary"), py::arg("threads"));
  module.def(
      "search",
      [](const std::string& config_json, const std::string& path,
         std::vector<std::string> overrides, int top, int rerank, int threads, int gpus,
         const std::string& ranks) {
        return Search(
            config_json, path, std::move(overrides),
            {.gpus = gpus, .top = top, .rerank = rerank, .threads = threads, .ranks = ranks});
      },
      py::arg("config_json"), py::arg("path"), py::arg("overrides"), py::arg("top"),
      py::arg("rerank"), py::arg("threads"), py::arg("gpus"), py::arg("ranks"));
  module.def("replay", &Replay, py::arg("traces"), py::arg("what_if_json"), py::arg("what_if_path"),
             py::arg("comm_groups"), py::arg("element_bytes"));
  module.def(
      "model",
      [](const std::string& model_json, const std::string& name, const std::string& gpu,
         int64_t micro_batch, int64_t seq_len, const std::string& dtype,
         const std::string& fp8_recipe, int tensor_parallel, bool sequence_parallel,
         bool flash_attention, bool dropout, const std::string& recompute,
         const std::string& recompute_modules, int layer) {
        return Model(model_json, name,
                     {.gpu = gpu,
                      .micro_batch = micro_batch,
                      .seq_len = seq_len,
                      .dtype = dtype,
                      .fp8_recipe = fp8_recipe,
                      .tensor_parallel = tensor_parallel,
                      .sequence_parallel = sequence_parallel,
                      .flash_attention = flash_attention,
                      .dropout = dropout,
                      .recompute = recompute,
                      .recompute_modules = recompute_modules,
                      .layer = layer});
      },
      py::arg("model_json"), py::arg("name"), py::arg("gpu"), py::arg("micro_batch"),
      py::arg("seq_len"), py::arg("dtype"), py::arg("fp8_recipe"), py::arg("tensor_parallel"),
      py::arg("sequence_parallel"), py::arg("flash_attention"), py::arg("dropout"),
      py::arg("recompute"), py::arg("recompute_modules"), py::arg("layer"));
}
