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
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) ReplaceTop(last);
    if (cancelled_.empty() || cancelled_.erase(out.order & kSequenceMask) == 0) return true;
  }
  return false;
}

// Bottom-up replacement of the top (Floyd): move the hole from the root down to a leaf,
// always to the earliest child, without comparing against `moving`; then sift `moving` up
// from there. `moving` came from the bottom, so it rarely rises far: about one comparison per
// level fewer than a top-down sift.
void EventQueue::ReplaceTop(const Event& moving) {
  const size_t count = heap_.size();
  size_t index = 0;
  while (true) {
    const size_t first = kArity * index + 1;
    if (first >= count) break;
    size_t best = first;
    if (first + kArity <= count) {
      // Index arithmetic rather than branches (see Later).
      const size_t a = first + static_cast<size_t>(Later(heap_[first], heap_[first + 1]));
      const size_t b = first + 2 + static_cast<size_t>(Later(heap_[first + 2], heap_[first + 3]));
      const size_t later = static_cast<size_t>(Later(heap_[a], heap_[b]));
      best = a + later * (b - a);
    } else {
      for (size_t child = first + 1; child < count; ++child) {
        if (Later(heap_[best], heap_[child])) best = child;
      }
    }
    heap_[index] = heap_[best];
    index = best;
  }
  heap_[index] = moving;
  SiftUp(index);
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

}  // namespace dtsim::engine
