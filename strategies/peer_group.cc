#include "strategies/peer_group.h"

#include <algorithm>
#include <utility>

#include "strategies/categories.h"
#include "strategies/microbatch_layout.h"

namespace dtsim::strategies {

using graph::CommKind;
using graph::TaskId;
using graph::TaskKind;

PeerGroup::PeerGroup(graph::TaskGraphBuilder& builder, std::vector<int32_t> ranks,
                     std::vector<int32_t> logical)
    : builder_(builder), ranks_(std::move(ranks)), logical_(std::move(logical)) {
  for (int32_t rank : ranks_) {
    compute_.push_back(RoleStream(builder_, rank, StreamRole::kCompute));
    tensor_.push_back(RoleStream(builder_, rank, StreamRole::kTensor));
    send_forward_.push_back(RoleStream(builder_, rank, StreamRole::kSendForward));
    send_backward_.push_back(RoleStream(builder_, rank, StreamRole::kSendBackward));
    last_.emplace_back();
    tensor_tail_.emplace_back();
  }
}

void PeerGroup::Add(DurationNs duration, std::string_view name, std::string_view category) {
  if (category != pending_category_ || name != pending_name_) {
    Flush();
    pending_name_ = name;
    pending_category_ = category;
    // Interned from the caller's text: a name kept in one place hits the table's recent cache.
    pending_name_id_ = builder_.Name(name);
    pending_category_id_ = category.empty() ? uint16_t{0} : builder_.Category(category);
  }
  pending_ += duration;
}

void PeerGroup::Flush() {
  if (pending_ > DurationNs::Zero()) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      last_[i] = builder_.AddTask(compute_[i], TaskKind::kCompute, pending_name_id_,
                                  pending_category_id_, pending_);
    }
    ApplyWaits();
  }
  pending_ = DurationNs::Zero();
}

void PeerGroup::Mark(std::string_view name, std::string_view category) {
  Flush();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const TaskId mark =
        builder_.AddTask(compute_[i], TaskKind::kDelay, name, category, DurationNs::Zero());
    if (last_[i]) builder_.AddDependency(mark, *last_[i]);
    last_[i] = mark;
  }
  ApplyWaits();
}

void PeerGroup::WaitBefore(const std::vector<TaskId>& waits) {
  Flush();
  waits_.resize(std::max(waits_.size(), waits.size()));
  for (size_t i = 0; i < waits.size(); ++i) waits_[i].push_back(waits[i]);
}

void PeerGroup::Wait(size_t peer, TaskId task) {
  if (peer >= waits_.size()) return;
  for (const TaskId wait : waits_[peer]) builder_.AddDependency(task, wait);
}

graph::CommId PeerGroup::TensorCollective(CommKind kind, Bytes size) {
  if (!tensor_groups_) {
    tensor_groups_ = std::pair{builder_.MakeGroup(ranks_), builder_.MakeGroup(logical_)};
  }
  return builder_.AddCollective(kind, size, tensor_groups_->first, tensor_groups_->second);
}

void PeerGroup::Collective(CommKind kind, Bytes size, std::string_view name,
                           std::string_view category) {
  Flush();
  if (logical_.size() < 2) return;
  const graph::CommId comm = TensorCollective(kind, size);
  Post(std::vector<graph::CommId>(ranks_.size(), comm), name, category);  // applies waits
}

void PeerGroup::Overlapped(CommKind kind, Bytes size, std::string_view comm_name,
                           DurationNs duration, std::string_view name, std::string_view category) {
  Flush();
  if (logical_.size() < 2) {
    Add(duration, name, category);
    return;
  }
  if (duration <= DurationNs::Zero()) {  // nothing to hide it behind
    Collective(kind, size, comm_name);
    return;
  }
  const graph::CommId comm = TensorCollective(kind, size);
  // Not TensorTask: what waits for the gradients waits for the compute after it anyway.
  std::vector<TaskId> gathered;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    gathered.push_back(builder_.AddCollectiveTask(tensor_[i], comm, comm_name, kTensorCategory));
    if (last_[i]) builder_.AddDependency(gathered.back(), *last_[i]);
  }
  Add(duration, name, category);
  Flush();
  WaitBefore(gathered);
}

