// The t tensor-parallel peers of one (data index, pipeline stage) as the transformer builder
// emits them: they run the same tasks, so each call adds one task per peer, and collectives
// span the peers. Consecutive compute of one name and category merges into one task.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/ops.h"
#include "sim/base/time.h"
#include "sim/base/units.h"
#include "sim/graph/builder.h"
#include "strategies/categories.h"

namespace dtsim::strategies {

class PeerGroup {
 public:
  // `ranks` are the simulated peers; `logical` all of them (more when only one peer per class
  // of identical ranks is simulated): collectives are priced over `logical`.
  PeerGroup(graph::TaskGraphBuilder& builder, std::vector<int32_t> ranks,
            std::vector<int32_t> logical);

  const std::vector<int32_t>& ranks() const { return ranks_; }
  std::optional<graph::TaskId> last(size_t peer) const { return last_[peer]; }

  // Compute on each peer's compute stream, merged with the pending compute of the same name.
  void Add(DurationNs duration, std::string_view name, std::string_view category);
  // Emits the pending compute.
  void Flush();
  // A point on each peer's compute stream (a zero-length task) after its tasks so far and
  // whatever it was asked to wait for: where memory is freed once a wait is over.
  void Mark(std::string_view name, std::string_view category);

  // The next task of each peer also waits for waits[i] (a parameter gather on another stream),
  // besides whatever earlier calls asked it to wait for.
  void WaitBefore(const std::vector<graph::TaskId>& waits);

  // A tensor-parallel collective over the peers (none when there is one), on the compute
  // stream, in `category`.
  void Collective(graph::CommKind kind, Bytes size, std::string_view name,
                  std::string_view category = kTensorCategory);

  // A tensor-parallel collective on each peer's "tp" stream beside `duration` of compute on its
  // compute stream, both starting after the peer's last task; the next task waits for both
  // (sequence parallelism's backward re-gather beside the dgrad GEMM). Without tensor-parallel
  // peers, the compute alone.
  void Overlapped(graph::CommKind kind, Bytes size, std::string_view comm_name, DurationNs duration,
                  std::string_view name, std::string_view category);

  // Each peer's part in a collective made elsewhere: comms[i] for peer i, on the compute stream.
  void Post(const std::vector<graph::CommId>& comms, std::string_view name,
            std::string_view category);
  // The same on each peer's "ep" stream, after the peer's last task so far, while the compute
  // stream goes on (Megatron-Core's all-to-all overlap): the tasks, for WaitBefore.
  std::vector<graph::TaskId> PostAside(const std::vector<graph::CommId>& comms,
                                       std::string_view name, std::string_view category);
  // A tensor-parallel collective over the peers the same way (none when there is one: no
  // tasks).
  std::vector<graph::TaskId> CollectiveAside(graph::CommKind kind, Bytes size,
                                             std::string_view name, std::string_view category);
  // `duration` of the host thread's own work on each peer's "host" stream after its last task,
  // the GPU idle: the next task waits for it.
  void Host(DurationNs duration, std::string_view name, std::string_view category);
  // Post, beside `host` of the host thread's work on each peer's "host" stream starting with
  // the collective (issuing what follows it); the next task waits for both.
  void PostBeside(const std::vector<graph::CommId>& comms, std::string_view name,
                  std::string_view category, DurationNs host, std::string_view host_name);

  // One weight GEMM as SUMMA steps (Optimus; Tesseract per depth layer): step s's broadcasts
  // (before[c][peer]) run on the peer's "tp" stream, double-buffered — once the GEMM chunk of
  // step s − 2 (the op before, for the first two) has ended — and its 1/q of the GEMM waits for
  // them; its reduces (after[c][peer]) follow the chunk. When they reduce the op's output
  // (`output_reduced`, dgrad), the next task waits for the last of them; a weight gradient's
  // (wgrad) only gates the gradient's reduction (GradientsReady).
  struct SummaStepComms {
    std::vector<std::vector<graph::CommId>> before, after;
  };
  void Summa(DurationNs duration, std::string_view name, std::string_view comm_name,
             std::string_view category, const std::vector<SummaStepComms>& steps,
             bool output_reduced);

  // Ring attention (context parallelism, p2p): the op's `duration` as shifts.size() + 1 equal
  // chunks on the compute stream; shift k (shifts[k][peer]) runs on the peer's "cp" stream
  // once the task before the op has ended (k = 0) or the shift before it has, and chunk k + 1
  // waits for it, so each block's transfer hides behind the chunk before. A `trailing` shift
  // (the backward's last K/V gradients going home) follows the last chunk, and the next task
  // waits for it.
  void Ring(DurationNs duration, std::string_view name, std::string_view comm_name,
            std::string_view category, const std::vector<std::vector<graph::CommId>>& shifts,
            const std::vector<graph::CommId>& trailing);

  // Where a peer's gradients so far are final: its last task, or, once SUMMA reduces run on
  // its "tp" stream, a point after both that and the stream's last reduce.
  graph::TaskId GradientsReady(size_t peer);

  // Pipeline transfers: peer i receives from (sends to) peers[i], on the compute stream (on
  // its send stream of `pass`, forward's activations or backward's gradients).
  void Recv(const std::vector<int32_t>& peers, int64_t tag, Bytes size, std::string_view name);
  void Send(const std::vector<int32_t>& peers, int64_t tag, Bytes size, models::Pass pass,
            std::string_view name);

 private:
  graph::TaskId TensorTask(size_t peer, graph::CommId comm, std::string_view name);
  // A collective over the peers, priced over the logical group (the groups made once).
  graph::CommId TensorCollective(graph::CommKind kind, Bytes size);
  void ApplyWaits();
  // The host thread's work on each peer's "host" stream (Host, PostBeside).
  std::vector<graph::TaskId> HostTasks(DurationNs duration, std::string_view name,
                                       std::string_view category);

  graph::TaskGraphBuilder& builder_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> logical_;
  // What each peer's next task waits for besides its stream's order (WaitBefore, several
  // callers' waits gathered).
  std::vector<std::vector<graph::TaskId>> waits_;
  void Wait(size_t peer, graph::TaskId task);  // the task waits for the peer's waits
  std::vector<graph::StreamId> compute_, tensor_, send_forward_, send_backward_;
  std::vector<graph::StreamId> context_;  // made by the first Ring
  std::vector<std::optional<graph::TaskId>> last_, tensor_tail_;
  DurationNs pending_;
  std::string pending_name_;
  std::string_view pending_category_;
  graph::NameId pending_name_id_;
  uint16_t pending_category_id_ = 0;
  // The tensor-parallel collectives' group (the simulated peers) and the group they are priced
  // over, made by the first.
  std::optional<std::pair<graph::GroupId, graph::GroupId>> tensor_groups_;
};

}  // namespace dtsim::strategies
