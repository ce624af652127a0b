#include "tools/api/trace_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "traces/kineto_reader.h"

namespace dtsim::api {

Expected<std::vector<std::string>> TraceFiles(const std::vector<std::string>& arguments) {
  std::vector<std::string> files;
  for (const std::string& argument : arguments) {
    std::error_code error;
    if (!std::filesystem::is_directory(argument, error)) {
      files.push_back(argument);  // the reader names a missing or unreadable file
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(argument, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file(error) && (name.ends_with(".json") || name.ends_with(".json.gz"))) {
        found.push_back(entry.path().string());
      }
    }
    if (error)
      return Error(fmt::format("cannot list the directory: {}", error.message()), "", argument);
    if (found.empty()) {
      return Error("the directory holds no trace (no file ending in .json or .json.gz)", "",
                   argument);
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

Expected<std::vector<traces::Trace>> ReadTraceJob(const std::vector<std::string>& files) {
  std::vector<traces::Trace> job;
  for (const std::string& file : files) {
    DTSIM_ASSIGN_OR_RETURN(traces::Trace trace, traces::ReadKinetoTrace(file));
    job.push_back(std::move(trace));
  }
  std::stable_sort(job.begin(), job.end(), [](const traces::Trace& a, const traces::Trace& b) {
    return (a.rank < 0 ? INT32_MAX : a.rank) < (b.rank < 0 ? INT32_MAX : b.rank);
  });
  for (size_t i = 1; i < job.size(); ++i) {
    const traces::Trace& a = job[i - 1];
    const traces::Trace& b = job[i];
    if (a.rank >= 0 && a.rank == b.rank) {
      return Error(fmt::format("both {} and {} are rank {}: a job takes one trace per rank", a.file,
                               b.file, a.rank));
    }
    if (a.world_size > 0 && b.world_size > 0 && a.world_size != b.world_size) {
      return Error(
          fmt::format("{} ran in a world of {} ranks and {} in one of {}: they are not "
                      "one job",
                      a.file, a.world_size, b.file, b.world_size));
    }
  }
  return job;
}

}  // namespace dtsim::api
