#include "sim/engine/event_queue.h"

#include <algorithm>

#include "sim/base/check.h"

namespace dtsim::engine {
namespace {
constexpr int kSequenceBits = 48;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kSequenceBits) - 1;
}  // namespace

EventId EventQueue::Push(TimeNs time, uint32_t priority, HandlerId handler, uint64_t payload) {
  DTSIM_CHECK(priority <= kMaxPriority, "event priority out of range");
  DTSIM_CHECK(handler <= kMaxHandler && payload <= Event::kMaxPayload, "event target out of range");
  DTSIM_CHECK(next_sequence_ <= kSequenceMask, "event sequence exhausted");
  const uint64_t sequence = next_sequence_++;
  heap_.emplace_back(time, (uint64_t{priority} << kSequenceBits) | sequence, handler, payload);
  SiftUp(heap_.size() - 1);
  return EventId{sequence};
}

void EventQueue::Cancel(EventId id) {
  DTSIM_CHECK(id.sequence < next_sequence_, "cancelling an event that was never pushed");
  cancelled_.insert(id.sequence);
}

bool EventQueue::PopNext(Event& out) {
  while (!heap_.empty()) {
    out = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0);
    if (cancelled_.empty() || cancelled_.erase(out.order & kSequenceMask) == 0) return true;
  }
  return false;
}

// Hole-based sifts: move the hole instead of swapping, one write per level.
void EventQueue::SiftUp(size_t index) {
  const Event moving = heap_[index];
  while (index > 0) {
    const size_t parent = (index - 1) / kArity;
    if (!Later(heap_[parent], moving)) break;
    heap_[index] = heap_[parent];
    index = parent;
  }
  heap_[index] = moving;
}

void EventQueue::SiftDown(size_t index) {
  const size_t count = heap_.size();
  const Event moving = heap_[index];
  while (true) {
    const size_t first = kArity * index + 1;
    if (first >= count) break;
    const size_t last = std::min(first + kArity, count);
    size_t best = first;
    for (size_t child = first + 1; child < last; ++child) {
      if (Later(heap_[best], heap_[child])) best = child;
    }
    if (!Later(moving, heap_[best])) break;
    heap_[index] = heap_[best];
    index = best;
  }
  heap_[index] = moving;
}

}  // namespace dtsim::engine
