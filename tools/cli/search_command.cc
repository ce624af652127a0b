#include "tools/cli/search_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include "sim/base/atomic_file.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "strategies/embedding_sharding.h"
#include "strategies/launch_arguments.h"
#include "strategies/plan_config.h"
#include "strategies/search.h"
#include "strategies/time_to_train.h"
#include "tools/api/api.h"
#include "tools/cli/command_line.h"
#include "tools/cli/progress.h"
#include "tools/results/provenance.h"
#include "tools/results/search_results.h"

namespace dtsim::cli {
namespace {

using results::SearchFile;

namespace po = boost::program_options;
using strategies::EvaluatedPlan;
using strategies::PlanStatus;
using strategies::SearchResult;
using strategies::SearchSpace;
using strategies::SimulationConfig;
using strategies::TimeBreakdown;

struct SearchCommandOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> merge;
  api::SearchCall call;  // --gpus, --top, --rerank, --threads, --ranks and --shard read into it
  std::string shard_text;
  std::string output_prefix;
  std::string emit_dir;
  std::string max_memory;
  std::string memory_headroom;
  bool quiet = false;
  bool help = false;
};

po::options_description Describe(SearchCommandOptions& o) {
  po::options_description description(
      "Usage: dtsim search CONFIG [options]\n"
      "       dtsim search --merge SHARD.json... [-o PREFIX]\n\n"
      "Enumerates every parallel plan of CONFIG's model on its cluster (data × tensor × pipeline\n"
      "× expert sizes, tensor mode, sequence parallelism, schedule, virtual stages, micro-batch,\n"
      "ZeRO stage, recompute, compression; the space is CONFIG's \"search\" section), prunes by\n"
      "divisibility and memory, simulates the rest with the analytical network model in order of\n"
      "a compute lower bound (skipping plans that cannot reach the top), re-simulates the best\n"
      "with the flow model and prints the top plans and why the best wins (docs/search.md).\n\n"
      "Options");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "set", po::value(&o.overrides)->value_name("KEY.PATH=VALUE")->composing(),
      "override a config field before searching (repeatable)")(
      "gpus", AtLeastValue(&o.call.gpus, 1, "gpus"),
      "search for N GPUs (a multiple of the cluster's GPUs per node) instead of cluster.nodes")(
      "top", po::value(&o.call.top)->value_name("K")->default_value(10), "plans to rank and print")(
      "rerank", po::value(&o.call.rerank)->value_name("R")->default_value(3),
      "of the best, how many to re-simulate with the flow model (0: none)")(
      "ranks", po::value(&o.call.ranks)->value_name("MODE")->default_value("symmetric"),
      "simulate \"symmetric\" ranks (one per pipeline stage; fast) or \"full\"")(
      "threads,j", ThreadsValue(&o.call.threads), kThreadsHelp)(
      "max-memory", po::value(&o.max_memory)->value_name("SIZE"), kMaxMemoryHelp)(
      "memory-headroom", po::value(&o.memory_headroom)->value_name("SIZE"),
      "count a plan as fitting only if it leaves SIZE free on each GPU (\"6 GiB\": the caching "
      "allocator's reserve over what it hands out, which the memory model does not count; the "
      "config's search.memory_headroom)")(
      "shard", po::value(&o.shard_text)->value_name("K/N"),
      "evaluate only the K-th of N interleaved slices of the space (K from 1); merge the "
      "shards' JSON files with --merge")(
      "merge", po::value(&o.merge)->value_name("SHARD.json")->multitoken()->composing(),
      "merge the JSON results of all shards of one search")(
      "output,o", po::value(&o.output_prefix)->value_name("PREFIX"),
      "write every evaluated plan to PREFIX.json and PREFIX.csv "
      "(docs/formats/search-result.md)")(
      "emit", po::value(&o.emit_dir)->value_name("DIR"),
      "write each of the top plans to DIR/plan-K.json, a config dtsim simulate runs to the "
      "search's figures, DIR/plan-K.megatron.txt, its Megatron-LM pretrain_gpt.py flags, and "
      "DIR/plan-K.deepspeed.txt with DIR/plan-K.ds_config.json, Megatron-DeepSpeed's flags and "
      "DeepSpeed config, and DIR/plan-K.bridge.txt, Megatron-Bridge's run_recipe.py overrides "
      "(created if missing)")("quiet,q", po::bool_switch(&o.quiet), "print nothing on success");
  return description;
}

