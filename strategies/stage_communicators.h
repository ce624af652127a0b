// The NCCL communicators one rank of a pipeline stage joins under the plan, as the builder lays
// the ranks out (ParallelPlan::Rank), and the buffers NCCL holds for them on that rank
// (network/nccl_memory.h; docs/models.md, "Memory").
#pragma once

#include <string>
#include <vector>

#include "network/nccl_memory.h"
#include "strategies/config.h"

namespace dtsim::strategies {

struct StageCommunicator {
  std::string name;  // "tensor", "data", "context", "expert", "expert-data", "pipeline", …
  network::CommunicatorUse use;
  network::NcclBuffers buffers;
};

// The communicators of rank (data index 0, `stage`, tensor index 0), which stands for its
// stage: tensor parallelism (a 2D/2.5D grid's rows and columns), the data-parallel group the
// gradients are reduced and ZeRO-sharded over (data × context, × a 2.5D grid's depth), context
// parallelism's ring or all-to-all peers, the expert-parallel all-to-all and the expert-data
// group, the pipeline's neighbours, and the tied embedding's group of the first and last
// stages. Communicators of one rank are left out.
std::vector<StageCommunicator> StageCommunicators(const ResolvedConfig& config, int stage);

// Their buffers, summed.
network::NcclBuffers StageNcclBuffers(const ResolvedConfig& config, int stage);

}  // namespace dtsim::strategies
