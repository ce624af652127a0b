#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "sim/base/parallel.h"
#include "strategies/config.h"
#include "strategies/search.h"
#include "strategies/simulate.h"
#include "tools/api/api.h"
#include "tools/results/provenance.h"
#include "tools/results/simulate_result.h"

namespace dtsim::api {
namespace {

using results::SweepPoint;

Status Evaluate(const Json& base, const std::vector<Axis>& axes, const std::string& source,
                SweepPoint& point) {
  Json json = base;
  for (size_t a = 0; a < axes.size(); ++a) {
    DTSIM_RETURN_IF_ERROR(
        strategies::ApplyOverride(json, axes[a].key + "=" + axes[a].values[point.choice[a]]));
  }
  Expected<strategies::ResolvedConfig> config = strategies::ConfigFromJson(json, source);
  if (!config.ok()) return std::move(config).error().InFile(source);
  Expected<strategies::SimulationResult> result = strategies::Simulate(*config);
  if (!result.ok()) return std::move(result).error().InFile(source);
  point.result = results::SimulateResultJson(*config, *result);
  point.figures = strategies::FiguresOf(*result);
  for (const models::MemoryBreakdown& stage : result->iteration->stats.stage_memory) {
    point.memory_bytes = std::max(point.memory_bytes, stage.total());
  }
  return Status::Ok();
}

// Every combination of the axes' values, the first axis changing slowest.
std::vector<SweepPoint> Points(const std::vector<Axis>& axes) {
  std::vector<SweepPoint> points(1);
  for (const Axis& axis : axes) {
    std::vector<SweepPoint> next;
    for (const SweepPoint& point : points) {
      for (size_t v = 0; v < axis.values.size(); ++v) {
        next.push_back(point);
        next.back().choice.push_back(v);
      }
    }
    points = std::move(next);
  }
  return points;
}

// A sweep keeps every point's full result in memory (about 7 kB of JSON text each, several
// times that as a parsed document) and simulates each: a million points is hours of work and
// gigabytes, a billion cannot finish. The limit is checked before any point is laid out.
constexpr size_t kMaxSweepPoints = 100'000;

Status CheckSweepSize(const std::vector<Axis>& axes) {
  size_t points = 1;
  bool over = false;
  std::string product;
  for (const Axis& axis : axes) {
    const size_t values = std::max<size_t>(axis.values.size(), 1);
    over = over || points > kMaxSweepPoints / values;  // else points × values <= the limit
    if (!over) points *= values;
    product += fmt::format("{}{}", product.empty() ? "" : " × ", axis.values.size());
  }
  if (!over) return Status::Ok();
  return Error(fmt::format("the sweep has {} points, more than the {} one sweep runs (each is "
                           "simulated and keeps its full result): vary fewer values, or split "
                           "it into several sweeps",
                           product, kMaxSweepPoints),
               "vary");
}

// What would make points silently other than asked: a value listed twice (two identical
// points), a key whose values replace an earlier axis's or a --set's at every point.
Status CheckAxis(const std::vector<Axis>& axes, size_t a, const ConfigInput& input) {
  const Axis& axis = axes[a];
  if (axis.values.empty()) return Error("no values to vary it over", axis.key);
  // Each value parsed once and kept ordered (JSON's order compares 1 and 1.0 as equal): an axis
  // may hold 100,000 values.
  std::set<OrderedJson> seen;
  for (const std::string& value : axis.values) {
    if (!seen.insert(ValueJson(value)).second) {
      return Error("a value listed twice (two identical points)", axis.key, value);
    }
  }
  for (size_t b = 0; b < a; ++b) {
    if (axes[b].key == axis.key) return Error("key varied twice", axis.key);
    if (strategies::OverrideReplaces(axis.key, axes[b].key)) {
      return Error(fmt::format("its values would replace the varied {} at every point: vary "
                               "{} inside the values of {}, or put {} first",
                               axes[b].key, axes[b].key, axis.key, axis.key),
                   axis.key);
    }
  }
  for (const std::string& set : input.overrides) {
    if (strategies::OverrideReplaces(axis.key, set)) {
      return Error(fmt::format("varied and set (--set {}): the varied values would replace the "
                               "set one at every point; drop one",
                               set),
                   axis.key);
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<results::SweepDocument> RunSweep(const ConfigInput& input, const std::vector<Axis>& axes,
                                          int threads, const ProgressCallback& progress) {
  if (axes.empty()) return Error("give at least one key to vary", "vary");
  // As search checks it (the command line's -j checks it before the call).
  if (threads < 0) return Error("must be at least 0", "threads", std::to_string(threads));
  DTSIM_RETURN_IF_ERROR(CheckSweepSize(axes));
  DTSIM_ASSIGN_OR_RETURN(const Json base, ReadConfigInput(input));
  results::RecordConfig(base, input.overrides, nullptr);
  for (size_t a = 0; a < axes.size(); ++a) {
    DTSIM_RETURN_IF_ERROR(CheckAxis(axes, a, input));
    DTSIM_RETURN_IF_ERROR(CheckKey(base, axes[a], input.Source()));
  }
  std::vector<SweepPoint> points = Points(axes);
  std::atomic<size_t> done{0};
  ParallelFor(points.size(), threads > 0 ? threads : DefaultThreads(), [&](size_t i) {
    if (Status status = Evaluate(base, axes, input.Source(), points[i]); !status.ok()) {
      points[i].error = status.error().ToString();
    }
    if (progress) progress("simulating", ++done, points.size());
  });
  const bool any = std::any_of(points.begin(), points.end(),
                               [](const SweepPoint& p) { return p.result.has_value(); });
  if (!any) {
    return Error(fmt::format("every point failed; the first: {}", points.front().error));
  }
  results::SweepDocument sweep{.config = input.Source(), .set = input.overrides};
  for (const Axis& axis : axes) {
    results::SweepAxis& out = sweep.axes.emplace_back();
    out.key = axis.key;
    out.texts = axis.values;
    for (const std::string& value : axis.values) out.values.push_back(ValueJson(value));
  }
  sweep.points = std::move(points);
  return sweep;
}

}  // namespace dtsim::api
