// The files `dtsim search` writes (docs/formats/search-result.md): every evaluated plan as one
// row of a table — JSON (with what identifies the search, so shards can be merged) and CSV —
// and reading the JSON back (`dtsim search --merge`, `dtsim report`).
#pragma once

#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/search.h"

namespace dtsim::results {

// 1.1 added the "fp8_recipe" column; 1.2 "context", "context_comm" and "cp_exposed_ns"; 1.3
// "same_as" and provenance; 1.4 "allocator_reserve_bytes".
inline constexpr FileFormat kSearchResultFormat{"dtsim.search", 1, 7, "not a search result"};

// One search, or one shard of it.
struct SearchFile {
  // What must agree between shards of one search: the config as read (after --set), the
  // space, the ranking settings and the number of shards.
  OrderedJson settings;
  int shard = 1;
  int shards = 1;
  strategies::SearchSpace space;  // compression methods by name only, when read back
  strategies::SearchResult result;
};

// The JSON document WriteSearchFiles writes to PREFIX.json, whole (the file is streamed).
OrderedJson SearchFileJson(const SearchFile& file);

// Writes PREFIX.json and PREFIX.csv, each atomically.
Status WriteSearchFiles(const std::string& prefix, const SearchFile& file);

// Reads a search result JSON; errors name the file and the row.
Expected<SearchFile> ReadSearchFile(const std::string& path);
// The same from a document already parsed; `path` names the file in errors.
Expected<SearchFile> SearchFileFromJson(const Json& json, const std::string& path);

// The shards of one search, each once, as one result (ranked again with `rerank`); errors
// when they are not shards of the same search or one is missing or repeated.
Expected<SearchFile> MergeSearchFiles(std::vector<SearchFile> shards, int rerank);

}  // namespace dtsim::results
