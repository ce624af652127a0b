#include "strategies/pass_times.h"

#include <algorithm>
#include <vector>

#include "network/collective_algorithms.h"
#include "strategies/microbatch_layout.h"
#include "strategies/priced_passes.h"

namespace dtsim::strategies {
namespace {

// Sums a pass's layout: compute-stream work (ops and the collectives it waits for) and, on a
// grid, the SUMMA traffic of the "tp" stream. Collectives are priced on the first group of
// their kind: the first tensor-parallel group, or the first ROW (COL) group of the grid.
class PassTimer final : public LayoutSink {
 public:
  // `sms`: the GPU's SMs shared with communication kernels as the simulation shares them (0
  // where it does not: durations timed inside a run).
  PassTimer(const SimulationConfig& config, int sms) : config_(config), sms_(sms) {}

  Status Time(const MicrobatchLayout& layout, const PricedPass& pass, DurationNs& compute,
              DurationNs& grid) {
    compute_ = &compute;
    grid_ = &grid;
    for (const PricedOp& op : pass.ops) layout.LayOut(op, *this);
    return status_;
  }

  // The comms' time on the compute stream.
  Expected<DurationNs> Time(const std::vector<LayoutComm>& comms) {
    DurationNs total;
    DurationNs unused;
    compute_ = &total;
    grid_ = &unused;
    for (const LayoutComm& comm : comms) Collective(comm);
    if (!status_.ok()) return status_.error();
    return total;
  }

  void Compute(const PricedOp& op) override { *compute_ += op.duration; }

  void Summa(const PricedOp& op, const std::vector<SummaStep>& steps) override {
    std::vector<SummaStepTimes> times;
    times.reserve(steps.size());
    for (const SummaStep& step : steps) {
      SummaStepTimes& t = times.emplace_back();
      for (const LayoutComm& comm : step.before) t.before += CommTime(comm);
      for (const LayoutComm& comm : step.after) t.after += CommTime(comm);
      *grid_ += t.before + t.after;
    }
    *compute_ += SummaSpan(op.duration, times);
  }

  void Collective(const LayoutComm& comm) override { *compute_ += CommTime(comm); }

  // Chunk k + 1 starts when chunk k has ended and shift k (the shifts back to back from the
  // op's start) has arrived: with chunks of d/n and shifts of t_s, the op ends at
  // max(d, (n − 1)·t_s + d/n); the trailing shift follows.
  void Ring(const PricedOp& op, const std::vector<LayoutComm>& shifts,
            const std::vector<LayoutComm>& trailing) override {
    const auto chunks = static_cast<int64_t>(shifts.size()) + 1;
    const DurationNs shift = shifts.empty() ? DurationNs::Zero() : CommTime(shifts.front());
    const DurationNs chunk(op.duration.ns() / chunks);
    *compute_ += std::max(op.duration, shift * static_cast<int64_t>(shifts.size()) + chunk);
    for (const LayoutComm& comm : trailing) *compute_ += CommTime(comm);
  }

  // Left out: they depend on the routing, not the layout.
  void ExpertAllToAll() override {}
  void ExpertTensor(graph::CommKind /*kind*/) override {}

  // The next op starts when both the op and the collective beside it have ended; the two
  // start together. The op does d of work, at (s − b)/s of its speed while the collective (c,
  // holding b of the GPU's s SMs: the engine's SM sharing) runs: d + c·b/s when the collective
  // ends first (c·(s − b)/s <= d), else the collective's c.
  void Overlapped(const PricedOp& op, const LayoutComm& comm) override {
    const network::AlgorithmChoice choice = CommChoice(comm);
    const int64_t sms = sms_;
    const int64_t blocks = std::min<int64_t>(choice.blocks, sms);
    const DurationNs c = choice.time;
    if (sms == 0 || blocks == 0 || c.ns() * (sms - blocks) > op.duration.ns() * sms) {
      *compute_ += std::max(op.duration, c);
      return;
    }
    // As the engine counts it, in SM·ns rounded up to whole ns.
    const int64_t left = op.duration.ns() * sms - c.ns() * (sms - blocks);
    *compute_ += c + DurationNs((left + sms - 1) / sms);
  }

 private:
  // One collective over `ranks` as the analytical network model prices it (its cheapest
  // algorithm for the group's placement).
  Expected<network::AlgorithmChoice> CollectiveTime(const LayoutComm& comm,
                                                    const std::vector<int32_t>& ranks,
                                                    int32_t root) const {
    const network::GroupShape shape = network::ShapeOfGroup(ranks, config_.cluster);
    return network::ChooseCollectiveAlgorithm({.kind = comm.kind,
                                               .size = comm.bytes,
                                               .shape = shape,
                                               .cluster = &config_.cluster,
                                               .ranks = ranks,
                                               .root = root},
                                              "");
  }

