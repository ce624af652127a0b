#include "sim/engine/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "sim/base/check.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim::engine {

using graph::CommId;
using graph::StreamId;
using graph::Task;
using graph::TaskId;

namespace {

// FNV-1a over 64-bit words: cheap enough to run on every event.
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
inline uint64_t Mix(uint64_t hash, uint64_t word) { return (hash ^ word) * kFnvPrime; }

// A time near or past the horizon, readably: "9007199.255 s (104 days)"; a saturated one
// (sim/base/time.h) as what it is.
std::string LongDuration(DurationNs duration) {
  if (duration == DurationNs::Max()) return "more than 292 years";
  constexpr double kSecondsPerDay = 86400;
  const double days = duration.ToSecondsDouble() / kSecondsPerDay;
  if (days < 2) return FormatDuration(duration);
  return fmt::format("{} ({:.0f} days)", FormatDuration(duration), days);
}

}  // namespace

Simulator::Simulator(const graph::TaskGraph& graph, CommunicationModel& model)
    : graph_(graph),
      model_(model),
      fingerprint_(kFnvOffset),
      remaining_dependencies_(graph.task_count()),
      state_(graph.task_count(), TaskState::kWaiting),
      stream_head_(graph.stream_count(), 0),
      stream_head_task_(graph.stream_count(), TaskId::Invalid()),
      stream_holder_(graph.stream_count(), TaskId::Invalid()),
      ready_(graph.stream_count()),
      choice_scheduled_(graph.stream_count(), 0),
      arrived_(graph.comm_count(), 0),
      completion_scheduled_(graph.comm_count(), 0),
      comm_finished_(graph.comm_count(), 0),
      working_(static_cast<size_t>(graph.rank_count()), 0),
      busy_since_(static_cast<size_t>(graph.rank_count())),
      busy_(static_cast<size_t>(graph.rank_count())) {
  for (uint32_t t = 0; t < graph.task_count(); ++t) {
    remaining_dependencies_[t] = static_cast<uint32_t>(graph.dependencies(TaskId(t)).size());
  }
  for (uint32_t s = 0; s < graph.stream_count(); ++s) {
    const std::span<const TaskId> tasks = graph.stream_tasks(StreamId(s));
    if (!tasks.empty() && graph.stream(StreamId(s)).order == graph::StreamOrder::kInOrder) {
      stream_head_task_[s] = tasks.front();
    }
  }
  times_.task_start.resize(graph.task_count());
  times_.task_end.resize(graph.task_count());
  times_.comm_start.resize(graph.comm_count());
  times_.comm_end.resize(graph.comm_count());
}

HandlerId Simulator::RegisterHandler(EventHandler& handler) {
  handlers_.push_back(&handler);
  DTSIM_CHECK(kFirstModelHandler + handlers_.size() - 1 < kStreamChoice, "too many event handlers");
  return kFirstModelHandler + static_cast<HandlerId>(handlers_.size() - 1);
}

EventId Simulator::Schedule(TimeNs time, HandlerId handler, uint64_t payload) {
  DTSIM_CHECK(time >= now_, "event scheduled in the past");
  DTSIM_CHECK(handler >= kFirstModelHandler && handler - kFirstModelHandler < handlers_.size(),
              "unknown event handler");
  if (time > kHorizon) [[unlikely]] {
    PassHorizon(time, fmt::format("an event of the \"{}\" communication model", model_.name()));
  }
  return queue_.Push(time, 0, handler, payload);
}

void Simulator::CompleteAt(CommId comm, TimeNs time) {
  DTSIM_CHECK(time >= now_, "communication completed in the past");
  if (time > kHorizon) [[unlikely]] {
    PassHorizon(time,
                fmt::format("{}, priced at {} by the \"{}\" communication model,",
                            graph_.DescribeComm(comm),
                            // A saturated end stays saturated: now + Max is Max, not Max - now.
                            LongDuration(time == TimeNs::Max() ? DurationNs::Max() : time - now_),
                            model_.name()));
  }
  const graph::Communication& c = graph_.comm(comm);
  DTSIM_CHECK(
      arrived_[comm.value()] == c.participant_count || (c.eager && arrived_[comm.value()] > 0),
      "completing a communication that has not started");
  DTSIM_CHECK(!completion_scheduled_[comm.value()], "communication completed twice");
  completion_scheduled_[comm.value()] = 1;
  queue_.Push(time, 0, kCommEnd, comm.value());
}