Status ParseShard(const std::string& text, int& shard, int& shards) {
  const size_t slash = text.find('/');
  const auto number = [](std::string_view digits, int& out) {
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    out = std::stoi(std::string(digits));
    return true;
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), shard) ||
      !number(std::string_view(text).substr(slash + 1), shards) || shards < 1 || shard < 1 ||
      shard > shards) {
    return Error("expected K/N with 1 ≤ K ≤ N (e.g. 3/8: the third of eight shards)", "--shard",
                 Quote(text));
  }
  return Status::Ok();
}

std::string FlowTime(const strategies::PlanFigures& f) {
  return f.flow_average_iteration_time ? FormatDuration(*f.flow_average_iteration_time) : "—";
}

void PrintCounts(std::ostream& out, const SearchFile& file) {
  const SearchResult& r = file.result;
  fmt::print(
      out,
      "  plans          {} enumerated{}: {} invalid, {} out of memory, {} bounded "
      "(cannot reach the top), {} simulated",
      r.enumerated,
      r.plans.size() == r.enumerated ? "" : fmt::format(" ({} in this shard)", r.plans.size()),
      r.Count(PlanStatus::kInvalid), r.Count(PlanStatus::kOutOfMemory),
      r.Count(PlanStatus::kBounded), r.Count(PlanStatus::kSimulated));
  if (const size_t failed = r.Count(PlanStatus::kFailed); failed > 0) {
    fmt::print(out, ", {} failed", failed);
  }
  fmt::print(out, "\n");
  std::vector<std::string> reasons;
  for (const auto& [reason, count] : r.PrunedByReason()) {
    reasons.push_back(fmt::format("{} {}", reason, count));
  }
  if (!reasons.empty()) fmt::print(out, "  pruned by      {}\n", fmt::join(reasons, ", "));
}

// What the memory column of `rows` ranked rows counts, `without` of them without the caching
// allocator's reserve (dtsim replays it for some loops only; those rows are marked when others
// have it).
std::string MemoryNote(const SearchFile& file, size_t rows, size_t without) {
  const std::string kept =
      file.space.memory_headroom.count() > 0
          ? fmt::format("; the search kept {} free", FormatGiB(file.space.memory_headroom.count()))
          : "";
  if (without == 0) {
    return "memory: the largest stage's, per GPU, the caching allocator's reserve included" + kept;
  }
  const std::string why =
      "the caching allocator's reserve, which dtsim replays for PyTorch eager, DDP and FSDP2 "
      "loops only (docs/models.md)";
  if (without == rows) {
    return fmt::format("memory: the largest stage's, per GPU, without {}{}", why,
                       kept.empty() ? ": --memory-headroom keeps room for it" : kept);
  }
  return fmt::format("memory: the largest stage's, per GPU; * without {}{}", why, kept);
}

// The run's wall clock to train (the flow model's where re-simulated), as the ranking reads it.
std::string TrainTime(const strategies::PlanFigures& f) {
  const std::optional<double>& run =
      f.flow_time_to_train_s ? f.flow_time_to_train_s : f.time_to_train_s;
  return run ? strategies::FormatSeconds(*run) : "—";
}