void PeerGroup::Post(const std::vector<graph::CommId>& comms, std::string_view name,
                     std::string_view category) {
  Flush();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    last_[i] = builder_.AddCollectiveTask(compute_[i], comms[i], name, category);
  }
  ApplyWaits();
}

std::vector<TaskId> PeerGroup::PostAside(const std::vector<graph::CommId>& comms,
                                         std::string_view name, std::string_view category) {
  Flush();
  std::vector<TaskId> tasks;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const graph::StreamId stream = RoleStream(builder_, ranks_[i], StreamRole::kExpert);
    tasks.push_back(builder_.AddCollectiveTask(stream, comms[i], name, category));
    if (last_[i]) builder_.AddDependency(tasks.back(), *last_[i]);
  }
  return tasks;
}

std::vector<TaskId> PeerGroup::CollectiveAside(CommKind kind, Bytes size, std::string_view name,
                                               std::string_view category) {
  Flush();
  if (logical_.size() < 2) return {};
  const graph::CommId comm = TensorCollective(kind, size);
  return PostAside(std::vector<graph::CommId>(ranks_.size(), comm), name, category);
}

// `duration` on each peer's "host" stream after its last task and whatever the next task is
// asked to wait for.
std::vector<TaskId> PeerGroup::HostTasks(DurationNs duration, std::string_view name,
                                         std::string_view category) {
  std::vector<TaskId> tasks;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const graph::StreamId stream = RoleStream(builder_, ranks_[i], StreamRole::kHost);
    tasks.push_back(builder_.AddTask(stream, TaskKind::kDelay, name, category, duration));
    if (last_[i]) builder_.AddDependency(tasks.back(), *last_[i]);
    Wait(i, tasks.back());
  }
  return tasks;
}

void PeerGroup::Host(DurationNs duration, std::string_view name, std::string_view category) {
  Flush();
  if (duration <= DurationNs::Zero()) return;
  WaitBefore(HostTasks(duration, name, category));
}

void PeerGroup::PostBeside(const std::vector<graph::CommId>& comms, std::string_view name,
                           std::string_view category, DurationNs host, std::string_view host_name) {
  Flush();
  if (host <= DurationNs::Zero()) return Post(comms, name, category);
  const std::vector<TaskId> issued = HostTasks(host, host_name, category);
  Post(comms, name, category);
  WaitBefore(issued);
}

void PeerGroup::Summa(DurationNs duration, std::string_view name, std::string_view comm_name,
                      std::string_view category, const std::vector<SummaStepComms>& steps,
                      bool output_reduced) {
  Flush();
  const auto count = static_cast<int64_t>(steps.size());
  std::vector<TaskId> reduced;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const std::optional<TaskId> start = last_[i];
    std::vector<TaskId> chunks;
    for (int64_t s = 0; s < count; ++s) {
      const SummaStepComms& step = steps[static_cast<size_t>(s)];
      const std::optional<TaskId> buffer_free = s >= 2 ? chunks[static_cast<size_t>(s - 2)] : start;
      std::vector<TaskId> inputs;
      for (const std::vector<graph::CommId>& comms : step.before) {
        inputs.push_back(TensorTask(i, comms[i], comm_name));
        if (buffer_free) builder_.AddDependency(inputs.back(), *buffer_free);
      }
      const DurationNs part = LayoutChunk(duration, s, count);
      chunks.push_back(builder_.AddTask(compute_[i], TaskKind::kCompute, name, category, part));
      for (TaskId input : inputs) builder_.AddDependency(chunks.back(), input);
      if (s == 0 && output_reduced) Wait(i, chunks.back());
      for (const std::vector<graph::CommId>& comms : step.after) {
        builder_.AddDependency(TensorTask(i, comms[i], comm_name), chunks.back());
      }
    }
    last_[i] = chunks.back();
    if (output_reduced && !steps.back().after.empty()) reduced.push_back(*tensor_tail_[i]);
  }
  if (output_reduced) {
    waits_.clear();
    WaitBefore(reduced);
  }
}

