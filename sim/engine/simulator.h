// Runs a task graph (DESIGN §4). One Simulator per run; no global state, so tests and
// searches create as many as they like.
//
// Semantics:
//  - An in-order stream runs its tasks one at a time in graph order, like a CUDA stream: the
//    first unfinished task of a stream (its head) starts once all its dependencies are done;
//    tasks behind it wait even if their own dependencies are done. A ready-first stream runs
//    one at a time too, but whenever it is free starts the earliest-added of its tasks whose
//    dependencies are done (ASTRA-sim's hardware resources). Streams choose in rounds, after
//    every other event of the instant, all of a round before any chosen task starts; so tasks
//    that become ready at the same time compete whatever the order their events came in,
//    which keeps identical ranks identical. An unbounded stream starts every task once its
//    dependencies are done (graph::StreamOrder).
//  - Compute, memcpy and delay tasks take their fixed duration. After ShareSms(s), a compute
//    task instead does its duration's work on the SMs its rank's communications leave: while
//    communications holding b thread blocks in all (CommunicationModel::KernelBlocks) run on
//    its rank, it advances at (s − b)/s of its speed (not at all while b >= s), and its end
//    moves whenever b changes. Memcpy (copy engines) and delays are not slowed.
//  - A collective, send or recv task "arrives" when it would start; it occupies its stream from
//    then on. When the last participant arrives, the CommunicationModel starts the
//    communication; all participants end when the model completes it.
//  - A rank is busy while at least one of its compute, memcpy or communication tasks is
//    running (communications count from their start, not from arrival; delays never count).
//  - Events are delivered in (time, priority, sequence) order; the fingerprint hashes every
//    delivered event (time, handler, payload), so equal inputs give equal fingerprints.
//  - When the queue empties with tasks unfinished, Run() returns a deadlock report naming, for
//    every stuck stream, the task that holds it or else its first unfinished task, and what
//    that task waits on.
//  - Simulated time ends at kHorizon (~104 days): a task, communication or model event that
//    would end past it stops the run, and Run() returns an error naming it. No training
//    iteration is that long; a graph gets there only from a duration, size or bandwidth off by
//    orders of magnitude (or two clocks mixed in a trace), and the horizon keeps every time
//    and every sum of a few hundred of them far from int64's end.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/base/status.h"
#include "sim/engine/communication.h"
#include "sim/engine/event_queue.h"
#include "sim/graph/task_graph.h"
#include "sim/graph/task_times.h"

namespace dtsim::engine {

struct RankSummary {
  int32_t rank = 0;
  DurationNs busy;             // union of the rank's working intervals
  DurationNs idle;             // makespan - busy
  DurationNs rendezvous_wait;  // summed over its communication tasks: arrival to start
  TimeNs finish;               // when its last task ended
};

struct GroupTotal {
  std::string name;
  int64_t tasks = 0;
  // Summed task time; a communication task counts from its communication's start.
  DurationNs total;
};

struct RunSummary {
  TimeNs makespan;
  uint64_t events = 0;
  uint64_t fingerprint = 0;
  size_t tasks = 0;
  size_t communications = 0;
  std::vector<RankSummary> ranks;
  std::vector<GroupTotal> categories;  // in category order; "" is uncategorised
  std::vector<GroupTotal> kinds;       // compute, memcpy, collective, send, recv, delay
};

class Simulator final : public CommunicationContext {
 public:
  // Both must outlive the simulator.
  Simulator(const graph::TaskGraph& graph, CommunicationModel& model);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Where simulated time ends: 2^53 ns, about 104 days.
  static constexpr TimeNs kHorizon = TimeNs(int64_t{1} << 53);

  // Every GPU has `sms` streaming multiprocessors, shared by its compute and its
  // communications' kernels (see above); before Run(). Precondition: 0 < sms <= kMaxSms.
  // Without it (traces, whose measured durations already hold the sharing) compute tasks take
  // their duration.
  // A task's work, duration (< 2^53 ns, the horizon) × sms, stays below 2^62 SM·ns.
  static constexpr int kMaxSms = 512;
  void ShareSms(int sms);

  // Simulates the whole graph. May be called once.
  Status Run();
  // Whether Run() stopped at the horizon (its error then says what got there).
  bool passed_horizon() const { return !past_horizon_.empty(); }

  const graph::TaskTimes& times() const { return times_; }
  // Moves the times out, leaving the simulator without them. Keeping a run's times this way costs
  // no copy of its largest arrays (16 bytes a task: 450 MB for GPT-3 175B on 1,024 GPUs, which was
  // this run's peak).
  graph::TaskTimes TakeTimes() { return std::move(times_); }
  TimeNs makespan() const { return makespan_; }
  uint64_t events_processed() const { return events_; }
  uint64_t fingerprint() const { return fingerprint_; }
  // What a successful Run() found per rank, category and kind.
  RunSummary Summarize() const;
  // Bytes of simulation state (not counting the graph).
  size_t MemoryBytes() const;