void PrintTop(std::ostream& out, const SearchFile& file, int top) {
  const SearchResult& r = file.result;
  const size_t rows = std::min(r.ranking.size(), static_cast<size_t>(std::max(top, 0)));
  size_t without = 0;
  bool timed = false;
  for (size_t k = 0; k < rows; ++k) {
    const EvaluatedPlan& plan = r.plans[r.ranking[k]];
    without += plan.allocator_reserve ? 0 : 1;
    timed = timed || plan.figures->time_to_train_s.has_value();
  }
  const bool mark = without > 0 && without < rows;
  fmt::print(out, "\n  {:>4}  {:<84} {:>10} {:>10} {:>10} {:>6}{} {:>11}\n", "rank", "plan",
             "iteration", "flow", "samples/s", "MFU",
             timed ? fmt::format(" {:>11}", "to train") : "", "memory");
  for (size_t k = 0; k < rows; ++k) {
    const EvaluatedPlan& plan = r.plans[r.ranking[k]];
    const strategies::PlanFigures& f = *plan.figures;
    fmt::print(out, "  {:>4}  {:<84} {:>10} {:>10} {:>10.2f} {:>5.1f}%{} {:>10}{}\n", k + 1,
               strategies::PlanLabel(plan.choice, file.space),
               FormatDuration(f.average_iteration_time), FlowTime(f), f.samples_per_second,
               100 * f.mfu, timed ? fmt::format(" {:>11}", TrainTime(f)) : "",
               FormatGiB(plan.memory_bytes), mark && !plan.allocator_reserve ? "*" : " ");
    // Plans that simulate exactly as this one are one row: what they change in its label.
    const std::vector<std::string> same = strategies::SameAsLabels(r, r.ranking[k], file.space);
    if (!same.empty()) {
      constexpr size_t kNamed = 2;
      std::string also = "= also with " + same[0];
      if (same.size() > 1) also += "; " + same[1];
      if (same.size() > kNamed) {
        also +=
            fmt::format("; and {} more alike (same_as in the search files)", same.size() - kNamed);
      }
      fmt::print(out, "        {}\n", also);
    }
  }
  fmt::print(out,
             "  (iteration: analytical network model; flow: the flow model, for the best "
             "{}; {}{})\n",
             file.settings.value("rerank", 0), MemoryNote(file, rows, without),
             timed ? "; ranked by time to train: the run's wall clock with failures and "
                     "checkpoints, at the flow model's iteration where it has one "
                     "(docs/time_to_train.md)"
                   : "");
}

