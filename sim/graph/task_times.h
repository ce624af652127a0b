// When each task of a simulated run started and ended: the engine's output and the input of
// the timeline writer. A communication task starts when it arrives at the rendezvous; its
// communication's own start is when the last participant arrived.
#pragma once

#include <vector>

#include "sim/base/time.h"

namespace dtsim::graph {

struct TaskTimes {
  std::vector<TimeNs> task_start;  // indexed by TaskId
  std::vector<TimeNs> task_end;
  std::vector<TimeNs> comm_start;  // indexed by CommId
  std::vector<TimeNs> comm_end;
};

}  // namespace dtsim::graph
