#include "traces/replay_device_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace dtsim::traces::replay_detail {
namespace {

using graph::TaskId;
using graph::TaskKind;

// The group a collective over `size` ranks is priced over when the job loads only `members` of
// them (sorted, distinct graph ranks): the ranks the trace records for it (`known`, when they
// are graph ranks, as many and include the members); else the aligned block of `size`
// consecutive ranks holding the members, as launchers number the ranks of a tensor- or
// data-parallel group (rank 127's pair is 126 and 127, on one node); else the members and the
// smallest other ranks.
std::vector<int32_t> PricedGroup(const std::vector<int32_t>& members, int32_t size,
                                 std::span<const int32_t> known) {
  const auto holds_members = [&](const std::vector<int32_t>& group) {
    return static_cast<int64_t>(group.size()) == size &&
           std::adjacent_find(group.begin(), group.end()) == group.end() &&
           std::includes(group.begin(), group.end(), members.begin(), members.end());
  };
  std::vector<int32_t> group(known.begin(), known.end());
  std::sort(group.begin(), group.end());
  if (holds_members(group)) return group;
  const int64_t first = static_cast<int64_t>(members.front()) / size * size;
  if (first + size <= INT32_MAX) {
    group.resize(static_cast<size_t>(size));
    std::iota(group.begin(), group.end(), static_cast<int32_t>(first));
    if (holds_members(group)) return group;
  }
  group = members;
  for (int32_t rank = 0; static_cast<int64_t>(group.size()) < size; ++rank) {
    if (!std::binary_search(members.begin(), members.end(), rank)) group.push_back(rank);
  }
  std::sort(group.begin(), group.end());
  return group;
}

}  // namespace

TaskId DeviceOpTasks::Add(graph::StreamId stream, const DeviceEvent& op, TaskId& chain_first) {
  ++stats_->gpu_tasks;
  const std::string_view name = trace_.Name(op.name);
  if (op.collective != kNone) {
    const CollectiveInfo& info = trace_.collectives[op.collective];
    if (info.size_unknown && info.kind != graph::CommKind::kSendRecv) {
      // No size to price it by: its measured time stands, whatever the network.
      if (stats_->unsized_collectives++ == 0) stats_->first_unsized = std::string(name);
      return builder_->AddTask(stream, TaskKind::kCompute, name, "nccl", op.duration);
    }
    if (info.kind != graph::CommKind::kSendRecv) {
      const uint32_t shared = job_->collectives.of_rank[job_index_][op.collective];
      const bool world = trace_.world_size > 0 && info.group_size == trace_.world_size;
      const int32_t group_size = PricedGroupSize(info);
      if (group_size != info.group_size) ++stats_->rescaled_collectives;
      if (world && options_.rewrite_world_collectives) {
        if (const auto steps = options_.rewrite_world_collectives(info, group_size)) {
          ++stats_->rewritten_collectives;
          return RewriteChain(stream, name, *steps, shared, group_size, chain_first);
        }
      }
      const graph::CommId comm =
          Collective(info.kind, info.bytes, name, shared, 0, group_size, KnownRanks(info));
      CommTable& comms = job_->comms;
      if (shared == kNone) {
        comms.durations[comm.value()] = op.duration;
        comms.sources[comm.value()] = {job_index_, op.collective, kNone};
        ++stats_->collectives;
      } else if (comms.sources[comm.value()].trace == kNone) {  // its first member
        comms.durations[comm.value()] = job_->collectives.collectives[shared].transfer;
        comms.sources[comm.value()] = {job_index_, op.collective, shared};
        ++stats_->collectives;
        ++stats_->job_collectives;
      }
      if (job_index_ < options_.collective_waits.size() &&
          op.collective < options_.collective_waits[job_index_].size() &&
          options_.collective_waits[job_index_][op.collective] > DurationNs::Zero()) {
        const DurationNs wait = options_.collective_waits[job_index_][op.collective];
        chain_first =
            builder_->AddTask(stream, TaskKind::kDelay, "waiting for peers", "peer_wait", wait);
        ++stats_->peer_waits;
        stats_->peer_wait_time += wait;
      }
      return builder_->AddCollectiveTask(stream, comm, name, "nccl");
    }
    return builder_->AddTask(stream, TaskKind::kCompute, name, "nccl", op.duration);
  }
  switch (op.kind) {
    case DeviceEventKind::kKernel:
      return builder_->AddTask(stream, TaskKind::kCompute, name, "kernel", Duration(op));
    case DeviceEventKind::kMemcpy:
      return builder_->AddTask(stream, TaskKind::kMemcpy, name, "memcpy", Duration(op));
    case DeviceEventKind::kMemset:
      return builder_->AddTask(stream, TaskKind::kMemcpy, name, "memset", Duration(op));
  }
  return TaskId::Invalid();
}

