#include "tools/cli/profile_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "profiler/activity_kinds.h"
#include "profiler/injection_environment.h"
#include "sim/base/atomic_file.h"
#include "sim/base/strings.h"
#include "sim/base/temp_files.h"
#include "tools/cli/command_line.h"
#include "tools/cli/run_program.h"
#include "tools/cli/trace_report.h"
#include "traces/kineto_reader.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;
namespace environment = profiler::environment;

struct ProfileOptions {
  std::string output;
  std::string kinds = "default";
  int32_t max_buffer_mb = profiler::environment::kDefaultMaxBufferMb;
  bool all_api_calls = false;
  std::string capture_range = "whole";
  bool help = false;
  std::vector<std::string> program;  // after "--"
};

po::options_description Describe(ProfileOptions& o) {
  po::options_description description(
      "Usage: dtsim profile -o TRACE.json [options] -- PROGRAM [ARGS...]\n\n"
      "Runs PROGRAM with dtsim's CUPTI profiler injected (CUDA_INJECTION64_PATH) and writes a\n"
      "Kineto-compatible JSON trace of its GPU work: kernels, copies, sets, CUDA API calls,\n"
      "syncs, NVTX ranges, with every dropped or unlinked record counted in its metadata\n"
      "(docs/profiler.md). Other CUDA processes PROGRAM starts write TRACE.pid<N>.json.\n"
      "A failing PROGRAM's exit status is passed through.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.output)->value_name("FILE"), "the trace to write (required)")(
      "kinds", po::value(&o.kinds)->value_name("LIST"),
      "activity kinds to record, comma-separated: kernel, memcpy, memset, runtime, driver, "
      "sync, cuda_event, external, nvtx, overhead, memory (device memory allocated through "
      "CUDA); all; default (every kind but sync and cuda_event, which cost ~10% of a step each, "
      "and memory); mixed: default,sync")(
      "max-buffer-mb", AtLeastValue(&o.max_buffer_mb, 1, "max-buffer-mb"),
      "cap on the host memory for CUPTI's record buffers (default 256 MiB); past it records are "
      "dropped and counted")(
      "all-api-calls", po::bool_switch(&o.all_api_calls),
      "also record the CUDA API calls that only ask something (cudaGetDevice, "
      "cudaGetLastError, cuDevicePrimaryCtxGetState, ...; left out by default, listed in the "
      "trace's metadata): they launch nothing, and PyTorch makes ~12 per kernel")(
      "capture-range", po::value(&o.capture_range)->value_name("RANGE"),
      "whole (default: from the first CUDA call to exit) or cuda-profiler-api (only between "
      "cudaProfilerStart and cudaProfilerStop, as many windows as the program opens)");
  return description;
}

// PROGRAM as execv needs it: a path with a slash as given, else the first executable match on
// PATH.
Expected<std::string> ResolveProgram(const std::string& program) {
  const auto executable = [](const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (executable(program)) return program;
    const bool exists = access(program.c_str(), F_OK) == 0;
    return Error(fmt::format("program {} {}", Quote(program),
                             exists ? "is not an executable file" : "does not exist"));
  }
  const char* path = std::getenv("PATH");
  std::string_view directories = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const size_t colon = directories.find(':');
    const std::string directory(directories.substr(0, colon));
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + program;
    if (executable(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    directories.remove_prefix(colon + 1);
  }
  return Error(fmt::format("program {} is not found on PATH", Quote(program)));
}

std::string CommandLineText(const std::vector<std::string>& program) {
  std::string text;
  for (const std::string& word : program) {
    if (!text.empty()) text += ' ';
    text += word.find_first_of(" \t\"'") == std::string::npos ? word : Quote(word);
  }
  return text;
}

struct StatusReport {
  std::vector<std::string> traces;
  std::vector<std::string> errors;
};

// The lines the injection library appended, one per profiled process.
StatusReport ReadStatus(const std::string& path) {
  StatusReport report;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("ok ")) report.traces.push_back(line.substr(3));
    if (line.starts_with("error ")) report.errors.push_back(line.substr(6));
  }
  return report;
}