void Simulator::ShareSms(int sms) {
  DTSIM_CHECK(!ran_, "Simulator::ShareSms after Run");
  DTSIM_CHECK(sms > 0 && sms <= kMaxSms, "Simulator::ShareSms: SM count out of range");
  sms_ = sms;
  held_blocks_.assign(static_cast<size_t>(graph_.rank_count()), 0);
  shared_compute_.assign(static_cast<size_t>(graph_.rank_count()), {});
}

Status Simulator::Run() {
  DTSIM_CHECK(!ran_, "Simulator::Run called twice");
  ran_ = true;
  model_.Attach(*this);
  if (sms_ > 0) {
    comm_blocks_.resize(graph_.comm_count());
    for (uint32_t c = 0; c < graph_.comm_count(); ++c) {
      comm_blocks_[c] =
          static_cast<uint16_t>(std::clamp(model_.KernelBlocks(CommId(c)), 0, kMaxSms));
    }
  }
  for (uint32_t s = 0; s < graph_.stream_count(); ++s) {
    const StreamId stream(s);
    if (graph_.stream(stream).order == graph::StreamOrder::kInOrder) {
      StartStreamHead(stream);
      continue;
    }
    for (TaskId task : graph_.stream_tasks(stream)) {
      if (remaining_dependencies_[task.value()] == 0) OnReady(task);
    }
  }
  Event event;
  while (past_horizon_.empty() && queue_.PopNext(event)) {
    now_ = event.time;
    ++events_;
    fingerprint_ =
        Mix(Mix(Mix(fingerprint_, static_cast<uint64_t>(event.time.ns())), event.handler()),
            event.payload());
    Dispatch(event);
  }
  makespan_ = now_;
  if (!past_horizon_.empty()) {
    return Error(fmt::format(
        "simulated time passed the simulator's horizon, {}: {}; no training iteration is that "
        "long: is a duration, size or bandwidth off by orders of magnitude, or does a trace mix "
        "two clocks?",
        LongDuration(kHorizon - TimeNs::Zero()), past_horizon_));
  }
  if (finished_ != graph_.task_count()) return DeadlockReport();
  return Tally();
}

void Simulator::PassHorizon(TimeNs time, std::string what) {
  if (!past_horizon_.empty()) return;
  past_horizon_ = fmt::format("{} would end at {}", what, LongDuration(time - TimeNs::Zero()));
}

void Simulator::Dispatch(const Event& event) {
  const HandlerId handler = event.handler();
  if (handler == kTaskEnd) {
    FinishTask(TaskId(static_cast<uint32_t>(event.payload())));
  } else if (handler == kCommEnd) {
    FinishComm(CommId(static_cast<uint32_t>(event.payload())));
  } else if (handler == kStreamChoice) {
    ChooseReadyTasks();
  } else {
    handlers_[handler - kFirstModelHandler]->OnEvent(event.payload());
  }
}

void Simulator::SetBusy(int32_t rank, bool busy) {
  const auto r = static_cast<size_t>(rank);
  if (busy) {
    if (working_[r]++ == 0) busy_since_[r] = now_;
  } else if (--working_[r] == 0) {
    busy_[r] += now_ - busy_since_[r];
  }
}

// A task of `rank`'s compute runs on the SMs its communications leave: its work is
// duration × sms SM·ns, done at (sms − held blocks) SM·ns per ns.
void Simulator::StartSharedCompute(TaskId id, int32_t rank) {
  std::vector<SharedCompute>& running = shared_compute_[static_cast<size_t>(rank)];
  const int64_t duration = std::min(graph_.task(id).duration, kHorizon - TimeNs::Zero()).ns();
  running.push_back({.task = id, .work_left = duration * sms_, .since = now_});
  ScheduleComputeEnd(rank, running.size() - 1);
}

