#include "tools/cli/run_program.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spawn.h>

namespace dtsim::cli {

Expected<int> RunProgram(const std::string& path, const std::vector<std::string>& program,
                         const std::vector<std::pair<std::string, std::string>>& environment) {
  std::vector<std::string> variables;
  variables.reserve(environment.size());
  for (const auto& [name, value] : environment)
    variables.push_back(fmt::format("{}={}", name, value));
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    const bool replaced = std::any_of(environment.begin(), environment.end(), [&](const auto& e) {
      return variable.starts_with(e.first + "=");
    });
    if (!replaced) variables.emplace_back(variable);
  }
  std::vector<char*> envp;
  envp.reserve(variables.size() + 1);
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(program.size() + 1);
  for (const std::string& word : program) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  pid_t child = 0;
  if (const int error =
          posix_spawn(&child, path.c_str(), nullptr, nullptr, argv.data(), envp.data());
      error != 0) {
    return Error(fmt::format("cannot run the program: {}", std::strerror(error)), "", path);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      return Error(fmt::format("waiting for the program: {}", std::strerror(errno)));
    }
  }
  return status;
}

}  // namespace dtsim::cli
