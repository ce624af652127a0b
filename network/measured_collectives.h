// The measured NCCL collectives of ../shared/network/measured-collectives.json (nccl-tests runs
// on A100, H100 and H200 nodes, one to ten nodes) and the analytical model's time for each:
// how far the network model is from NCCL, curve by curve and per size band
// (docs/network-accuracy.md, "Against measured collectives"; issue 25's yardstick).
//
// nccl-tests' conventions: S is one rank's buffer for all-reduce and send/recv, the whole n-rank
// buffer for all-gather, reduce-scatter and all-to-all; dtsim's collective size is each rank's
// input (for all-gather, its contribution: S/n). Send/recv is nccl-tests' ring shift: every GPU
// sends S to the next, priced as the one send from the last GPU of the first node to the next
// (across nodes when there are several). A node of which the run used fewer GPUs than it has
// NICs is given one NIC per GPU used; one that ran on some GPUs of a node (`node_gpus`) keeps
// the node's GPU count, so an NVLink mesh prices those GPUs' links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/graph/task.h"

namespace dtsim::network {

struct MeasuredCollective {
  std::string id;
  std::string system;
  std::string preset;  // the dtsim cluster preset standing for the system; empty: none
  graph::CommKind kind = graph::CommKind::kAllReduce;
  int gpus = 0;
  int nodes = 0;
  // The GPUs of a node when the run used only some of one (vTrain's curves: the first `gpus` of
  // an 8-GPU node, whose NVLink mesh then carries fewer rings); 0: the run's GPUs per node.
  int node_gpus = 0;
  int64_t size = 0;  // S, nccl-tests' convention
  DurationNs time;   // measured (S / algbw for a record published as bandwidth only)
};

struct MeasuredCollectives {
  std::vector<MeasuredCollective> points;  // records of kind "measured"
  int64_t other_records = 0;               // vendor summaries and NCCL's model parameters
};

// Reads the file; errors name the file, the record and the field.
Expected<MeasuredCollectives> ReadMeasuredCollectives(const std::string& path);

// vTrain's dense all-reduce curves (../shared/network/vtrain-allreduce: `a100/` and `v100/`,
// all_reduce_{2..8}gpu.csv, nccl-tests rows from 1 MiB to 1 GiB): the out-of-place time at
// every power-of-two size, 1 MiB to 1 GiB, on the first 2–8 GPUs of an 8-GPU dgx-a100 or
// dgx1-v100 node. Errors name the file and line.
Expected<MeasuredCollectives> ReadVtrainAllReduce(const std::string& dir);

// The analytical model's time for a measured point on its preset with its node layout (the
// default algorithm choice), and the algorithm chosen.
struct PredictedCollective {
  DurationNs time;
  std::string algorithm;
};
Expected<PredictedCollective> PredictMeasuredCollective(const MeasuredCollective& point);

}  // namespace dtsim::network