void Simulator::EndSharedCompute(TaskId id, int32_t rank) {
  std::vector<SharedCompute>& running = shared_compute_[static_cast<size_t>(rank)];
  const auto it = std::find_if(running.begin(), running.end(),
                               [id](const SharedCompute& c) { return c.task == id; });
  DTSIM_CHECK(it != running.end(), "a shared compute task ended that was not running");
  *it = running.back();
  running.pop_back();
}

void Simulator::ScheduleComputeEnd(int32_t rank, size_t index) {
  SharedCompute& compute = shared_compute_[static_cast<size_t>(rank)][index];
  const int64_t free = sms_ - held_blocks_[static_cast<size_t>(rank)];
  // No SM free: it resumes when a communication ends (a task with no work left ends now).
  compute.end_scheduled = free > 0 || compute.work_left == 0;
  if (!compute.end_scheduled) return;
  const TimeNs end =
      now_ + DurationNs(compute.work_left == 0 ? 0 : (compute.work_left + free - 1) / free);
  if (end > kHorizon) [[unlikely]] {
    PassHorizon(end, fmt::format("{}, slowed by the communication kernels beside it,",
                                 graph_.Describe(compute.task)));
  }
  compute.end = queue_.Push(end, 0, kTaskEnd, compute.task.value());
}

void Simulator::HoldSms(int32_t rank, CommId comm, int sign) {
  if (sms_ == 0 || comm_blocks_[comm.value()] == 0) return;
  const auto r = static_cast<size_t>(rank);
  std::vector<SharedCompute>& running = shared_compute_[r];
  const int64_t free = std::max(0, sms_ - held_blocks_[r]);
  for (SharedCompute& compute : running) {
    compute.work_left =
        std::max<int64_t>(0, compute.work_left - (now_ - compute.since).ns() * free);
    compute.since = now_;
    if (compute.end_scheduled) queue_.Cancel(compute.end);
  }
  held_blocks_[r] += sign * comm_blocks_[comm.value()];
  for (size_t i = 0; i < running.size(); ++i) ScheduleComputeEnd(rank, i);
}

void Simulator::StartTask(TaskId id) {
  const Task& task = graph_.task(id);
  times_.task_start[id.value()] = now_;
  if (!graph::IsCommunication(task.kind)) {
    state_[id.value()] = TaskState::kRunning;
    const int32_t rank = graph_.stream(task.stream).rank;
    if (graph::CountsAsBusy(task.kind)) SetBusy(rank, true);
    const TimeNs end = now_ + task.duration;
    if (end > kHorizon) [[unlikely]] {
      PassHorizon(end,
                  fmt::format("{} takes {} and", graph_.Describe(id), LongDuration(task.duration)));
    }
    if (sms_ > 0 && task.kind == graph::TaskKind::kCompute) {
      StartSharedCompute(id, rank);
      return;
    }
    queue_.Push(end, 0, kTaskEnd, id.value());
    return;
  }
  state_[id.value()] = TaskState::kArrived;
  const graph::Communication& comm = graph_.comm(task.comm);
  if (comm.eager) {
    StartEager(id, task);
    return;
  }
  if (++arrived_[task.comm.value()] < comm.participant_count) return;
  times_.comm_start[task.comm.value()] = now_;
  for (TaskId participant : graph_.participants(task.comm)) {
    state_[participant.value()] = TaskState::kRunning;
    SetBusy(graph_.rank_of(participant), true);
    HoldSms(graph_.rank_of(participant), task.comm, +1);
  }
  model_.Start(task.comm, *this);
}

