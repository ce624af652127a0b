// Ranking the simulated plans of a search (strategies/search.h): by RankingNs, plans that
// simulated alike folded into the first of them, the best re-sorted by the flow model.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strategies/search.h"

namespace dtsim::strategies {

int64_t RankingNs(const PlanFigures& figures, bool flow) {
  const std::optional<double>& run =
      flow && figures.flow_time_to_train_s ? figures.flow_time_to_train_s : figures.time_to_train_s;
  if (run) {
    // Whole seconds of a run fit: 10^18 ns is 31 years.
    return static_cast<int64_t>(std::llround(std::min(*run * 1e9, 1e18)));
  }
  return (flow ? figures.flow_average_iteration_time.value_or(figures.average_iteration_time)
               : figures.average_iteration_time)
      .ns();
}

size_t SearchResult::Count(PlanStatus status) const {
  return static_cast<size_t>(std::count_if(
      plans.begin(), plans.end(), [status](const EvaluatedPlan& p) { return p.status == status; }));
}

std::vector<std::pair<std::string, size_t>> SearchResult::PrunedByReason() const {
  std::map<std::string, size_t> counts;
  for (const EvaluatedPlan& plan : plans) {
    if (plan.status == PlanStatus::kInvalid || plan.status == PlanStatus::kOutOfMemory) {
      ++counts[plan.reason];
    }
  }
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

namespace {

// Two simulations that agree in every figure the ranking and the memory check read.
bool SimulatedAlike(const EvaluatedPlan& a, const EvaluatedPlan& b) {
  const PlanFigures& x = *a.figures;
  const PlanFigures& y = *b.figures;
  const TimeBreakdown& p = x.breakdown;
  const TimeBreakdown& q = y.breakdown;
  return a.choice.global_batch == b.choice.global_batch && a.memory_bytes == b.memory_bytes &&
         x.iteration_time == y.iteration_time &&
         x.average_iteration_time == y.average_iteration_time && p.compute == q.compute &&
         p.recompute == q.recompute && p.tensor == q.tensor && p.expert == q.expert &&
         p.context == q.context && p.pipeline == q.pipeline && p.data_exposed == q.data_exposed &&
         p.optimizer == q.optimizer && p.idle == q.idle;
}

// Splits a plan label into its " · " parts.
std::vector<std::string> LabelParts(const std::string& label) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = label.find(" · "); at != std::string::npos; at = label.find(" · ", start)) {
    parts.push_back(label.substr(start, at - start));
    start = at + std::string(" · ").size();
  }
  parts.push_back(label.substr(start));
  return parts;
}

}  // namespace

std::vector<std::string> SameAsLabels(const SearchResult& result, size_t ranked,
                                      const SearchSpace& space) {
  const EvaluatedPlan& kept = result.plans[ranked];
  const std::vector<std::string> own = LabelParts(PlanLabel(kept.choice, space));
  std::vector<std::string> others;
  for (const EvaluatedPlan& plan : result.plans) {
    if (plan.same_as != kept.index) continue;
    std::string differs;
    const std::vector<std::string> parts = LabelParts(PlanLabel(plan.choice, space));
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i < own.size() && parts[i] == own[i]) continue;
      differs += (differs.empty() ? "" : " · ") + parts[i];
    }
    others.push_back(differs);
  }
  return others;
}

void RankPlans(SearchResult& result, int rerank) {
  std::vector<size_t>& ranking = result.ranking;
  ranking.clear();
  for (size_t i = 0; i < result.plans.size(); ++i) {
    result.plans[i].same_as.reset();
    if (result.plans[i].status == PlanStatus::kSimulated) ranking.push_back(i);
  }
  const auto by = [&result](auto time) {
    return [&result, time](size_t a, size_t b) {
      const EvaluatedPlan& pa = result.plans[a];
      const EvaluatedPlan& pb = result.plans[b];
      return std::tuple(time(*pa.figures), pa.index) < std::tuple(time(*pb.figures), pb.index);
    };
  };
  std::sort(ranking.begin(), ranking.end(),
            by([](const PlanFigures& f) { return RankingNs(f, false); }));
  // Alike plans sort next to each other (same time); each keeps the first of its run.
  std::vector<size_t> kept;
  for (size_t i : ranking) {
    EvaluatedPlan& plan = result.plans[i];
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
      const EvaluatedPlan& earlier = result.plans[*it];
      if (RankingNs(*earlier.figures, false) != RankingNs(*plan.figures, false)) break;
      if (SimulatedAlike(earlier, plan)) {
        plan.same_as = earlier.index;
        break;
      }
    }
    if (!plan.same_as) kept.push_back(i);
  }
  ranking = std::move(kept);
  const auto flowed =
      ranking.begin() + std::min<std::ptrdiff_t>(std::max(rerank, 0), std::ssize(ranking));
  std::sort(ranking.begin(), flowed, by([](const PlanFigures& f) {
              return std::tuple(RankingNs(f, true), RankingNs(f, false));
            }));
}

}  // namespace dtsim::strategies
