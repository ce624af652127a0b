#include "tools/cli/import_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "sim/base/yaml_reader.h"
#include "strategies/launch_import.h"
#include "strategies/nemo_import.h"
#include "tools/cli/command_line.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ImportOptions {
  // "megatron", "deepspeed" [DS_CONFIG], or "nemo" CONFIG.yaml
  std::vector<std::string> framework_and_files;
  std::vector<std::string> arguments;  // after "--"
  std::string from;
  std::string gpu;
  std::string preset;
  int nodes = 0;
  int64_t vocab = 0;
  std::string output;
  bool help = false;
};

po::options_description Describe(ImportOptions& o) {
  po::options_description description(
      "Usage: dtsim import megatron --preset NAME --gpu PRESET --nodes N [options] -- ARGS...\n"
      "       dtsim import megatron --from LAUNCH.txt [options]\n"
      "       dtsim import deepspeed [DS_CONFIG.json] --preset NAME --gpu PRESET --nodes N\n"
      "                              [options] -- ARGS...   (or --from LAUNCH.txt)\n"
      "       dtsim import nemo CONFIG.yaml --preset NAME --gpu PRESET [options]\n\n"
      "Turns Megatron-LM's pretrain_gpt.py arguments into a dtsim config: the model's shape,\n"
      "batch, precision, TP/SP/PP/VP/CP/EP, ZeRO (distributed optimizer, Megatron-FSDP),\n"
      "recompute and the gradient-reduction overlap; data parallelism fills the cluster's GPUs.\n"
      "deepspeed: Megatron-DeepSpeed's arguments with DeepSpeed's config JSON (batch, ZeRO,\n"
      "precision, communication dtype, 1-bit optimizers); without DS_CONFIG.json the file the\n"
      "arguments' --deepspeed_config names (beside the --from file when relative).\n"
      "nemo: a NeMo training config (the NeMo Framework Launcher's conf/training YAML): its\n"
      "trainer and model sections, OmegaConf's interpolations resolved; the nodes are\n"
      "trainer.num_nodes.\n"
      "Every argument dtsim does not model is listed (docs/cli.md).\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "from", po::value(&o.from)->value_name("FILE"),
      "read the arguments from FILE (a launch script's flags: whitespace-separated, `\\` line "
      "continuations and # comments ignored; dtsim search --emit's plan-K.megatron.txt)")(
      "gpu", po::value(&o.gpu)->value_name("PRESET"), "the cluster's GPU (required)")(
      "preset", po::value(&o.preset)->value_name("CLUSTER"),
      "the cluster preset (dgx-h100, dgx-a100, ...; required): its network; edit the written "
      "config's cluster section for another")(
      "nodes", AtLeastValue(&o.nodes, 1, "nodes"),
      "nodes the job runs on (required; nemo: trainer.num_nodes)")(
      "vocab", AtLeastValue(&o.vocab, 1, "vocab"),
      "the tokenizer's vocabulary, when no --vocab-size gives it (nemo: unless GPT-2's BPE)")(
      "output,o", po::value(&o.output)->value_name("CONFIG.json"),
      "write the config there (default: print it)");
  return description;
}

// DeepSpeed's config: the file named on the command line, or the one --deepspeed_config names
// (a relative path from the directory of the --from file, where dtsim search --emit puts both).
Expected<std::string> DeepSpeedConfigPath(const ImportOptions& options,
                                          const std::vector<std::string>& args) {
  if (options.framework_and_files.size() == 2) return options.framework_and_files[1];
  constexpr std::string_view kFlag = "--deepspeed_config";
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == kFlag && i + 1 < args.size()) path = args[i + 1];
    if (args[i].starts_with(kFlag) && args[i].size() > kFlag.size() &&
        args[i][kFlag.size()] == '=') {
      path = args[i].substr(kFlag.size() + 1);
    }
  }
  if (path.empty()) {
    return Error(
        "give DeepSpeed's config: dtsim import deepspeed DS_CONFIG.json ..., or "
        "--deepspeed_config PATH among the arguments");
  }
  if (!options.from.empty() && std::filesystem::path(path).is_relative()) {
    path = (std::filesystem::path(options.from).parent_path() / path).string();
  }
  return path;
}

Expected<strategies::ImportedConfig> Import(const ImportOptions& options,
                                            const std::vector<std::string>& arguments,
                                            const strategies::ImportTarget& target) {
  if (options.framework_and_files[0] == "nemo") {
    const std::string& path = options.framework_and_files[1];
    DTSIM_ASSIGN_OR_RETURN(const Json yaml, ReadYamlFile(path));
    return strategies::ImportNemoConfig(yaml, path, target);
  }
  if (options.framework_and_files[0] == "megatron") {
    Expected<strategies::ImportedConfig> imported =
        strategies::ImportMegatronArguments(arguments, target);
    if (imported.ok() || options.from.empty()) return imported;
    return std::move(imported).error().InFile(options.from);
  }
  DTSIM_ASSIGN_OR_RETURN(const std::string path, DeepSpeedConfigPath(options, arguments));
  DTSIM_ASSIGN_OR_RETURN(const Json ds_config, ReadJsonFile(path));
  Expected<strategies::ImportedConfig> imported =
      strategies::ImportDeepSpeedArguments(arguments, ds_config, path, target);
  if (imported.ok() || options.from.empty()) return imported;
  return std::move(imported).error().InFile(options.from);  // kept when it names DS_CONFIG
}

