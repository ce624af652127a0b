#include "sim/base/input_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

namespace dtsim {
namespace {

using FileIdentity = std::pair<dev_t, ino_t>;

struct InputRegistry {
  std::mutex mutex;
  std::map<FileIdentity, std::string> inputs;   // identity -> the path as first named
  std::map<std::string, StreamDigest> streams;  // path -> what was read from it
};

InputRegistry& Registry() {
  static InputRegistry registry;  // NOLINT: process-wide by design, see the header
  return registry;
}

std::optional<FileIdentity> IdentityOf(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity(info.st_dev, info.st_ino);
}

}  // namespace

void NoteInputFile(const std::string& path) {
  const std::optional<FileIdentity> identity = IdentityOf(path);
  if (!identity) return;
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  registry.inputs.emplace(*identity, path);
}

std::optional<std::string> InputAt(const std::string& path) {
  const std::optional<FileIdentity> identity = IdentityOf(path);
  if (!identity) return std::nullopt;
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto it = registry.inputs.find(*identity);
  if (it == registry.inputs.end()) return std::nullopt;
  return it->second;
}

Status CheckNotAnInput(const std::string& output_path) {
  const std::optional<std::string> input = InputAt(output_path);
  if (!input) return Status::Ok();
  const std::string same = *input == output_path ? "" : " (the same file as " + *input + ")";
  return Error("refusing to write an output over an input of this command" + same +
               ": the input would be lost")
      .InFile(output_path);
}

void NoteInputStream(const std::string& path, const StreamDigest& digest) {
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  registry.streams[path] = digest;
}

std::optional<StreamDigest> InputStreamDigest(const std::string& path) {
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto it = registry.streams.find(path);
  if (it == registry.streams.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> InputFiles() {
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> paths;
  paths.reserve(registry.inputs.size());
  for (const auto& [identity, path] : registry.inputs) paths.push_back(path);
  std::sort(paths.begin(), paths.end());
  return paths;
}

void ForgetInputFiles() {
  InputRegistry& registry = Registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  registry.inputs.clear();
  registry.streams.clear();
}

}  // namespace dtsim
