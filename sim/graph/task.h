// The plain records of the task-graph IR (docs/formats/task-graph.md): tasks, streams and
// communications. See task_graph.h for the graph that owns them and its guarantees.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "sim/base/ids.h"
#include "sim/base/time.h"
#include "sim/base/units.h"
#include "sim/graph/string_table.h"

namespace dtsim::graph {

using TaskId = Index<struct TaskTag>;
using StreamId = Index<struct StreamTag>;  // global: unique across ranks
using CommId = Index<struct CommTag>;
using GroupId = Index<struct GroupTag>;

enum class TaskKind : uint8_t { kCompute, kMemcpy, kCollective, kSend, kRecv, kDelay };

// Collective operations and the point-to-point transfer that pairs a send with a recv.
enum class CommKind : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kBarrier,
  // Every member sends its buffer to the next member of the group (in the group's rank order,
  // the last to the first) and receives the previous one's: one step of a ring, as context
  // parallelism's ring attention passes K/V blocks (XLA's collective-permute; NCCL's grouped
  // send/recv).
  kShift,
  kSendRecv,
};

std::string_view TaskKindName(TaskKind kind);
std::optional<TaskKind> TaskKindFromName(std::string_view name);
std::span<const std::string_view> TaskKindNames();
std::string_view CommKindName(CommKind kind);
// Collective kinds only: "send_recv" is not a name a user gives a collective.
std::optional<CommKind> CollectiveKindFromName(std::string_view name);
std::span<const std::string_view> CollectiveKindNames();

inline bool IsCommunication(TaskKind kind) {
  return kind == TaskKind::kCollective || kind == TaskKind::kSend || kind == TaskKind::kRecv;
}
// Whether a task of this kind keeps its GPU busy (delays model waiting, e.g. host gaps).
inline bool CountsAsBusy(TaskKind kind) { return kind != TaskKind::kDelay; }

// 24 bytes: large graphs hold tens of millions of these.
struct Task {
  DurationNs duration;  // fixed cost of compute, memcpy and delay tasks; zero for communication
  StreamId stream;
  CommId comm;  // the communication a collective, send or recv task takes part in
  NameId name;
  uint16_t category = 0;  // index into TaskGraph::categories()
  TaskKind kind = TaskKind::kCompute;
};

// When `task` ends, the memory its rank holds changes by `bytes`: a layer's activations kept
// for its backward pass (+), freed by that backward (−). A timeline draws the running sum over
// the rank's base (TaskGraph::memory_base) as its memory track (docs/formats/timeline.md).
struct MemoryChange {
  TaskId task;
  int64_t bytes = 0;
};

// How a stream picks the next of its tasks (docs/formats/task-graph.md, "Streams").
enum class StreamOrder : uint8_t {
  // One at a time, in the order they were added, each once its dependencies are done: a CUDA
  // stream (DESIGN §4). A ready task waits behind an unfinished one added before it.
  kInOrder,
  // One at a time; whenever the stream is free it starts, of its tasks whose dependencies are
  // done, the one added first: ASTRA-sim's hardware resources, which issue the dependency-free
  // nodes of a Chakra trace by node id whenever the resource is free.
  kReadyFirst,
  // No resource: every task starts once its dependencies are done (ASTRA-sim's receives).
  kUnbounded,
};

std::string_view StreamOrderName(StreamOrder order);
std::optional<StreamOrder> StreamOrderFromName(std::string_view name);
std::span<const std::string_view> StreamOrderNames();

// A resource of one rank that runs tasks, by default a serial FIFO one like a CUDA stream.
struct Stream {
  int32_t rank = 0;
  NameId name;
  uint32_t first_task = 0;  // its tasks are stream_tasks()[first_task, first_task + task_count)
  uint32_t task_count = 0;
  StreamOrder order = StreamOrder::kInOrder;
};

// One collective over a group, or one send/recv pair. Every participant task must arrive
// (rendezvous) before the communication model starts it; all participants end together.
struct Communication {
  CommKind kind = CommKind::kAllReduce;
  Bytes size;            // bytes per rank for collectives; the message size for send/recv
  GroupId group;         // member ranks; for send/recv: {source, destination}
  GroupId priced_group;  // the ranks the network prices it for: `group`, or (a graph that
                         // simulates one rank per class of identical ranks) the whole
                         // logical group, of which `group` is the simulated part
  int32_t root = -1;     // broadcast/reduce root rank; -1 otherwise
  NameId algorithm;      // forced algorithm name, or the empty name for the model's choice
  NameId label;          // the user's id for a collective ("dp_allreduce_3"), else empty
  uint32_t first_participant = 0;  // participants()[first, first + count), in group order
  uint32_t participant_count = 0;
  // Send/recv only: the transfer starts when the send is posted and the send completes when
  // its data has left, whether or not the recv was posted (ASTRA-sim's non-blocking sends);
  // the recv completes once posted and the data is in. Otherwise a rendezvous, as NCCL's.
  bool eager = false;
};

}  // namespace dtsim::graph
