// The replay graph of one traced process (docs/replay.md): the task graph that, simulated with
// the measured durations, reproduces the trace, and that what-ifs change.
//
//  - Each CPU thread that calls CUDA is a stream of delay tasks: the measured CUDA API calls
//    and, between them, the host time that separates them (framework and Python work), so a
//    host-bound phase replays as host-bound. The host thread starts where it started in the
//    trace.
//  - Each CUDA stream is a stream of its kernels, copies and sets in start order. A GPU op
//    depends on the API call that launched it (by correlation id).
//  - Synchronization, from the cuda_sync records: a Stream Wait Event makes the first op the
//    waiting stream runs after the cudaStreamWaitEvent depend on the last op the recording
//    stream ran before the cudaEventRecord; a stream, event or context sync splits the API
//    call into the waiting and a measured remainder that depends on the awaited ops. Copies
//    that block the host (cudaMemcpy, copies to pageable memory) do the same. A blocking call
//    without a record waits for the launched op that ended last inside it (inferred, counted).
//  - A GPU gap the edges do not explain, ending within `match_tolerance` of an op on another
//    stream of the device, is taken as an unrecorded cross-stream wait (inferred, counted);
//    what remains is kept as a measured delay ("gpu_gap") before the op.
//  - NCCL kernels are collectives with their kind, bytes and group (Trace::collectives); a
//    p2p kernel, and a collective whose size the trace does not give, stay compute tasks of
//    their measured duration. Collectives' measured durations are in comm_durations.
//  - ProfilerStep#N boundaries are zero-length marker tasks on the annotating thread; a
//    step's simulated time is the time between its two markers.
//
// A trace whose events span more than kMaxTraceSpan is refused, naming its first and last
// events: a profile covers seconds to minutes, so such a trace mixes two clocks (an event at
// 165 ms among epoch timestamps), and replaying it would simulate years of gaps.
//
// A job of several traces (one per rank) is one graph: each trace is a rank (its
// distributedInfo rank when every trace has a distinct one, else its place in the job), its
// clock aligned with the first trace's, and the collectives the ranks shared
// (traces/job_collectives.h) become one collective posted by each, which starts when the last
// member arrives and lasts the measured transfer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/graph/task_graph.h"
#include "traces/job_collectives.h"
#include "traces/kernel_class.h"
#include "traces/trace.h"

namespace dtsim::traces {

// The longest a trace's events may span, first start to last end: a day.
inline constexpr DurationNs kMaxTraceSpan = Seconds(int64_t{24} * 3600);

// One step of what a what-if reduces a collective with instead (strategies::ReplayWhatIf's
// gradient compression): a collective over the same logical group, or GPU work of a fixed
// duration, run one after another on the collective's stream.
struct CollectiveRewriteStep {
  std::string name;
  std::optional<graph::CommKind> collective;
  Bytes bytes;          // the collective's bytes per rank
  DurationNs duration;  // the GPU work's, for a step that is no collective
};
// The steps that replace a collective over `group_size` ranks, or nothing to keep it.
using CollectiveRewrite = std::function<std::optional<std::vector<CollectiveRewriteStep>>(
    const CollectiveInfo& collective, int32_t group_size)>;

struct ReplayOptions {
  // How close a GPU gap's end must be to another stream's op end to be read as a wait on it:
  // above the 1–3 µs a dependent kernel takes to start after its event fired in the shared
  // traces, far below the gaps of unrelated work.
  DurationNs match_tolerance = Microseconds(5);
  // How many unfinished ops of a stream fill its launch queue: a launch made with this many
  // ahead of it waited for one to finish. An H200 queues 1,021 launches behind a running
  // kernel before the next call blocks (tools/gpu_checks/launch_queue_depth.cu).
  int64_t launch_queue_depth = 1000;