// "pipeline 1 vs 2, zero_stage 3 vs 1": the choices two plans differ in.
std::string Differences(const EvaluatedPlan& a, const EvaluatedPlan& b, const SearchSpace& space) {
  const strategies::ParallelPlan& x = a.choice.plan;
  const strategies::ParallelPlan& y = b.choice.plan;
  std::vector<std::string> parts;
  const auto differ = [&parts](std::string_view name, const auto& u, const auto& v) {
    if (u != v) parts.push_back(fmt::format("{} {} vs {}", name, u, v));
  };
  const auto layout = [](const strategies::ParallelPlan& p) {
    return models::TensorLayoutNames()[static_cast<size_t>(p.tensor_layout)];
  };
  differ("data", x.data, y.data);
  differ("tensor", x.tensor, y.tensor);
  differ("tensor mode", layout(x), layout(y));
  differ("tensor depth", x.tensor_depth, y.tensor_depth);
  differ("sequence parallel", x.sequence_parallel, y.sequence_parallel);
  differ("pipeline", x.pipeline, y.pipeline);
  differ("schedule", models::PipelineScheduleName(x.schedule),
         models::PipelineScheduleName(y.schedule));
  differ("virtual stages", x.virtual_stages, y.virtual_stages);
  differ("context", x.context, y.context);
  differ("context comm", models::ContextCommNames()[static_cast<size_t>(x.context_comm)],
         models::ContextCommNames()[static_cast<size_t>(y.context_comm)]);
  differ("expert", x.expert, y.expert);
  differ("ZeRO", x.zero_stage, y.zero_stage);
  differ("global batch", a.choice.global_batch, b.choice.global_batch);
  differ("micro-batch", a.choice.micro_batch, b.choice.micro_batch);
  differ("recompute", models::RecomputeName(a.choice.recompute),
         models::RecomputeName(b.choice.recompute));
  const auto method = [&space](const EvaluatedPlan& p) {
    return space.compression[static_cast<size_t>(p.choice.compression)].method;
  };
  differ("compression", method(a), method(b));
  differ("offloaded layers", a.choice.activation_offload, b.choice.activation_offload);
  differ("rank order", strategies::PlanOrderName(a.choice.plan),
         strategies::PlanOrderName(b.choice.plan));
  differ("tables",
         strategies::EmbeddingShardingLabel(strategies::EmbeddingShardingOf(a.choice, space)),
         strategies::EmbeddingShardingLabel(strategies::EmbeddingShardingOf(b.choice, space)));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// With a time_to_train section: both runs' iterations and wall clocks; when the plans' global
// batches differ, the batch — not the iteration's parts — says why #2 trains longer (fewer,
// slower iterations, and more tokens past the critical batch). True when it said why.
bool PrintRunsDiffer(std::ostream& out, const EvaluatedPlan& best, const EvaluatedPlan& next,
                     bool flow) {
  const strategies::PlanFigures& a = *best.figures;
  const strategies::PlanFigures& b = *next.figures;
  if (!a.train_iterations || !b.train_iterations || !a.time_to_train_s || !b.time_to_train_s) {
    return false;
  }
  const auto wall = [flow](const strategies::PlanFigures& f) {
    return flow && f.flow_time_to_train_s ? *f.flow_time_to_train_s : *f.time_to_train_s;
  };
  const auto iteration = [flow](const strategies::PlanFigures& f) {
    return flow && f.flow_average_iteration_time ? *f.flow_average_iteration_time
                                                 : f.average_iteration_time;
  };
  fmt::print(out, "    {:<12} {:>10} {:>10}\n", "iterations", *a.train_iterations,
             *b.train_iterations);
  fmt::print(out, "    {:<12} {:>10} {:>10}\n", "to train", strategies::FormatSeconds(wall(a)),
             strategies::FormatSeconds(wall(b)));
  const int64_t batch_a = best.choice.global_batch;
  const int64_t batch_b = next.choice.global_batch;
  if (batch_a == batch_b || batch_a <= 0 || batch_b <= 0) return false;
  const double tokens = static_cast<double>(*b.train_iterations) * static_cast<double>(batch_b) /
                        (static_cast<double>(*a.train_iterations) * static_cast<double>(batch_a));
  fmt::print(out,
             "    #2 trains {:.1f}% longer: its batch of {} sequences takes {} iterations of {} "
             "where #1's of {} takes {} of {} ({:.2f}× the tokens)\n",
             100 * (wall(b) / wall(a) - 1), batch_b, *b.train_iterations,
             FormatDuration(iteration(b)), batch_a, *a.train_iterations,
             FormatDuration(iteration(a)), tokens);
  return true;
}

// Why the best wins: where the two plans differ and their mean time per stage, part by part.
void PrintWhy(std::ostream& out, const SearchFile& file) {
  const SearchResult& r = file.result;
  if (r.ranking.size() < 2) return;
  const EvaluatedPlan& best = r.plans[r.ranking[0]];
  const EvaluatedPlan& next = r.plans[r.ranking[1]];
  const bool tie =
      best.figures->average_iteration_time == next.figures->average_iteration_time &&
      best.figures->flow_average_iteration_time == next.figures->flow_average_iteration_time;
  // The model that ranked them: the flow model's breakdowns when both were re-ranked with it
  // (a search file read back has only its times: then the analytical model's, and it says so).
  const bool flow = best.figures->flow_breakdown && next.figures->flow_breakdown;
  const TimeBreakdown& a = flow ? *best.figures->flow_breakdown : best.figures->breakdown;
  const TimeBreakdown& b = flow ? *next.figures->flow_breakdown : next.figures->breakdown;
  fmt::print(out,
             "\n  why #1 {} #2 (they differ in {}; mean time per pipeline stage, ms, {} network "
             "model):\n",
             tie ? "ties with" : "wins over", Differences(best, next, file.space),
             flow ? "flow" : "analytical");
  fmt::print(out, "    {:<12} {:>10} {:>10} {:>10}\n", "", "#1", "#2", "#2 − #1");
  const auto row = [&out](std::string_view name, DurationNs x, DurationNs y) {
    fmt::print(out, "    {:<12} {:>10} {:>10} {:>10}\n", name, FormatMilliseconds(x, 1),
               FormatMilliseconds(y, 1), FormatMilliseconds(y - x, 1));
  };
  row("compute", a.compute, b.compute);
  row("recompute", a.recompute, b.recompute);
  row("tp exposed", a.tensor, b.tensor);
  row("ep exposed", a.expert, b.expert);
  row("cp exposed", a.context, b.context);
  row("pp wait", a.pipeline, b.pipeline);
  row("dp exposed", a.data_exposed, b.data_exposed);
  row("optimizer", a.optimizer, b.optimizer);
  row("idle/bubble", a.idle, b.idle);
  row("iteration", flow ? *best.figures->flow_iteration_time : best.figures->iteration_time,
      flow ? *next.figures->flow_iteration_time : next.figures->iteration_time);
  // The part that moved most names the reason.
  const std::array<std::pair<std::string_view, DurationNs>, 9> deltas = {
      {{"compute", b.compute - a.compute},
       {"recompute", b.recompute - a.recompute},
       {"exposed tensor-parallel communication", b.tensor - a.tensor},
       {"exposed all-to-alls (MoE experts', a DLRM's tables')", b.expert - a.expert},
       {"exposed context-parallel communication", b.context - a.context},
       {"pipeline waits", b.pipeline - a.pipeline},
       {"exposed gradient reduction", b.data_exposed - a.data_exposed},
       {"the optimizer step", b.optimizer - a.optimizer},
       {"idle time (pipeline bubble)", b.idle - a.idle}}};
  if (PrintRunsDiffer(out, best, next, flow)) return;
  const auto largest =
      std::max_element(deltas.begin(), deltas.end(),
                       [](const auto& x, const auto& y) { return x.second < y.second; });
  if (largest->second > DurationNs::Zero()) {
    fmt::print(out, "    #2 loses most to {} (+{} ms per stage)\n", largest->first,
               FormatMilliseconds(largest->second, 1));
  }
}

Expected<SearchFile> RunSearch(const SearchCommandOptions& options, Progress& progress) {
  api::ConfigInput input{.path = options.config, .overrides = options.overrides};
  DTSIM_RETURN_IF_ERROR(AddMaxMemoryOverride(options.max_memory, input.overrides));
  DTSIM_RETURN_IF_ERROR(AddOptionOverride("--memory-headroom", "search.memory_headroom",
                                          options.memory_headroom, input.overrides));
  Expected<SearchFile> file = api::RunSearch(
      input, options.call, [&progress](std::string_view phase, size_t done, size_t total) {
        progress.Update(phase, done, total);
      });
  progress.Finish();
  return file;
}

// A framework's pretrain_gpt.py flags, one a line, after what no flag expresses.
std::string LaunchText(const strategies::LaunchArguments& launch) {
  std::string text = fmt::format(
      "# {} {} for this plan's model, batch, precision and parallelism;\n"
      "# add the data, tokenizer, optimizer and checkpoint settings of your run.\n",
      launch.framework, launch.what);
  for (const std::string& note : launch.not_expressed) {
    text += "# not expressed: " + note + "\n";
  }
  // The environment first, as a shell reads assignments before a command.
  for (const std::string& assignment : launch.environment) text += assignment + " \\\n";
  for (size_t i = 0; i < launch.arguments.size(); ++i) {
    text += launch.arguments[i] + (i + 1 < launch.arguments.size() ? " \\\n" : "\n");
  }
  return text;
}

// What --emit DIR writes for plan K: DIR/plan-K followed by each of these (EmitPlans).
constexpr std::array<std::string_view, 5> kEmittedSuffixes = {
    ".json", ".megatron.txt", ".deepspeed.txt", ".ds_config.json", ".bridge.txt"};

// The plan number K when `path` is one of the files --emit `dir` writes for plans 1..`top`.
std::optional<int64_t> EmittedPlanOf(const std::filesystem::path& dir, int top,
                                     const std::string& path) {
  const std::filesystem::path file = ResolvedPath(path);
  const std::string name = file.filename().string();
  constexpr std::string_view kStem = "plan-";
  if (file.parent_path() != dir || !name.starts_with(kStem)) return std::nullopt;
  const char* digits = name.data() + kStem.size();
  const char* end = name.data() + name.size();
  int64_t k = 0;
  const auto [after, error] = std::from_chars(digits, end, k);
  if (error != std::errc() || *digits == '0' || k > top) return std::nullopt;
  const std::string_view suffix(after, static_cast<size_t>(end - after));
  if (std::find(kEmittedSuffixes.begin(), kEmittedSuffixes.end(), suffix) ==
      kEmittedSuffixes.end()) {
    return std::nullopt;
  }
  return k;
}

// Before the search: --emit DIR would replace the search's own output (-o DIR/plan-1 writes
// DIR/plan-1.json) or an input (a config named DIR/plan-1.json) with a plan's file.
Status CheckEmittedFiles(const SearchCommandOptions& options,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs) {
  const std::filesystem::path dir = ResolvedPath(options.emit_dir);
  const auto refuse = [&](const std::string& path, int64_t k, std::string_view what) {
    return Error(fmt::format("--emit {} writes plan #{}'s files here, over {}: give --emit "
                             "another directory",
                             options.emit_dir, k, what))
        .InFile(path);
  };
  for (const std::string& output : outputs) {
    if (output.empty()) continue;
    if (const std::optional<int64_t> k = EmittedPlanOf(dir, options.call.top, output)) {
      return refuse(output, *k, "the search's output (-o)");
    }
  }
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    if (const std::optional<int64_t> k = EmittedPlanOf(dir, options.call.top, input)) {
      return refuse(input, *k, "an input of the command");
    }
  }
  return Status::Ok();
}

