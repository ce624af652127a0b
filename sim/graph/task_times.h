// When each task of a simulated run started and ended: the engine's output and the input of
// the timeline writer. A communication task starts when it arrives at the rendezvous; its
// communication's own start is when the last participant arrived.
#pragma once

#include "sim/base/huge_page_allocator.h"
#include "sim/base/time.h"

namespace dtsim::graph {

struct TaskTimes {
  LargeVector<TimeNs> task_start;  // indexed by TaskId (huge pages: tens of millions of tasks)
  LargeVector<TimeNs> task_end;
  LargeVector<TimeNs> comm_start;  // indexed by CommId
  LargeVector<TimeNs> comm_end;
};

}  // namespace dtsim::graph