CommandOutcome Execute(const ImportOptions& options, std::ostream& out) {
  const std::vector<std::string>& positional = options.framework_and_files;
  const bool megatron = positional.size() == 1 && positional[0] == "megatron";
  const bool deepspeed =
      !positional.empty() && positional.size() <= 2 && positional[0] == "deepspeed";
  const bool nemo = positional.size() == 2 && positional[0] == "nemo";
  if (!megatron && !deepspeed && !nemo) {
    return CommandOutcome::Usage(
        Error("name the framework the arguments are for: dtsim import megatron [options] -- "
              "ARGS..., dtsim import deepspeed [DS_CONFIG.json] [options] -- ARGS..., or dtsim "
              "import nemo CONFIG.yaml [options]"));
  }
  if (options.gpu.empty() || (options.nodes <= 0 && !nemo) || options.preset.empty()) {
    return CommandOutcome::Usage(Error(nemo ? "give the cluster: --preset NAME --gpu PRESET"
                                            : "give the cluster: --preset NAME --gpu PRESET "
                                              "--nodes N"));
  }
  if (nemo && (!options.from.empty() || !options.arguments.empty())) {
    return CommandOutcome::Usage(Error("a NeMo config is the whole job: no --from or -- ARGS"));
  }
  if (!nemo && options.from.empty() == options.arguments.empty()) {
    return CommandOutcome::Usage(Error("give the arguments after -- or in a file with --from"));
  }
  const std::string input = nemo ? positional[1] : options.from;
  if (Status refused = RefuseOutputsOverInputs({input}, {options.output}); !refused.ok()) {
    return CommandOutcome::Failure(std::move(refused).error());
  }
  std::vector<std::string> arguments = options.arguments;
  if (!options.from.empty()) {
    Expected<std::string> read = ReadFile(options.from, FileContent::kTextOrGzip);
    if (!read.ok()) return CommandOutcome::Failure(std::move(read).error());
    arguments = strategies::SplitLaunchArguments(*read);
  }
  if (deepspeed) {  // DeepSpeed's config is an input too, however it is named
    Expected<std::string> path = DeepSpeedConfigPath(options, arguments);
    if (!path.ok()) return CommandOutcome::Failure(std::move(path).error());
    if (Status refused = RefuseOutputsOverInputs({*path}, {options.output}); !refused.ok()) {
      return CommandOutcome::Failure(std::move(refused).error());
    }
  }
  strategies::ImportTarget target{.cluster = {{"gpu", options.gpu}}};
  if (options.nodes > 0) target.cluster["nodes"] = options.nodes;
  target.cluster["preset"] = options.preset;
  if (options.vocab > 0) target.vocab = options.vocab;
  Expected<strategies::ImportedConfig> imported = Import(options, arguments, target);
  if (!imported.ok()) return CommandOutcome::Failure(std::move(imported).error());
  const std::string json = DumpJson(imported->config, 2) + "\n";
  if (options.output.empty()) {
    out << json;
  } else if (Status written = WriteFileAtomically(options.output, json); !written.ok()) {
    return CommandOutcome::Failure(std::move(written).error());
  }
  std::ostream& notes = options.output.empty() ? std::cerr : out;
  if (!options.output.empty()) fmt::print(out, "wrote {}\n", options.output);
  if (imported->not_modelled.empty()) {
    fmt::print(notes, "every {} is modelled\n", nemo ? "key" : "argument");
  } else {
    fmt::print(notes, "not modelled ({} {}(s), read and left out):\n",
               imported->not_modelled.size(), nemo ? "key" : "argument");
    for (const std::string& argument : imported->not_modelled)
      fmt::print(notes, "  {}\n", argument);
  }
  return CommandOutcome::Ok();
}

}  // namespace

CommandOutcome ImportCommand(std::span<const std::string> args, std::ostream& out) {
  ImportOptions options;
  const auto separator = std::find(args.begin(), args.end(), "--");
  if (separator != args.end()) options.arguments.assign(separator + 1, args.end());
  const std::span<const std::string> own(args.begin(), separator);
  const po::options_description description = Describe(options);
  return RunCommandLine(own, description, "framework", options.framework_and_files, options.help,
                        out, [&] { return Execute(options, out); });
}

}  // namespace dtsim::cli