void PeerGroup::Ring(DurationNs duration, std::string_view name, std::string_view comm_name,
                     std::string_view category,
                     const std::vector<std::vector<graph::CommId>>& shifts,
                     const std::vector<graph::CommId>& trailing) {
  Flush();
  // The "cp" streams exist only in graphs with ring attention.
  for (size_t i = context_.size(); i < ranks_.size(); ++i) {
    context_.push_back(RoleStream(builder_, ranks_[i], StreamRole::kContext));
  }
  const auto count = static_cast<int64_t>(shifts.size()) + 1;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const std::optional<TaskId> start = last_[i];
    std::optional<TaskId> previous_shift;
    for (int64_t k = 0; k < count; ++k) {
      const DurationNs part = LayoutChunk(duration, k, count);
      const TaskId chunk = builder_.AddTask(compute_[i], TaskKind::kCompute, name, category, part);
      if (previous_shift) builder_.AddDependency(chunk, *previous_shift);
      if (k == 0) Wait(i, chunk);
      if (k + 1 < count) {
        previous_shift = builder_.AddCollectiveTask(context_[i], shifts[static_cast<size_t>(k)][i],
                                                    comm_name, kContextCategory);
        if (k == 0 && start) builder_.AddDependency(*previous_shift, *start);
      }
      last_[i] = chunk;
    }
    if (!trailing.empty()) {
      const TaskId home =
          builder_.AddCollectiveTask(context_[i], trailing[i], comm_name, kContextCategory);
      builder_.AddDependency(home, *last_[i]);
      // The compute stream's next task waits for the gradients to arrive.
      last_[i] =
          builder_.AddTask(compute_[i], TaskKind::kCompute, name, category, DurationNs::Zero());
      builder_.AddDependency(*last_[i], home);
    }
  }
  waits_.clear();
}

TaskId PeerGroup::GradientsReady(size_t peer) {
  Flush();
  if (!tensor_tail_[peer]) return *last_[peer];
  const TaskId join =
      builder_.AddTask(RoleStream(builder_, ranks_[peer], StreamRole::kTensorJoin),
                       TaskKind::kCompute, "gradients ready", kTensorCategory, DurationNs::Zero());
  builder_.AddDependency(join, *last_[peer]);
  builder_.AddDependency(join, *tensor_tail_[peer]);
  return join;
}

void PeerGroup::Recv(const std::vector<int32_t>& peers, int64_t tag, Bytes size,
                     std::string_view name) {
  Flush();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    last_[i] = builder_.AddRecv(compute_[i], peers[i], tag, name, kPipelineCategory, size);
  }
  ApplyWaits();
}

void PeerGroup::Send(const std::vector<int32_t>& peers, int64_t tag, Bytes size, models::Pass pass,
                     std::string_view name) {
  Flush();
  const bool forward = pass == models::Pass::kForward;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const TaskId send = builder_.AddSend(forward ? send_forward_[i] : send_backward_[i], peers[i],
                                         size, tag, name, kPipelineCategory);
    if (last_[i]) builder_.AddDependency(send, *last_[i]);
  }
}

TaskId PeerGroup::TensorTask(size_t peer, graph::CommId comm, std::string_view name) {
  tensor_tail_[peer] = builder_.AddCollectiveTask(tensor_[peer], comm, name, kTensorCategory);
  return *tensor_tail_[peer];
}

void PeerGroup::ApplyWaits() {
  for (size_t i = 0; i < waits_.size(); ++i) Wait(i, *last_[i]);
  waits_.clear();
}

}  // namespace dtsim::strategies
