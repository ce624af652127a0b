// Interned strings: task names and categories repeat millions of times in a large graph, so a
// task stores a 32-bit NameId and the table stores each distinct string once.
#pragma once

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
  std::deque<std::string> strings_;  // deque: views into it stay valid as it grows
  std::unordered_map<std::string_view, uint32_t> index_;
};

}  // namespace dtsim::graph