// Plan #k's launch files in `dir`: Megatron-LM flags, Megatron-DeepSpeed flags with their
// ds_config.json, and Megatron-Bridge overrides, each after `header`.
Status EmitLaunchFiles(const std::string& dir, size_t k, const std::string& header,
                       const strategies::ResolvedConfig& resolved) {
  const std::string stem = fmt::format("{}/plan-{}", dir, k);
  DTSIM_RETURN_IF_ERROR(WriteFileAtomically(
      stem + ".megatron.txt", header + LaunchText(strategies::MegatronArguments(resolved))));
  const std::string ds_config = fmt::format("plan-{}.ds_config.json", k);
  const strategies::LaunchArguments deepspeed = strategies::DeepSpeedArguments(resolved, ds_config);
  DTSIM_RETURN_IF_ERROR(WriteFileAtomically(fmt::format("{}/{}", dir, ds_config),
                                            DumpJson(deepspeed.config_file, 2) + "\n"));
  DTSIM_RETURN_IF_ERROR(
      WriteFileAtomically(stem + ".deepspeed.txt", header + LaunchText(deepspeed)));
  return WriteFileAtomically(
      stem + ".bridge.txt",
      header +
          "# run_recipe.py --recipe <a pretrain recipe of this model> --mode pretrain, then:\n" +
          LaunchText(strategies::MegatronBridgeArguments(resolved)));
}

