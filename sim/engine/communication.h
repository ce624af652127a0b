// The engine's side of communication (DESIGN §3: the engine does not include the network).
// When every participant of a collective or send/recv pair has arrived, the engine calls
// CommunicationModel::Start; the model decides how long the communication takes and reports
// its end through CommunicationContext, now or from events it schedules itself. network/
// implements CommunicationModel (analytical and flow-level); FixedCostModel is the simple one.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/base/time.h"
#include "sim/engine/event_queue.h"
#include "sim/graph/task_graph.h"

namespace dtsim::engine {

// Receives the events it scheduled. Implementations are owned by whoever registers them and
// must outlive the run.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void OnEvent(uint64_t payload) = 0;
};

// What the engine offers a communication model during a run.
class CommunicationContext {
 public:
  virtual ~CommunicationContext() = default;
  virtual TimeNs Now() const = 0;
  virtual const graph::TaskGraph& graph() const = 0;
  virtual HandlerId RegisterHandler(EventHandler& handler) = 0;
  // Schedules handler.OnEvent(payload) at `time` (>= Now()); payload < 2^48.
  virtual EventId Schedule(TimeNs time, HandlerId handler, uint64_t payload) = 0;
  virtual void Cancel(EventId event) = 0;
  // Ends the communication at `time` (>= Now()): all its participant tasks end then.
  // Must be called exactly once per started communication.
  virtual void CompleteAt(graph::CommId comm, TimeNs time) = 0;
};

class CommunicationModel {
 public:
  virtual ~CommunicationModel() = default;
  virtual std::string_view name() const = 0;
  // Called once, before the first event, to register handlers.
  virtual void Attach(CommunicationContext& context) { (void)context; }
  // Every participant of `comm` has arrived at context.Now(); begin it.
  virtual void Start(graph::CommId comm, CommunicationContext& context) = 0;
  // The thread blocks the communication's kernel holds on each participant's GPU while it runs
  // (NCCL: one per channel it uses), which compute running beside it cannot use
  // (Simulator::ShareSms). Asked once per communication, after Attach; 0: none counted.
  virtual int KernelBlocks(graph::CommId comm) const {
    (void)comm;
    return 0;
  }
};

}  // namespace dtsim::engine
