#include "sim/graph/string_table.h"

namespace dtsim::graph {

StringTable::StringTable() { Intern(""); }

NameId StringTable::Intern(std::string_view text) {
  Recent& recent = recent_[(reinterpret_cast<uintptr_t>(text.data()) >> 2) % kRecent];
  if (recent.data == text.data() && strings_[recent.id] == text) return NameId(recent.id);
  const auto it = index_.find(text);
  uint32_t id = 0;
  if (it != index_.end()) {
    id = it->second;
  } else {
    id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(text);
    index_.emplace(strings_.back(), id);
  }
  recent = {text.data(), id};
  return NameId(id);
}

size_t StringTable::MemoryBytes() const {
  size_t bytes = 0;
  for (const std::string& s : strings_) bytes += sizeof(std::string) + s.capacity();
  // An unordered_map node holds the key, the value and a next pointer; plus the bucket array.
  bytes += index_.size() * (sizeof(std::string_view) + 2 * sizeof(void*)) +
           index_.bucket_count() * sizeof(void*);
  return bytes;
}

}  // namespace dtsim::graph