// An eager send/recv: the send starts the transfer alone. The recv, posted before it, waits
// (arrived) for the transfer to start, then runs with it; posted during it, ends with it;
// posted after it, ends at once.
void Simulator::StartEager(TaskId id, const Task& task) {
  const uint32_t comm = task.comm.value();
  ++arrived_[comm];
  const std::span<const TaskId> pair = graph_.participants(task.comm);
  const auto run = [this, &task](TaskId participant) {
    state_[participant.value()] = TaskState::kRunning;
    SetBusy(graph_.rank_of(participant), true);
    HoldSms(graph_.rank_of(participant), task.comm, +1);
  };
  if (task.kind == graph::TaskKind::kSend) {
    times_.comm_start[comm] = now_;
    run(id);
    if (state_[pair[1].value()] == TaskState::kArrived) run(pair[1]);
    model_.Start(task.comm, *this);
  } else if (comm_finished_[comm] != 0) {
    run(id);
    queue_.Push(now_, 0, kTaskEnd, id.value());
  } else if (state_[pair[0].value()] == TaskState::kRunning) {
    run(id);
  }
}

// `id`'s dependencies are all done.
void Simulator::OnReady(TaskId id) {
  const StreamId stream = graph_.task(id).stream;
  switch (graph_.stream(stream).order) {
    case graph::StreamOrder::kInOrder:
      if (stream_head_task_[stream.value()] == id) StartTask(id);
      return;
    case graph::StreamOrder::kReadyFirst: {
      std::vector<TaskId>& ready = ready_[stream.value()];
      ready.push_back(id);
      std::push_heap(ready.begin(), ready.end(), std::greater<>());
      if (!stream_holder_[stream.value()].valid()) ScheduleChoice(stream);
      return;
    }
    case graph::StreamOrder::kUnbounded:
      StartTask(id);
      return;
  }
}

void Simulator::StartStreamHead(StreamId stream) {
  const TaskId head = stream_head_task_[stream.value()];
  if (head.valid() && remaining_dependencies_[head.value()] == 0) StartTask(head);
}

// `stream` is free and has a ready task: it chooses in the instant's next round of choices.
void Simulator::ScheduleChoice(StreamId stream) {
  if (choice_scheduled_[stream.value()] != 0 || ready_[stream.value()].empty()) return;
  choice_scheduled_[stream.value()] = 1;
  if (choosing_.empty()) queue_.Push(now_, EventQueue::kMaxPriority, kStreamChoice, 0);
  choosing_.push_back(stream);
}

// A round of choices, after every other event of the instant: each waiting stream takes its
// first ready task. Starting a task only schedules events (never finishes one), so what a
// start sets off in the same instant — a collective whose last member arrives and takes no
// time — reaches every stream in the next round, whichever stream chose first in this one.
void Simulator::ChooseReadyTasks() {
  std::vector<StreamId> streams;
  streams.swap(choosing_);
  for (const StreamId stream : streams) {
    choice_scheduled_[stream.value()] = 0;
    std::vector<TaskId>& ready = ready_[stream.value()];
    if (stream_holder_[stream.value()].valid() || ready.empty()) continue;
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    const TaskId first = ready.back();
    ready.pop_back();
    stream_holder_[stream.value()] = first;
    StartTask(first);
  }
}

// The task that held `stream` has finished.
void Simulator::ReleaseStream(StreamId stream) {
  switch (graph_.stream(stream).order) {
    case graph::StreamOrder::kInOrder: {
      const std::span<const TaskId> tasks = graph_.stream_tasks(stream);
      const uint32_t head = ++stream_head_[stream.value()];
      stream_head_task_[stream.value()] = head < tasks.size() ? tasks[head] : TaskId::Invalid();
      StartStreamHead(stream);
      return;
    }
    case graph::StreamOrder::kReadyFirst:
      stream_holder_[stream.value()] = TaskId::Invalid();
      ScheduleChoice(stream);
      return;
    case graph::StreamOrder::kUnbounded:
      return;
  }
}

void Simulator::FinishTask(TaskId id) {
  const Task& task = graph_.task(id);
  state_[id.value()] = TaskState::kDone;
  times_.task_end[id.value()] = now_;
  ++finished_;
  const int32_t rank = graph_.stream(task.stream).rank;
  if (graph::CountsAsBusy(task.kind)) SetBusy(rank, false);
  if (sms_ > 0) {
    if (task.kind == graph::TaskKind::kCompute) EndSharedCompute(id, rank);
    if (graph::IsCommunication(task.kind)) HoldSms(rank, task.comm, -1);
  }
  for (TaskId successor : graph_.successors(id)) {
    if (--remaining_dependencies_[successor.value()] == 0) OnReady(successor);
  }
  // The stream is released only now, so a successor on this stream starts here (and, on a
  // ready-first stream, competes with the tasks that were ready before it).
  ReleaseStream(task.stream);
}

