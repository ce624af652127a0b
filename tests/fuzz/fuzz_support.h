// What the fuzz harnesses share (docs/development.md, "Fuzzing"). A harness feeds one input to
// one reader, the way a user or another tool hands it a file or a string, and goes on through
// what the command does next with what was read. Its contract: the reader returns a value or an
// Error, never crashes, aborts (a DTSIM_CHECK is a crash), hangs or runs out of memory; errors
// say something. libFuzzer (DTSIM_FUZZ=ON, clang) calls LLVMFuzzerTestOneInput with mutated
// inputs; in the normal build fuzz_driver.cc calls it over the regression inputs as a test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/base/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace dtsim::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes `bytes` to a scratch file of this process called `name` (under /dev/shm when it can,
// else the temporary directory; removed at exit) and returns its path: for readers that take a
// path. With `gzip`, the file holds the bytes gzip-compressed.
std::string ScratchFile(std::string_view name, std::string_view bytes, bool gzip = false);

// Traps (a crash libFuzzer reports) when an error says nothing: every input error must name
// what is wrong.
void CheckError(const Error& error);

template <typename T>
bool Succeeded(const Expected<T>& result) {
  if (!result.ok()) CheckError(result.error());
  return result.ok();
}
inline bool Succeeded(const Status& status) {
  if (!status.ok()) CheckError(status.error());
  return status.ok();
}

}  // namespace dtsim::fuzz