// Plans out (docs/search.md, "Plans out"): each of the top plans as a dtsim config, as
// Megatron-LM flags and as Megatron-DeepSpeed flags with their ds_config.json (transformers:
// those frameworks train nothing else); every config is read back and checked before it is
// written.
Status EmitPlans(const std::string& dir, const SearchFile& file, int top, std::ostream& out,
                 bool quiet) {
  const Json& settings = file.settings;
  const Json base = settings.value("simulation_config", Json::object());
  constexpr std::array<std::string_view, 1> kSearchKey = {"search"};
  Expected<SimulationConfig> read =
      strategies::ReadConfigSections(base, settings.value("config", ""), kSearchKey);
  if (!read.ok()) return std::move(read).error().Under("settings.simulation_config");
  const int nodes = settings.value("gpus", 0) / std::max(1, read->cluster.gpus_per_node);
  const Json::json_pointer list("/space/search/compression");
  const Json* compression = settings.contains(list) ? &settings.at(list) : nullptr;
  const strategies::RanksMode ranks = settings.value("ranks", "") == "full"
                                          ? strategies::RanksMode::kFull
                                          : strategies::RanksMode::kSymmetric;
  DTSIM_RETURN_IF_ERROR(MakeOutputDirectory(dir, "--emit"));
  const bool launchable = read->model.family == models::ModelFamily::kTransformer;
  const SearchResult& r = file.result;
  const size_t count = std::min(r.ranking.size(), static_cast<size_t>(std::max(top, 0)));
  for (size_t k = 0; k < count; ++k) {
    const EvaluatedPlan& plan = r.plans[r.ranking[k]];
    const std::string stem = fmt::format("{}/plan-{}", dir, k + 1);
    Json config = strategies::PlanConfigJson(base, plan.choice, compression, nodes, ranks);
    if (file.space.embedding_shardings.size() > 1) {  // a DLRM's placements were searched
      config["parallelism"]["embedding_sharding"] = strategies::EmbeddingShardingJson(
          strategies::EmbeddingShardingOf(plan.choice, file.space));
    }
    strategies::AnchorRelativePaths(config, settings.value("config", ""));
    Expected<strategies::ResolvedConfig> resolved =
        strategies::ConfigFromJson(config, stem + ".json");
    if (!resolved.ok()) {  // a search dtsim wrote reads back; an edited one may not
      return Error(fmt::format("plan #{} does not read back as a config (the search file's "
                               "settings.simulation_config with the plan's choices): {}",
                               k + 1, resolved.error().ToString()))
          .InFile(stem + ".json");
    }
    DTSIM_RETURN_IF_ERROR(WriteFileAtomically(stem + ".json", DumpJson(config, 2) + "\n"));
    if (launchable) {
      const std::string header = fmt::format(
          "# dtsim search plan #{}: {}\n# simulated {} per iteration (analytical "
          "network model)\n",
          k + 1, strategies::PlanLabel(plan.choice, file.space),
          FormatDuration(plan.figures->average_iteration_time));
      DTSIM_RETURN_IF_ERROR(EmitLaunchFiles(dir, k + 1, header, *resolved));
    }
  }
  if (!quiet && !launchable) {
    fmt::print(out,
               "\n  plans out      {0}/plan-1.json … plan-{1}.json (dtsim configs: `dtsim "
               "simulate` gives the figures above); no launch flags: Megatron-LM, DeepSpeed and "
               "Megatron-Bridge train transformers, not a {2}\n",
               dir, count, models::ModelFamilyName(read->model.family));
  } else if (!quiet) {
    fmt::print(
        out,
        "\n  plans out      {0}/plan-1.json … plan-{1}.json (dtsim configs: `dtsim simulate` "
        "gives the figures above), {0}/plan-1.megatron.txt … ({2} flags), "
        "{0}/plan-1.deepspeed.txt and plan-1.ds_config.json … ({3}), {0}/plan-1.bridge.txt … "
        "({4})\n",
        dir, count, strategies::kMegatronRelease, strategies::kDeepSpeedRelease,
        strategies::kBridgeRelease);
  }
  return Status::Ok();
}