void Simulator::FinishComm(CommId comm) {
  times_.comm_end[comm.value()] = now_;
  comm_finished_[comm.value()] = 1;
  for (TaskId participant : graph_.participants(comm)) {
    // An eager pair's recv not yet posted ends when it is (StartEager).
    if (state_[participant.value()] == TaskState::kRunning) FinishTask(participant);
  }
}

std::string Simulator::WhatBlocks(TaskId id) const {
  const Task& task = graph_.task(id);
  switch (state_[id.value()]) {
    case TaskState::kWaiting: {
      std::vector<std::string> blockers;
      for (TaskId dep : graph_.dependencies(id)) {
        if (state_[dep.value()] != TaskState::kDone) blockers.push_back(graph_.Describe(dep));
      }
      const size_t shown = std::min<size_t>(blockers.size(), 3);
      return fmt::format(
          "waits for {} unfinished dependenc{}: {}{}", blockers.size(),
          blockers.size() == 1 ? "y" : "ies",
          fmt::join(blockers.begin(), blockers.begin() + static_cast<long>(shown), "; "),
          blockers.size() > shown ? "; …" : "");
    }
    case TaskState::kArrived: {
      std::vector<std::string> absent;
      for (TaskId p : graph_.participants(task.comm)) {
        if (state_[p.value()] == TaskState::kWaiting) absent.push_back(graph_.Describe(p));
      }
      return fmt::format("arrived at {} and waits for {} participant{} to arrive: {}",
                         graph_.DescribeComm(task.comm), absent.size(),
                         absent.size() == 1 ? "" : "s", fmt::join(absent, "; "));
    }
    case TaskState::kRunning:
      if (graph::IsCommunication(task.kind)) {
        return fmt::format(
            "is in {}, started at {}, which the \"{}\" communication model never "
            "completed",
            graph_.DescribeComm(task.comm),
            FormatDuration(times_.comm_start[task.comm.value()] - TimeNs::Zero()), model_.name());
      }
      return "is running (its end event was lost)";
    case TaskState::kDone:
      break;
  }
  return "is done";
}

Error Simulator::DeadlockReport() const {
  constexpr size_t kMaxListed = 20;
  std::string lines;
  size_t stuck_streams = 0;
  for (uint32_t s = 0; s < graph_.stream_count(); ++s) {
    const TaskId stuck = StuckTask(StreamId(s));
    if (!stuck.valid()) continue;
    if (++stuck_streams <= kMaxListed) {
      lines += fmt::format("\n  {} {}", graph_.Describe(stuck), WhatBlocks(stuck));
    }
  }
  if (stuck_streams > kMaxListed) {
    lines += fmt::format("\n  … and {} more stuck streams", stuck_streams - kMaxListed);
  }
  return Error(
      fmt::format("deadlock at {}: {} of {} tasks never finished; the task holding each "
                  "stuck stream, or its first unfinished task:{}",
                  FormatDuration(now_ - TimeNs::Zero()), graph_.task_count() - finished_,
                  graph_.task_count(), lines));
}

// What a deadlock report names for `stream`: an in-order stream's head; the task holding a
// ready-first stream, else its first unfinished task; an unbounded stream's first unfinished
// task. Invalid when every task of the stream finished.
TaskId Simulator::StuckTask(StreamId stream) const {
  if (graph_.stream(stream).order == graph::StreamOrder::kInOrder) {
    return stream_head_task_[stream.value()];
  }
  if (stream_holder_[stream.value()].valid()) return stream_holder_[stream.value()];
  for (TaskId task : graph_.stream_tasks(stream)) {
    if (state_[task.value()] != TaskState::kDone) return task;
  }
  return TaskId::Invalid();
}