  // CommunicationContext
  TimeNs Now() const override { return now_; }
  const graph::TaskGraph& graph() const override { return graph_; }
  HandlerId RegisterHandler(EventHandler& handler) override;
  EventId Schedule(TimeNs time, HandlerId handler, uint64_t payload) override;
  void Cancel(EventId event) override { queue_.Cancel(event); }
  void CompleteAt(graph::CommId comm, TimeNs time) override;

 private:
  enum class TaskState : uint8_t { kWaiting, kArrived, kRunning, kDone };
  // The engine's own events; handler ids at or above kFirstModelHandler are the model's.
  static constexpr HandlerId kTaskEnd = 0;
  static constexpr HandlerId kCommEnd = 1;
  static constexpr HandlerId kFirstModelHandler = 2;
  // The ready-first streams waiting for a task choose one (ChooseReadyTasks), after the
  // instant's other events.
  static constexpr HandlerId kStreamChoice = EventQueue::kMaxHandler;

  void Dispatch(const Event& event);
  void StartTask(graph::TaskId task);
  void StartEager(graph::TaskId task, const graph::Task& info);
  void OnReady(graph::TaskId task);
  void StartStreamHead(graph::StreamId stream);
  void ScheduleChoice(graph::StreamId stream);
  void ChooseReadyTasks();
  void ReleaseStream(graph::StreamId stream);
  graph::TaskId StuckTask(graph::StreamId stream) const;
  void FinishTask(graph::TaskId task);
  void FinishComm(graph::CommId comm);
  void SetBusy(int32_t rank, bool busy);
  // SM sharing (ShareSms): a participant of `comm` on `rank` starts (+1) or ends (-1) running.
  void HoldSms(int32_t rank, graph::CommId comm, int sign);
  // Schedules `running`'s end at the rate its rank's free SMs allow (none while no SM is free).
  void ScheduleComputeEnd(int32_t rank, size_t index);
  // Starts or ends a compute task under SM sharing.
  void StartSharedCompute(graph::TaskId task, int32_t rank);
  void EndSharedCompute(graph::TaskId task, int32_t rank);
  Error DeadlockReport() const;
  // Stops the run at the next event: `what` would end at `time`, past kHorizon.
  void PassHorizon(TimeNs time, std::string what);
  // Fills summary_ from the tasks' times; fails when a sum passes int64.
  Status Tally();
  std::string WhatBlocks(graph::TaskId task) const;

  const graph::TaskGraph& graph_;
  CommunicationModel& model_;
  EventQueue queue_;
  std::vector<EventHandler*> handlers_;  // model handlers, indexed from kFirstModelHandler
  TimeNs now_;
  TimeNs makespan_;
  bool ran_ = false;
  std::string past_horizon_;  // what passed kHorizon first, with when; empty while none did
  uint64_t events_ = 0;
  uint64_t fingerprint_;
  size_t finished_ = 0;

  LargeVector<uint32_t> remaining_dependencies_;  // per task (huge pages)
  LargeVector<TaskState> state_;                  // per task
  std::vector<uint32_t> stream_head_;  // per stream: position of its first unfinished task
  std::vector<graph::TaskId> stream_head_task_;  // per stream: that task (Invalid when done)
  // Ready-first streams: the task holding the stream (Invalid when free), a min-heap of the
  // ready tasks waiting for it, and whether its choice is scheduled.
  std::vector<graph::TaskId> stream_holder_;
  std::vector<std::vector<graph::TaskId>> ready_;
  std::vector<uint8_t> choice_scheduled_;
  std::vector<graph::StreamId> choosing_;      // the streams of the next round of choices
  std::vector<uint32_t> arrived_;              // per comm
  std::vector<uint8_t> completion_scheduled_;  // per comm
  std::vector<uint8_t> comm_finished_;         // per comm
  std::vector<uint32_t> working_;              // per rank: tasks running now
  std::vector<TimeNs> busy_since_;             // per rank
  std::vector<DurationNs> busy_;               // per rank
  // SM sharing (0: off). A running compute task's work left is counted in SM-nanoseconds
  // (duration × sms at the start), so rates and ends are exact integers.
  struct SharedCompute {
    graph::TaskId task;
    int64_t work_left = 0;  // SM·ns
    TimeNs since;           // when work_left was last brought up to date
    EventId end;
    bool end_scheduled = false;
  };
  int sms_ = 0;
  std::vector<uint16_t> comm_blocks_;                       // per comm, from the model
  std::vector<int32_t> held_blocks_;                        // per rank: of running communications
  std::vector<std::vector<SharedCompute>> shared_compute_;  // per rank: its running compute
  graph::TaskTimes times_;
  RunSummary summary_;  // ranks, categories and kinds, by Tally()
};

}  // namespace dtsim::engine
