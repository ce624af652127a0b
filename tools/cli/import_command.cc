#include "tools/cli/import_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "strategies/launch_import.h"
#include "tools/cli/command_line.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ImportOptions {
  std::vector<std::string> framework_and_files;  // "megatron"
  std::vector<std::string> arguments;            // after "--"
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
      "       dtsim import megatron --from LAUNCH.txt [options]\n\n"
      "Turns Megatron-LM's pretrain_gpt.py arguments into a dtsim config: the model's shape,\n"
      "batch, precision, TP/SP/PP/VP/CP/EP, ZeRO (distributed optimizer, Megatron-FSDP),\n"
      "recompute and the gradient-reduction overlap; data parallelism fills the cluster's GPUs.\n"
      "Every argument dtsim does not model is listed (docs/cli.md).\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "from", po::value(&o.from)->value_name("FILE"),
      "read the arguments from FILE (a launch script's flags: whitespace-separated, `\\` line "
      "continuations and # comments ignored; dtsim search --emit's plan-K.megatron.txt)")(
      "gpu", po::value(&o.gpu)->value_name("PRESET"), "the cluster's GPU (required)")(
      "preset", po::value(&o.preset)->value_name("CLUSTER"),
      "the cluster preset (dgx-h100, dgx-a100, ...; required): its network; edit the written "
      "config's cluster section for another")("nodes", po::value(&o.nodes)->value_name("N"),
                                              "nodes the job runs on (required)")(
      "vocab", po::value(&o.vocab)->value_name("N"),
      "the tokenizer's vocabulary, when no --vocab-size gives it")(
      "output,o", po::value(&o.output)->value_name("CONFIG.json"),
      "write the config there (default: print it)");
  return description;
}

CommandOutcome Execute(const ImportOptions& options, std::ostream& out) {
  if (options.framework_and_files.size() != 1 || options.framework_and_files[0] != "megatron") {
    return CommandOutcome::Usage(Error(
        "name the framework the arguments are for: dtsim import megatron [options] -- ARGS..."));
  }
  if (options.gpu.empty() || options.nodes <= 0 || options.preset.empty()) {
    return CommandOutcome::Usage(Error("give the cluster: --preset NAME --gpu PRESET --nodes N"));
  }
  if (options.from.empty() == options.arguments.empty()) {
    return CommandOutcome::Usage(Error("give the arguments after -- or in a file with --from"));
  }
  if (Status refused = RefuseOutputsOverInputs({options.from}, {options.output}); !refused.ok()) {
    return CommandOutcome::Failure(std::move(refused).error());
  }
  std::vector<std::string> arguments = options.arguments;
  if (!options.from.empty()) {
    Expected<std::string> read = ReadFile(options.from);
    if (!read.ok()) return CommandOutcome::Failure(std::move(read).error());
    arguments = strategies::SplitLaunchArguments(*read);
  }
  strategies::ImportTarget target{.cluster = {{"gpu", options.gpu}, {"nodes", options.nodes}}};
  target.cluster["preset"] = options.preset;
  if (options.vocab > 0) target.vocab = options.vocab;
  Expected<strategies::ImportedConfig> imported =
      strategies::ImportMegatronArguments(arguments, target);
  if (!imported.ok()) {
    Error error = std::move(imported).error();
    return CommandOutcome::Failure(options.from.empty() ? error
                                                        : std::move(error).InFile(options.from));
  }
  const std::string json = DumpJson(imported->config, 2) + "\n";
  if (options.output.empty()) {
    out << json;
  } else if (Status written = WriteFileAtomically(options.output, json); !written.ok()) {
    return CommandOutcome::Failure(std::move(written).error());
  }
  std::ostream& notes = options.output.empty() ? std::cerr : out;
  if (!options.output.empty()) fmt::print(out, "wrote {}\n", options.output);
  if (imported->not_modelled.empty()) {
    fmt::print(notes, "every argument is modelled\n");
  } else {
    fmt::print(notes, "not modelled ({} argument(s), read and left out):\n",
               imported->not_modelled.size());
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