graph::CommId DeviceOpTasks::Collective(graph::CommKind kind, Bytes bytes, std::string_view name,
                                        uint32_t shared, size_t step, int32_t group_size,
                                        std::span<const int32_t> known) {
  CommTable& comms = job_->comms;
  if (shared != kNone) {
    if (const auto it = comms.shared.find({shared, step}); it != comms.shared.end()) {
      return it->second;
    }
  }
  std::vector<int32_t> members{job_->ranks[job_index_]};
  if (shared != kNone) {
    members.clear();
    for (const auto& member : job_->collectives.collectives[shared].members) {
      members.push_back(job_->ranks[member.first]);
    }
    std::sort(members.begin(), members.end());
  }
  // The job's ranks stand for the whole group, so a broadcast or reduce is rooted at the
  // first: the root the real job used (a global rank, often another process's) does not
  // change what the network model charges for the collective.
  const bool rooted = kind == graph::CommKind::kBroadcast || kind == graph::CommKind::kReduce;
  const graph::CommId comm =
      builder_->AddCollective(kind, bytes, members, name, {}, rooted ? members.front() : -1);
  if (group_size > static_cast<int64_t>(members.size())) {
    builder_->PriceAs(comm, PricedGroup(members, group_size, known));
  }
  if (comms.durations.size() <= comm.value()) {
    comms.durations.resize(comm.value() + 1);
    comms.sources.resize(comm.value() + 1);
  }
  if (shared != kNone) comms.shared.emplace(std::make_pair(shared, step), comm);
  return comm;
}

TaskId DeviceOpTasks::RewriteChain(graph::StreamId stream, std::string_view name,
                                   const std::vector<CollectiveRewriteStep>& steps, uint32_t shared,
                                   int32_t group_size, TaskId& chain_first) {
  TaskId last;
  for (size_t k = 0; k < steps.size(); ++k) {
    const CollectiveRewriteStep& step = steps[k];
    const std::string step_name = fmt::format("{} ({})", name, step.name);
    if (step.collective) {
      const bool first_member = shared == kNone || !job_->comms.shared.contains({shared, k + 1});
      const graph::CommId comm =
          Collective(*step.collective, step.bytes, step_name, shared, k + 1, group_size, {});
      if (first_member) ++stats_->collectives;
      last = builder_->AddCollectiveTask(stream, comm, step_name, "nccl");
    } else {
      last = builder_->AddTask(stream, TaskKind::kCompute, step_name, "compression", step.duration);
    }
    if (!chain_first.valid()) chain_first = last;
  }
  return last;
}

DurationNs DeviceOpTasks::Duration(const DeviceEvent& op) {
  for (const KernelSpeedup& speedup : options_.speedups) {
    if (speedup.rank >= 0 && speedup.rank != job_->ranks[job_index_]) continue;
    if (InKernelClass(speedup.kernels, op.kind, trace_.Name(op.name))) {
      ++stats_->sped_up_ops;
      return ClampedNs(std::round(static_cast<double>(op.duration.ns()) / speedup.factor));
    }
  }
  return op.duration;
}

std::span<const int32_t> DeviceOpTasks::KnownRanks(const CollectiveInfo& info) const {
  if (!job_->global_ranks || PricedGroupSize(info) != info.group_size) return {};
  return info.group_ranks;
}

int32_t DeviceOpTasks::PricedGroupSize(const CollectiveInfo& info) const {
  if (options_.world_group_size > 0 && trace_.world_size > 0 &&
      info.group_size == trace_.world_size) {
    return options_.world_group_size;
  }
  return info.group_size;
}
}  // namespace dtsim::traces::replay_detail
