#include "sim/engine/event_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace dtsim::engine {
namespace {

std::vector<uint64_t> DrainPayloads(EventQueue& queue) {
  std::vector<uint64_t> payloads;
  Event event;
  while (queue.PopNext(event)) payloads.push_back(event.payload());
  return payloads;
}

TEST(EventQueueTest, OrdersByTimeThenPriorityThenInsertion) {
  EventQueue queue;
  queue.Push(TimeNs(20), 0, 0, 1);
  queue.Push(TimeNs(10), 5, 0, 2);
  queue.Push(TimeNs(10), 1, 0, 3);
  queue.Push(TimeNs(10), 5, 0, 4);
  queue.Push(TimeNs(5), 9, 0, 5);
  // t=5 first; at t=10 priority 1 before 5; the two (10, 5) in insertion order; then t=20.
  EXPECT_EQ(DrainPayloads(queue), (std::vector<uint64_t>{5, 3, 2, 4, 1}));
}

TEST(EventQueueTest, CancelledEventsAreNeverDelivered) {
  EventQueue queue;
  queue.Push(TimeNs(1), 0, 0, 1);
  const EventId cancelled = queue.Push(TimeNs(2), 0, 0, 2);
  queue.Push(TimeNs(3), 0, 0, 3);
  queue.Cancel(cancelled);
  EXPECT_EQ(DrainPayloads(queue), (std::vector<uint64_t>{1, 3}));
}

TEST(EventQueueTest, CancellingTheOnlyEventEmptiesTheQueue) {
  EventQueue queue;
  queue.Cancel(queue.Push(TimeNs(2), 0, 0, 2));
  Event event;
  EXPECT_FALSE(queue.PopNext(event));
}

TEST(EventQueueTest, ManyEventsComeOutSorted) {
  EventQueue queue;
  // A permutation of 0..999 (multiplication by 7919, a prime, modulo 1000 is a bijection).
  for (uint64_t i = 0; i < 1000; ++i)
    queue.Push(TimeNs(static_cast<int64_t>((i * 7919) % 1000)), 0, 0, i);
  Event event;
  int64_t last = -1;
  while (queue.PopNext(event)) {
    EXPECT_GT(event.time.ns(), last);
    last = event.time.ns();
  }
  EXPECT_EQ(last, 999);
}

}  // namespace
}  // namespace dtsim::engine