Expected<SearchFile> RunMerge(const SearchCommandOptions& options) {
  std::vector<SearchFile> shards;
  for (const std::string& path : options.merge) {
    DTSIM_ASSIGN_OR_RETURN(SearchFile shard, results::ReadSearchFile(path));
    shards.push_back(std::move(shard));
  }
  const int rerank = shards.empty() ? 0 : shards.front().settings.value("rerank", 0);
  return results::MergeSearchFiles(std::move(shards), rerank);
}

Status Execute(const SearchCommandOptions& options, std::ostream& out) {
  std::vector<std::string> inputs = options.merge;
  inputs.push_back(options.config);
  const std::string& prefix = options.output_prefix;
  const std::vector<std::string> outputs = {prefix.empty() ? "" : prefix + ".json",
                                            prefix.empty() ? "" : prefix + ".csv"};
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(inputs, outputs));
  if (!options.emit_dir.empty()) {
    DTSIM_RETURN_IF_ERROR(CheckOutputDirectory(options.emit_dir, "--emit"));
    DTSIM_RETURN_IF_ERROR(CheckEmittedFiles(options, inputs, outputs));
  }
  Progress progress = Progress::ForTerminal();
  const bool merging = !options.merge.empty();
  DTSIM_ASSIGN_OR_RETURN(const SearchFile file,
                         merging ? RunMerge(options) : RunSearch(options, progress));
  if (!options.output_prefix.empty())
    DTSIM_RETURN_IF_ERROR(results::WriteSearchFiles(options.output_prefix, file));
  if (options.quiet) {
    return options.emit_dir.empty()
               ? Status::Ok()
               : EmitPlans(options.emit_dir, file, options.call.top, out, true);
  }
  fmt::print(out, "dtsim search {}{}\n", file.settings.value("config", ""),
             merging           ? fmt::format(" (merged from {} shards)", options.merge.size())
             : file.shards > 1 ? fmt::format(" (shard {}/{})", file.shard, file.shards)
                               : "");
  fmt::print(out, "  space          {} on {} × {} ({}); {} ranks\n",
             file.settings.value("model", ""), file.settings.value("gpus", 0),
             file.settings.value("gpu", ""), file.settings.value("cluster", ""),
             file.settings.value("ranks", ""));
  PrintCounts(out, file);
  fmt::print(out, "  wall time      {:.1f} s{}\n", file.result.seconds,
             merging ? " (the slowest shard)" : "");
  PrintTop(out, file, options.call.top);
  PrintWhy(out, file);
  if (!options.output_prefix.empty()) {
    fmt::print(out, "\n  every plan     {0}.json, {0}.csv\n", options.output_prefix);
  }
  if (!options.emit_dir.empty()) {
    DTSIM_RETURN_IF_ERROR(EmitPlans(options.emit_dir, file, options.call.top, out, false));
  }
  return Status::Ok();
}