CommandOutcome Execute(const ProfileOptions& options, std::ostream& out,
                       const ProfileEnvironment& environment) {
  Expected<profiler::ActivityKinds> kinds = profiler::ParseActivityKinds(options.kinds);
  if (!kinds.ok()) return CommandOutcome::Usage(std::move(kinds).error().Under("--kinds"));
  if (options.capture_range != "whole" && options.capture_range != "cuda-profiler-api") {
    return CommandOutcome::Usage(Error("must be whole or cuda-profiler-api", "--capture-range",
                                       Quote(options.capture_range)));
  }
  if (WritesInPlace(options.output)) {
    // The profiled processes write the trace and a status file beside it, and rank-numbered
    // traces for other processes: a device or pipe has no "beside".
    return CommandOutcome::Usage(
        Error("the trace must be a file path, not a device, a pipe or a /dev or /proc path", "-o",
              Quote(options.output)));
  }
  Expected<std::string> program = ResolveProgram(options.program.front());
  if (!program.ok()) return CommandOutcome::Failure(std::move(program).error());
  // The profiled program and every file its arguments name are inputs (a script, a config).
  std::vector<std::string> inputs = options.program;
  inputs.push_back(*program);
  if (Status refused = RefuseOutputsOverInputs(inputs, {options.output}); !refused.ok()) {
    return CommandOutcome::Failure(std::move(refused).error());
  }
  if (Expected<profiler::CudaDriverInfo> driver = environment.probe_driver(); !driver.ok()) {
    return CommandOutcome::Failure(Error("cannot profile here: " + driver.error().ToString()));
  }
  Expected<std::string> library = environment.injection_library();
  if (!library.ok()) return CommandOutcome::Failure(std::move(library).error());

  const std::string output = std::filesystem::absolute(options.output).string();
  // The profiled processes write beside the output: its directory must take files now, or the
  // failure would only show as a trace that never appeared.
  const std::string status_path = fmt::format("{}.status-{}", output, getpid());
  // Recorded before it is created, so that no Ctrl-C between the two leaves it behind.
  const int status_slot = RecordTemporaryFile(status_path);
  if (!std::ofstream(status_path)) {
    const int error = errno;
    ForgetTemporaryFile(status_slot);
    return CommandOutcome::Failure(
        Error(fmt::format("cannot write beside the output: {}", std::strerror(error)), "-o",
              options.output));
  }
  const Expected<int> status =
      RunProgram(*program, options.program,
                 {{environment::kInjectionPath, *library},
                  {environment::kOutput, output},
                  {environment::kKinds, kinds->ToString()},
                  {environment::kMaxBufferMb, std::to_string(options.max_buffer_mb)},
                  {environment::kAllApiCalls, options.all_api_calls ? "1" : "0"},
                  {environment::kCaptureRange, options.capture_range == "whole"
                                                   ? environment::kCaptureWhole
                                                   : environment::kCaptureProfilerApi},
                  {environment::kProgram, CommandLineText(options.program)},
                  {environment::kStatus, status_path},
                  {environment::kParentPid, std::to_string(getpid())}});
  const StatusReport report = ReadStatus(status_path);
  std::error_code ignored;
  std::filesystem::remove(status_path, ignored);
  ForgetTemporaryFile(status_slot);
  if (!status.ok()) return CommandOutcome::Failure(status.error());

  for (const std::string& trace_path : report.traces) {
    Expected<traces::Trace> trace = traces::ReadKinetoTrace(trace_path);
    if (!trace.ok()) return CommandOutcome::Failure(std::move(trace).error());
    fmt::print(out, "dtsim profile: wrote {}\n", trace_path);
    PrintImportStats(out, *trace);
  }
  CommandOutcome outcome;
  if (WIFSIGNALED(*status)) {
    const int signal = WTERMSIG(*status);
    outcome = CommandOutcome::Failure(
        Error(fmt::format("the program was killed by signal {} ({})", signal, strsignal(signal))));
    outcome.program_exit_status = 128 + signal;
  } else if (WEXITSTATUS(*status) != 0) {
    outcome = CommandOutcome::Failure(
        Error(fmt::format("the program exited with status {}", WEXITSTATUS(*status))));
    outcome.program_exit_status = WEXITSTATUS(*status);
  }
  if (!report.errors.empty()) {
    std::string message = fmt::format("the profiler failed: {}", fmt::join(report.errors, "; "));
    if (outcome.error) message = outcome.error->message() + "; " + message;
    outcome.kind = CommandOutcome::Kind::kFailure;
    outcome.error = Error(message);
  } else if (report.traces.empty() && outcome.kind == CommandOutcome::Kind::kOk) {
    return CommandOutcome::Failure(
        Error("the program made no CUDA calls: the driver never loaded the profiler, so no trace "
              "was written"));
  }
  return outcome;
}

