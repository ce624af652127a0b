// `dtsim profile -o run.json [--kinds LIST] [--max-buffer-mb N] -- PROGRAM [ARGS...]`: runs a
// program with dtsim's CUPTI injection library (CUDA_INJECTION64_PATH), which writes a
// Kineto-compatible trace of every CUDA process it starts (docs/profiler.md), then prints each
// trace's statistics. Before starting anything it checks that the program exists and that a
// GPU and its driver are there, naming the cause when not; a failing program's exit status is
// passed through.
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>

#include "profiler/gpu_probe.h"
#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ProfileCommand(std::span<const std::string> args, std::ostream& out);

// What the command needs from the machine; tests replace it to run programs without a GPU.
struct ProfileEnvironment {
  std::function<Expected<profiler::CudaDriverInfo>()> probe_driver;
  // The injection library, or an error saying why there is none (dtsim built without CUPTI).
  std::function<Expected<std::string>()> injection_library;
};

// The machine's: ProbeCudaDriver() and the library built beside the dtsim executable.
ProfileEnvironment MachineProfileEnvironment();

CommandOutcome ProfileCommand(std::span<const std::string> args, std::ostream& out,
                              const ProfileEnvironment& environment);

}  // namespace dtsim::cli
