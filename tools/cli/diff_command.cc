#include "tools/cli/diff_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "tools/cli/command_line.h"
#include "tools/results/provenance.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

using Flat = std::vector<std::pair<std::string, std::string>>;

struct DiffOptions {
  std::vector<std::string> files;
  int limit = 20;
  bool help = false;
};

po::options_description Describe(DiffOptions& o) {
  po::options_description description(
      "Usage: dtsim diff A.json B.json [options]\n\n"
      "Compares two results of the same family (simulate, sweep, search, replay, validate,\n"
      "run): the inputs that differ, from each result's provenance (the config after --set,\n"
      "the resolved cluster and GPU, the --set overrides, the input files' SHA-256), then the\n"
      "figures: for simulate results the iteration time and where it moved (each stage's time\n"
      "by category, and its memory); for the others every number that changed, largest\n"
      "relative change first (docs/cli.md).\n\n"
      "Options");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "limit", AtLeastValue(&o.limit, 0, "limit")->default_value(20),
      "show at most N changed numbers (0: all)");
  return description;
}

// Numbers that are not the run's figures: the simulator's wall-clock times and speed (the
// host's), the provenance (compared as inputs), the header.
bool IsWallClock(const std::string& key) {
  return key.ends_with("seconds") ||
         (key.starts_with("simulator.") && key.ends_with("_per_second")) ||
         key.starts_with("provenance") || key == "format" || key == "version";
}