// The directory of the running dtsim executable.
std::filesystem::path ExecutableDirectory() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path(".") : self.parent_path();
}

}  // namespace

ProfileEnvironment MachineProfileEnvironment() {
  return {.probe_driver = [] { return profiler::ProbeCudaDriver(); },
          .injection_library = []() -> Expected<std::string> {
            if (const char* path = std::getenv("DTSIM_INJECTION_LIBRARY")) return std::string(path);
#ifdef DTSIM_INJECTION_LIBRARY_NAME
            // In the build tree the library sits in profiler/ beside the dtsim executable; an
            // installed one in ../lib/dtsim/.
            const std::filesystem::path bin = ExecutableDirectory();
            for (const std::filesystem::path& candidate :
                 {bin / "profiler" / DTSIM_INJECTION_LIBRARY_NAME,
                  bin / ".." / "lib" / "dtsim" / DTSIM_INJECTION_LIBRARY_NAME}) {
              if (std::filesystem::exists(candidate)) return candidate.lexically_normal().string();
            }
            return Error(
                fmt::format("the injection library {} is not beside {} (set "
                            "DTSIM_INJECTION_LIBRARY to its path)",
                            DTSIM_INJECTION_LIBRARY_NAME, bin.string()));
#else
            return Error(
                "this dtsim was built without CUPTI (CMake did not find the CUDA toolkit's "
                "CUDA::cupti), so it has no profiler to inject; rebuild where the toolkit is "
                "installed");
#endif
          }};
}

CommandOutcome ProfileCommand(std::span<const std::string> args, std::ostream& out,
                              const ProfileEnvironment& environment) {
  ProfileOptions options;
  const auto separator = std::find(args.begin(), args.end(), "--");
  if (separator != args.end()) options.program.assign(separator + 1, args.end());
  const std::span<const std::string> own(args.begin(), separator);
  const po::options_description description = Describe(options);
  std::string unused;
  return RunCommandLine(own, description, "unexpected", unused, options.help, "", out, [&] {
    if (!unused.empty()) {
      return CommandOutcome::Usage(Error(fmt::format(
          "the program to profile goes after --: dtsim profile -o run.json -- {} ...", unused)));
    }
    if (options.output.empty()) return CommandOutcome::Usage(Error("-o TRACE.json is required"));
    if (options.program.empty()) {
      return CommandOutcome::Usage(
          Error("no program to profile: dtsim profile -o run.json -- PROGRAM [ARGS...]"));
    }
    return Execute(options, out, environment);
  });
}

CommandOutcome ProfileCommand(std::span<const std::string> args, std::ostream& out) {
  return ProfileCommand(args, out, MachineProfileEnvironment());
}

}  // namespace dtsim::cli
