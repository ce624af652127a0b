// The engine's event queue. Events are delivered in a total, documented order:
//   (time, priority, insertion sequence) — earlier time first; at equal times the lower
//   priority value first; at equal priority the event pushed first.
// So two runs of the same input deliver the same sequence. A 4-ary min-heap of 24-byte
// events: half the depth of a binary heap and a node's children share a cache line, which
// measured 15-25% faster on the engine benchmark. Cancel() is O(1) and lazy (the event stays
// in the heap and is dropped when it reaches the top).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "sim/base/time.h"

namespace dtsim::engine {

using HandlerId = uint32_t;

struct EventId {
  uint64_t sequence = 0;
};

// 24 bytes: the handler (16 bits) and its payload (48 bits) share one word.
class Event {
 public:
  static constexpr int kPayloadBits = 48;
  static constexpr uint64_t kMaxPayload = (uint64_t{1} << kPayloadBits) - 1;

  Event() = default;
  Event(TimeNs at, uint64_t sort_key, HandlerId handler, uint64_t payload)
      : time(at), order(sort_key), target_((uint64_t{handler} << kPayloadBits) | payload) {}

  HandlerId handler() const { return static_cast<HandlerId>(target_ >> kPayloadBits); }
  // Meaning is the handler's (a task id, a comm id, a flow id).
  uint64_t payload() const { return target_ & kMaxPayload; }

  TimeNs time;
  uint64_t order = 0;  // priority << 48 | insertion sequence

 private:
  uint64_t target_ = 0;
};

class EventQueue {
 public:
  static constexpr uint32_t kMaxPriority = (1u << 16) - 1;
  static constexpr HandlerId kMaxHandler = (1u << 16) - 1;

  // Preconditions: priority <= kMaxPriority, handler <= kMaxHandler,
  // payload <= Event::kMaxPayload.
  EventId Push(TimeNs time, uint32_t priority, HandlerId handler, uint64_t payload);
  // Precondition: the event was pushed and has not been delivered yet.
  void Cancel(EventId id);
  // Moves the next live event into `out`; false when none is left.
  bool PopNext(Event& out);

  size_t size() const { return heap_.size(); }  // including cancelled events not yet dropped
  size_t MemoryBytes() const { return heap_.capacity() * sizeof(Event); }

 private:
  static constexpr size_t kArity = 4;
  // Branch-free (bitwise, not short-circuit): which of two events is later is a coin toss the
  // branch predictor loses about half the time, and the heap asks it several times per level.
  static bool Later(const Event& a, const Event& b) {
    const int64_t at = a.time.ns();
    const int64_t bt = b.time.ns();
    return static_cast<bool>(static_cast<int>(at > bt) |
                             (static_cast<int>(at == bt) & static_cast<int>(a.order > b.order)));
  }
  void SiftUp(size_t index);
  void ReplaceTop(const Event& moving);

  std::vector<Event> heap_;
  uint64_t next_sequence_ = 0;
  std::unordered_set<uint64_t> cancelled_;
};

}  // namespace dtsim::engine