RunSummary Simulator::Summarize() const {
  RunSummary summary = summary_;
  summary.makespan = makespan_;
  summary.events = events_;
  summary.fingerprint = fingerprint_;
  summary.tasks = graph_.task_count();
  summary.communications = graph_.comm_count();
  return summary;
}

// Times stay below kHorizon, so a sum passes int64 only over more than a thousand tasks that
// each span most of it: the error, not a saturated or wrapped total, is the honest answer.
Status Simulator::Tally() {
  RunSummary& summary = summary_;
  summary.ranks.resize(static_cast<size_t>(graph_.rank_count()));
  for (int32_t r = 0; r < graph_.rank_count(); ++r) {
    RankSummary& rank = summary.ranks[static_cast<size_t>(r)];
    rank.rank = r;
    rank.busy = busy_[static_cast<size_t>(r)];
    rank.idle = (makespan_ - TimeNs::Zero()) - rank.busy;
  }
  summary.categories.resize(graph_.category_count());
  for (size_t c = 0; c < graph_.category_count(); ++c) {
    summary.categories[c].name = graph_.category_name(static_cast<uint16_t>(c));
  }
  const std::span<const std::string_view> kind_names = graph::TaskKindNames();
  for (std::string_view name : kind_names) summary.kinds.push_back({.name = std::string(name)});
  for (uint32_t t = 0; t < graph_.task_count(); ++t) {
    const Task& task = graph_.task(TaskId(t));
    const TimeNs end = times_.task_end[t];
    TimeNs start = times_.task_start[t];
    RankSummary& rank = summary.ranks[static_cast<size_t>(graph_.stream(task.stream).rank)];
    if (graph::IsCommunication(task.kind)) {
      // The recv of an eager pair may be posted after its transfer started, or ended.
      start = std::clamp(times_.comm_start[task.comm.value()], times_.task_start[t], end);
      rank.rendezvous_wait += start - times_.task_start[t];
    }
    rank.finish = std::max(rank.finish, end);
    for (GroupTotal* total :
         {&summary.categories[task.category], &summary.kinds[static_cast<size_t>(task.kind)]}) {
      ++total->tasks;
      total->total += end - start;
    }
  }
  const auto passed = [](DurationNs sum) { return sum == DurationNs::Max(); };
  for (const auto& [group, totals] :
       {std::pair("category", &summary.categories), std::pair("kind", &summary.kinds)}) {
    for (const GroupTotal& total : *totals) {
      if (!passed(total.total)) continue;
      return Error(
          fmt::format("the {} tasks of {} \"{}\" add up to more than 292 years of "
                      "simulated time, past what a result can hold",
                      total.tasks, group, total.name));
    }
  }
  for (const RankSummary& rank : summary.ranks) {
    if (!passed(rank.rendezvous_wait)) continue;
    return Error(
        fmt::format("rank {}'s waits to rendezvous add up to more than 292 years of "
                    "simulated time, past what a result can hold",
                    rank.rank));
  }
  return Status::Ok();
}

size_t Simulator::MemoryBytes() const {
  return sizeof(*this) + queue_.MemoryBytes() + VectorBytes(handlers_) +
         VectorBytes(remaining_dependencies_) + VectorBytes(state_) + VectorBytes(stream_head_) +
         VectorBytes(stream_head_task_) + VectorBytes(stream_holder_) + VectorBytes(ready_) +
         VectorBytes(choice_scheduled_) + VectorBytes(choosing_) + VectorBytes(arrived_) +
         VectorBytes(completion_scheduled_) + VectorBytes(comm_finished_) + VectorBytes(working_) +
         VectorBytes(busy_since_) + VectorBytes(busy_) + VectorBytes(comm_blocks_) +
         VectorBytes(held_blocks_) + VectorBytes(shared_compute_) + VectorBytes(times_.task_start) +
         VectorBytes(times_.task_end) + VectorBytes(times_.comm_start) +
         VectorBytes(times_.comm_end);
}

}  // namespace dtsim::engine