  // What-ifs (docs/replay.md). A GPU op's duration is divided by the first speedup whose
  // kernel class it belongs to.
  std::vector<KernelSpeedup> speedups;
  // Every CUDA stream of a device merged into one stream in start order: nothing on the GPU
  // overlaps (communication with computation, or compute streams with each other).
  bool serialize_gpu_streams = false;
  // The opposite: a stream that runs collectives and other work keeps the other work, and its
  // collectives move to a stream of their own (in their order), each still after the op before
  // it (its input) — so the work launched after a collective no longer waits for it, as if the
  // framework had issued it on a side stream. Event records, stream and device syncs after it
  // still wait for it. Ignored with serialize_gpu_streams.
  bool overlap_collectives = false;
  // Collectives over the whole traced world (their group size is the trace's world size) are
  // priced over this many ranks instead; 0 keeps the traced size. How data parallelism scales.
  int32_t world_group_size = 0;
  // Applied to the collectives over the traced world; their measured durations no longer hold,
  // so the what-if must price communication with a network model.
  CollectiveRewrite rewrite_world_collectives;
  // Per job index and Trace::collectives index, the part of its measured time spent waiting
  // for peers the job does not load, kept as a delay before the collective ("waiting for
  // peers") when a network what-if re-prices its transfer; empty: none.
  std::vector<std::vector<DurationNs>> collective_waits;
};

struct ReplayStep {
  uint32_t trace = 0;  // the job index of the trace it is a step of
  int64_t number = 0;
  DurationNs measured;
  graph::TaskId begin;  // zero-length markers
  graph::TaskId end;
};

struct ReplayStats {
  int64_t host_tasks = 0;
  int64_t gpu_tasks = 0;
  int64_t collectives = 0;
  int64_t launch_edges = 0;
  int64_t stream_wait_edges = 0;  // from Stream Wait Event records
  int64_t sync_edges = 0;         // host waits from sync records and blocking copies
  int64_t inferred_sync_edges = 0;
  int64_t inferred_stream_edges = 0;
  int64_t inferred_thread_edges = 0;  // a thread resuming when another fell silent
  int64_t inferred_queue_edges = 0;   // a launch waiting for the launch queue to free a slot
  int64_t gpu_gaps = 0;
  DurationNs gpu_gap_time;
  // NCCL collectives whose size neither their args nor an annotation gave: kept as GPU work of
  // their measured duration under every what-if (never priced as 0-byte collectives).
  int64_t unsized_collectives = 0;
  std::string first_unsized;    // the first one's kernel name, for the warning
  int64_t job_collectives = 0;  // collectives several traces of the job shared, each counted once
  int64_t peer_waits = 0;       // what-if: waits for peers kept before re-priced ones
  DurationNs peer_wait_time;
  int64_t sped_up_ops = 0;            // what-if: GPU ops a speedup applied to
  int64_t moved_collectives = 0;      // what-if: collectives moved off a compute stream
  int64_t rescaled_collectives = 0;   // what-if: world collectives priced over another size
  int64_t rewritten_collectives = 0;  // what-if: world collectives replaced by rewrite steps
};

// What a CommId of the replay graph stands for.
struct CommSource {
  uint32_t trace = kNone;           // job index of the trace (its first member's, when shared)
  uint32_t collective = kNone;      // Trace::collectives index in it; kNone for a what-if's own
  uint32_t job_collective = kNone;  // JobCollectives index, when several traces shared it
};

struct ReplayGraph {
  graph::TaskGraph graph;
  TimeNs origin;                     // the first trace's time that simulated time 0 stands for
  std::vector<int32_t> ranks;        // per job index: the graph rank its tasks run on
  std::vector<uint32_t> first_task;  // per job index: its tasks are [first_task[i], next)
  JobCollectives job;                // the collectives the traces shared, and their clocks
  std::vector<ReplayStep> steps;     // the job's traces' steps, trace by trace
  std::vector<DurationNs> comm_durations;   // measured, indexed by CommId
  std::vector<CommSource> comm_source;      // per CommId
  std::vector<uint32_t> task_device_event;  // per task: its trace's Trace::device index, or kNone
  std::vector<DurationNs> measured_start;   // per task: when it started in the trace, since origin
  ReplayStats stats;                        // the job's, summed over its traces

  // The job index of the trace a task came from.
  uint32_t TraceOf(graph::TaskId task) const;
};

// The replay graph of a job: one trace per rank (docs/replay.md, "A whole job"). Errors when
// no trace has a GPU op to replay.
Expected<ReplayGraph> BuildReplayGraph(std::span<const Trace* const> job,
                                       const ReplayOptions& options = {});
// One trace, a job of one.
Expected<ReplayGraph> BuildReplayGraph(const Trace& trace, const ReplayOptions& options = {});

}  // namespace dtsim::traces
