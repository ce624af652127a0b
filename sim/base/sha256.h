// SHA-256 (FIPS 180-4) for the content hashes a result records of its inputs (provenance).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/base/status.h"

namespace dtsim {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view bytes);
  // The digest as 64 lowercase hex digits; the hash takes no more input after it.
  std::string HexDigest();

 private:
  void Block(const unsigned char* block);

  std::array<uint32_t, 8> state_;
  std::array<unsigned char, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes hashed so far
};

std::string Sha256Hex(std::string_view bytes);

// The SHA-256 of a file's content, read in chunks (a trace may be gigabytes); errors name it.
Expected<std::string> Sha256OfFile(const std::string& path);

}  // namespace dtsim