std::string Shorten(std::string text) {
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// What a family's result holds of how it was asked for, beside the config: the "input" section
// simulate and run results always had, a sweep's axes, a search's settings and shard.
constexpr std::array<const char*, 4> kRequestSections = {"input", "vary", "settings", "shard"};

// The inputs two results were made from: their provenance where they have one, and the
// sections of kRequestSections.
Flat InputsOf(const Json& result) {
  Flat inputs;
  if (result.contains("provenance")) inputs = results::FlatProvenance(result["provenance"]);
  for (const char* section : kRequestSections) {
    if (result.contains(section)) results::FlattenJson(result[section], section, inputs);
  }
  return inputs;
}

// Two sweeps over different axes, or two searches of different spaces or shards, list
// different points or plans at one position: their numbers compare by position only.
bool ListsDiffer(const Json& a, const Json& b) {
  for (const char* section : {"vary", "settings", "shard"}) {
    if (a.value(section, Json()) != b.value(section, Json())) return true;
  }
  return false;
}

// Prints the keys whose values differ (or exist on one side only); returns how many.
size_t PrintDifferences(std::ostream& out, const Flat& a, const Flat& b) {
  std::map<std::string, std::pair<std::string, std::string>> both;
  for (const auto& [key, value] : a) both[key].first = value;
  for (const auto& [key, value] : b) both[key].second = value;
  size_t differing = 0;
  for (const auto& [key, values] : both) {
    if (values.first == values.second) continue;
    ++differing;
    fmt::print(out, "  {:<52} {} -> {}\n", key,
               values.first.empty() ? "(absent)" : Shorten(values.first),
               values.second.empty() ? "(absent)" : Shorten(values.second));
  }
  return differing;
}

std::optional<double> NumberAt(const Json& document, const Json::json_pointer& pointer) {
  if (!document.contains(pointer)) return std::nullopt;
  const Json& value = document.at(pointer);
  if (!value.is_number()) return std::nullopt;
  return value.get<double>();
}

std::string Change(double a, double b) {
  if (a == 0) return b == 0 ? "0%" : "new";
  return fmt::format("{:+.1f}%", 100 * (b / a - 1));
}

// A simulate result's figures: the headline numbers, then each stage's time by category and
// its memory (what moved, in ms and GiB).
void PrintSimulateFigures(std::ostream& out, const Json& a, const Json& b) {
  const auto headline = [&](const char* label, const char* key, double scale, const char* unit) {
    const Json::json_pointer pointer(std::string("/") + key);
    const std::optional<double> x = NumberAt(a, pointer);
    const std::optional<double> y = NumberAt(b, pointer);
    if (!x || !y) return;
    fmt::print(out, "  {:<22} {:>12.3f} -> {:>12.3f} {:<8} {}\n", label, *x * scale, *y * scale,
               unit, Change(*x, *y));
  };
  headline("iteration", "iteration_time_ns", 1e-6, "ms");
  headline("samples per second", "samples_per_second", 1, "");
  headline("tokens per second", "tokens_per_second", 1, "");
  headline("MFU", "mfu", 100, "%");
  headline("time to train", "time_to_train/wall_s", 1.0 / 86400, "days");
  const Json& sa = a.value("stages", Json::array());
  const Json& sb = b.value("stages", Json::array());
  if (!sa.is_array() || !sb.is_array() || sa.empty() || sb.empty()) return;
  fmt::print(out, "\n  where the time moved (ms on each stage's first rank, B - A; memory GiB)\n");
  const std::vector<std::pair<const char*, const char*>> categories = {
      {"compute", "compute_ns"}, {"recompute", "recompute_ns"}, {"tp", "tp_exposed_ns"},
      {"ep", "ep_exposed_ns"},   {"cp", "cp_exposed_ns"},       {"pp wait", "pp_wait_ns"},
      {"dp", "dp_exposed_ns"},   {"optim", "optimizer_ns"},     {"idle", "idle_ns"}};
  fmt::print(out, "  {:<6}", "stage");
  for (const auto& [label, key] : categories) fmt::print(out, " {:>9}", label);
  fmt::print(out, " {:>9}\n", "memory");
  const size_t stages = std::max(sa.size(), sb.size());
  for (size_t i = 0; i < stages; ++i) {
    fmt::print(out, "  {:<6}", i);
    for (const auto& [label, key] : categories) {
      const Json::json_pointer pointer(fmt::format("/{}/time/{}", i, key));
      const double x = NumberAt(sa, pointer).value_or(0);
      const double y = NumberAt(sb, pointer).value_or(0);
      fmt::print(out, " {:>+9.2f}", (y - x) / 1e6);
    }
    const Json::json_pointer memory(fmt::format("/{}/memory/total_bytes", i));
    const double x = NumberAt(sa, memory).value_or(0);
    const double y = NumberAt(sb, memory).value_or(0);
    fmt::print(out, " {:>+9.2f}\n", (y - x) / 1073741824.0);
  }
  if (sa.size() != sb.size()) {
    fmt::print(out, "  (A has {} stages, B {}; a stage one lacks counts as 0)\n", sa.size(),
               sb.size());
  }
}

// Any family's figures: every number present in both that changed, largest relative change
// first (wall-clock times and the provenance left out).
void PrintChangedNumbers(std::ostream& out, const Json& a, const Json& b, int limit) {
  Flat fa;
  Flat fb;
  results::FlattenJson(a, "", fa);
  results::FlattenJson(b, "", fb);
  std::map<std::string, std::string> in_b(fb.begin(), fb.end());
  struct Changed {
    std::string key;
    double a, b, relative;
  };
  std::vector<Changed> changed;
  for (const auto& [key, text] : fa) {
    if (IsWallClock(key)) continue;
    const auto it = in_b.find(key);
    if (it == in_b.end() || it->second == text) continue;
    const Json x = Json::parse(text, nullptr, false);
    const Json y = Json::parse(it->second, nullptr, false);
    if (!x.is_number() || !y.is_number()) continue;
    const double u = x.get<double>();
    const double v = y.get<double>();
    const double relative = u == 0 ? std::numeric_limits<double>::infinity() : std::abs(v / u - 1);
    changed.push_back({key, u, v, relative});
  }
  std::stable_sort(changed.begin(), changed.end(),
                   [](const Changed& x, const Changed& y) { return x.relative > y.relative; });
  if (changed.empty()) {
    fmt::print(out, "  no number differs\n");
    return;
  }
  const size_t shown =
      limit > 0 ? std::min(changed.size(), static_cast<size_t>(limit)) : changed.size();
  for (size_t i = 0; i < shown; ++i) {
    const Changed& c = changed[i];
    fmt::print(out, "  {:<52} {:>14.6g} -> {:<14.6g} {}\n", c.key, c.a, c.b, Change(c.a, c.b));
  }
  if (shown < changed.size()) {
    fmt::print(out, "  ({} more changed numbers; --limit 0 shows all)\n", changed.size() - shown);
  }
}

// `options.files` holds two paths (DiffCommand checks the count as a usage error).
Status Execute(const DiffOptions& options, std::ostream& out) {
  std::vector<Json> documents;
  for (const std::string& path : options.files) {
    DTSIM_ASSIGN_OR_RETURN(Json document, ReadJsonFile(path));
    const auto format = document.is_object() ? document.find("format") : document.end();
    if (format == document.end() || !format->is_string() ||
        !format->get_ref<const std::string&>().starts_with("dtsim.")) {
      return Error("not a dtsim result (no \"format\": \"dtsim....\")", "format").InFile(path);
    }
    documents.push_back(std::move(document));
  }
  const Json& a = documents[0];
  const Json& b = documents[1];
  const std::string family = a["format"].get<std::string>();
  if (b["format"] != a["format"]) {
    return Error(fmt::format("the results are of different families: {} and {}", Quote(family),
                             DumpJson(b["format"])))
        .InFile(options.files[1]);
  }
  fmt::print(out, "dtsim diff {} (A) {} (B): {}\n\n", options.files[0], options.files[1], family);
  fmt::print(out, "inputs that differ\n");
  for (size_t i = 0; i < 2; ++i) {
    if (!documents[i].contains("provenance")) {
      fmt::print(out,
                 "  ({} has no provenance: written before dtsim recorded it; its \"input\" "
                 "section only)\n",
                 i == 0 ? "A" : "B");
    }
  }
  if (PrintDifferences(out, InputsOf(a), InputsOf(b)) == 0) {
    fmt::print(out, "  none: the results come from the same inputs\n");
  }
  fmt::print(out, "\nfigures\n");
  if (family == "dtsim.simulate_result") {
    PrintSimulateFigures(out, a, b);
  } else {
    if (ListsDiffer(a, b)) {
      fmt::print(out,
                 "  (the {} differ in what they list, see the inputs above: points[i] and\n"
                 "  plans[i] are compared by position and may not be the same point or plan)\n",
                 family == "dtsim.sweep" ? "sweeps' axes" : "searches' settings or shards");
    }
    PrintChangedNumbers(out, a, b, options.limit);
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome DiffCommand(std::span<const std::string> args, std::ostream& out) {
  DiffOptions options;
  const po::options_description description = Describe(options);
  Status parsed = ParseCommandLine(args, description, "files", options.files);
  if (!parsed.ok()) return CommandOutcome::Usage(std::move(parsed).error());
  if (options.help) {
    out << description << "\n";
    return CommandOutcome::Ok();
  }
  if (options.files.size() != 2) {
    return CommandOutcome::Usage(Error(
        fmt::format("expected two result files (A.json B.json), got {}", options.files.size())));
  }
  Status status = Execute(options, out);
  if (!status.ok()) return CommandOutcome::Failure(std::move(status).error());
  return CommandOutcome::Ok();
}

}  // namespace dtsim::cli