  // On the first tensor-parallel group or the first context-parallel group; on a grid, the
  // cheaper of the first ROW (COL) group
  // rooted at member `root` and at member 0, as a rank may be priced either way (the builder's
  // GridComms roots a group without the member at the simulated one).
  Expected<network::AlgorithmChoice> PriceComm(const LayoutComm& comm) const {
    const ParallelPlan& plan = config_.plan;
    std::vector<int32_t> ranks;
    if (comm.group == CommGroup::kTensor) {
      if (plan.tensor < 2) return network::AlgorithmChoice{};
      for (int tp = 0; tp < plan.tensor; ++tp) ranks.push_back(plan.Rank(0, 0, tp));
      return CollectiveTime(comm, ranks, ranks.front());
    }
    if (comm.group == CommGroup::kContext) {
      for (int cp = 0; cp < plan.context; ++cp) ranks.push_back(plan.Rank(cp, 0, 0));
      return CollectiveTime(comm, ranks, ranks.front());
    }
    const int q = plan.grid();
    const int stride = comm.group == CommGroup::kGridRow ? 1 : q;
    for (int c = 0; c < q; ++c) ranks.push_back(plan.Rank(0, 0, c * stride));
    DTSIM_ASSIGN_OR_RETURN(const network::AlgorithmChoice at_root,
                           CollectiveTime(comm, ranks, ranks[static_cast<size_t>(comm.root)]));
    DTSIM_ASSIGN_OR_RETURN(const network::AlgorithmChoice at_first,
                           CollectiveTime(comm, ranks, ranks.front()));
    return at_root.time <= at_first.time ? at_root : at_first;
  }

  network::AlgorithmChoice CommChoice(const LayoutComm& comm) {
    if (!status_.ok()) return {};
    Expected<network::AlgorithmChoice> choice = PriceComm(comm);
    if (!choice.ok()) {
      status_ = std::move(choice).error();
      return {};
    }
    return *choice;
  }
  DurationNs CommTime(const LayoutComm& comm) { return CommChoice(comm).time; }

  const SimulationConfig& config_;
  int sms_ = 0;
  DurationNs* compute_ = nullptr;
  DurationNs* grid_ = nullptr;
  Status status_ = Status::Ok();
};

Expected<PieceTimes> TimePiece(PassTimer& timer, const MicrobatchLayout& layout,
                               const PiecePasses& piece) {
  PieceTimes times;
  DTSIM_RETURN_IF_ERROR(timer.Time(layout, piece.forward, times.forward, times.forward_grid));
  DTSIM_RETURN_IF_ERROR(timer.Time(layout, piece.backward, times.backward, times.backward_grid));
  DTSIM_RETURN_IF_ERROR(timer.Time(layout, piece.recompute, times.recompute, times.recompute_grid));
  return times;
}

}  // namespace

// Step s's broadcasts wait for the task before the op (s < 2) or for chunk s − 2 (the buffer
// they fill) and, the "tp" stream being in order, for the collectives before them; chunk s
// waits for chunk s − 1 and its broadcasts; the reduces after chunk s wait for it and come
// before step s + 1's broadcasts. Collectives of one step's side run back to back, so their
// sum stands for them.
DurationNs SummaSpan(DurationNs duration, const std::vector<SummaStepTimes>& steps) {
  const auto count = static_cast<int64_t>(steps.size());
  if (count == 0) return duration;
  DurationNs tp_free;  // when the "tp" stream is free, from the op's start
  std::vector<DurationNs> chunk_end;
  chunk_end.reserve(steps.size());
  for (int64_t s = 0; s < count; ++s) {
    const SummaStepTimes& step = steps[static_cast<size_t>(s)];
    const DurationNs buffer_free =
        s >= 2 ? chunk_end[static_cast<size_t>(s - 2)] : DurationNs::Zero();
    DurationNs chunk_start = s > 0 ? chunk_end.back() : DurationNs::Zero();
    if (step.before > DurationNs::Zero()) {
      tp_free = std::max(tp_free, buffer_free) + step.before;
      chunk_start = std::max(chunk_start, tp_free);
    }
    chunk_end.push_back(chunk_start + LayoutChunk(duration, s, count));
    if (step.after > DurationNs::Zero()) tp_free = std::max(tp_free, chunk_end.back()) + step.after;
  }
  return chunk_end.back();
}

Expected<PassTimes> PricePassTimes(const ResolvedConfig& config, const models::OpCostModel& cost) {
  DTSIM_ASSIGN_OR_RETURN(const PricedModel model, PriceModel(config, cost));
  const MicrobatchLayout layout(config);
  PassTimer timer(config, cost.TimedInRun() ? 0 : config.gpu.sms);
  PassTimes times;
  times.recompute_every = model.recompute_every;
  for (size_t kind = 0; kind < times.layers.size(); ++kind) {
    DTSIM_ASSIGN_OR_RETURN(times.layers[kind], TimePiece(timer, layout, model.layers[kind]));
    if (times.recompute_every > 1) {
      DTSIM_ASSIGN_OR_RETURN(times.kept[kind], TimePiece(timer, layout, model.kept[kind]));
    }
  }
  DTSIM_ASSIGN_OR_RETURN(times.embedding, TimePiece(timer, layout, model.embedding));
  DTSIM_ASSIGN_OR_RETURN(times.output, TimePiece(timer, layout, model.output));
  DTSIM_ASSIGN_OR_RETURN(const DurationNs reduce,
                         timer.Time(layout.OutputComms(models::Pass::kBackward)));
  times.output.backward += reduce;
  DTSIM_ASSIGN_OR_RETURN(const DurationNs gather,
                         timer.Time(layout.OutputComms(models::Pass::kForward)));
  times.output.forward += gather;
  return times;
}

}  // namespace dtsim::strategies
