// Interned strings: task names and categories repeat millions of times in a large graph, so a
// task stores a 32-bit NameId and the table stores each distinct string once.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/base/ids.h"

namespace dtsim::graph {

using NameId = Index<struct NameTag>;

class StringTable {
 public:
  StringTable();  // id 0 is the empty string
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  NameId Intern(std::string_view text);
  std::string_view Get(NameId id) const { return strings_[id.value()]; }
  size_t size() const { return strings_.size(); }
  size_t MemoryBytes() const;

 private:
  // The ids of recently interned texts by where the caller's text lives: callers intern the
  // same literal or stored name again and again, and comparing it with the interned copy is
  // cheaper than hashing it. The comparison makes a reused buffer with new text a miss.
  struct Recent {
    const char* data = nullptr;
    uint32_t id = 0;
  };
  static constexpr size_t kRecent = 256;

  std::deque<std::string> strings_;  // deque: views into it stay valid as it grows
  std::unordered_map<std::string_view, uint32_t> index_;
  std::array<Recent, kRecent> recent_{};
};

}  // namespace dtsim::graph