// --merge combines searches already run: an option that sets up a search would be ignored
// (the shards' own settings hold). The first given, or nothing.
std::optional<std::string_view> SearchOptionBesideMerge(const SearchCommandOptions& o) {
  const std::pair<std::string_view, bool> given[] = {
      {"--set", !o.overrides.empty()},
      {"--gpus", o.call.gpus > 0},
      {"--rerank", o.call.rerank != api::SearchCall{}.rerank},
      {"--ranks", o.call.ranks != api::SearchCall{}.ranks},
      {"--threads", o.call.threads != 0},
      {"--shard", !o.shard_text.empty()},
      {"--max-memory", !o.max_memory.empty()},
      {"--memory-headroom", !o.memory_headroom.empty()}};
  for (const auto& [option, set] : given) {
    if (set) return option;
  }
  return std::nullopt;
}

}  // namespace

CommandOutcome SearchCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("search", {args.begin(), args.end()});
  SearchCommandOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "config", options.config, options.help, "", out, [&] {
    if (options.config.empty() == options.merge.empty()) {
      return CommandOutcome::Usage(Error(options.config.empty()
                                             ? "give a CONFIG to search, or --merge shard files"
                                             : "give either a CONFIG or --merge, not both"));
    }
    if (const std::optional<std::string_view> option = SearchOptionBesideMerge(options);
        option && !options.merge.empty()) {
      return CommandOutcome::Usage(Error(fmt::format(
          "{} sets up a search, and --merge combines the shards of one already run (their "
          "settings hold): drop {}",
          *option, *option)));
    }
    if (options.call.top < 1)
      return CommandOutcome::Usage(
          Error("must be at least 1", "--top", std::to_string(options.call.top)));
    if (options.call.rerank < 0) {
      return CommandOutcome::Usage(
          Error("must be at least 0", "--rerank", std::to_string(options.call.rerank)));
    }
    if (options.call.ranks != "symmetric" && options.call.ranks != "full") {
      return CommandOutcome::Usage(
          Error("expected \"symmetric\" or \"full\"", "--ranks", Quote(options.call.ranks)));
    }
    if (!options.shard_text.empty()) {
      if (Status parsed = ParseShard(options.shard_text, options.call.shard, options.call.shards);
          !parsed.ok()) {
        return CommandOutcome::Usage(parsed.error());
      }
    }
    return FailureUnlessOk(Execute(options, out));
  });
}

}  // namespace dtsim::cli
