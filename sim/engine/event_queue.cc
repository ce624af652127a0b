#include "sim/engine/event_queue.h"

#include "sim/base/check.h"

namespace dtsim::engine {
namespace {
constexpr int kSequenceBits = 48;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kSequenceBits) - 1;
}  // namespace

EventId EventQueue::Push(TimeNs time, uint32_t priority, HandlerId handler, uint64_t payload) {
  DTSIM_CHECK(priority <= kMaxPriority, "event priority out of range");
  DTSIM_CHECK(next_sequence_ <= kSequenceMask, "event sequence exhausted");
  const uint64_t sequence = next_sequence_++;
  heap_.push_back({time, (uint64_t{priority} << kSequenceBits) | sequence, payload, handler});
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
    const size_t parent = (index - 1) / 2;
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
    size_t child = 2 * index + 1;
    if (child >= count) break;
    if (child + 1 < count && Later(heap_[child], heap_[child + 1])) ++child;
    if (!Later(moving, heap_[child])) break;
    heap_[index] = heap_[child];
    index = child;
  }
  heap_[index] = moving;
}

}  // namespace dtsim::engine
