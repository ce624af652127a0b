// Every file format dtsim writes, in one list, and the two operations every result family
// shares: writing a document atomically and reading one back with its header checked
// (sim/base/file_format.h: {"format": NAME, "version": "MAJOR.MINOR"}).
#pragma once

#include <span>
#include <string>

#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::results {

// Every format dtsim writes, inputs it reads back (task graph, op costs) included, in the
// order of docs/formats/. Names are unique; each has a page docs/formats/<page>.md.
struct WrittenFormat {
  const FileFormat* format;
  std::string_view page;  // docs/formats/<page>.md
};
std::span<const WrittenFormat> WrittenFormats();

// Writes `document` as indented JSON, atomically (a failed write leaves any old file).
Status WriteResultFile(const std::string& path, const OrderedJson& document);

// Reads a JSON file and checks that it is `format`; errors name the file.
Expected<Json> ReadResultFile(const std::string& path, const FileFormat& format);

// For the family readers: a child object or array of `parent`, marking the key known; errors
// name the JSON path.
Expected<JsonObjectReader> ChildObject(JsonObjectReader& parent, std::string_view key);
Expected<const Json*> ChildArray(JsonObjectReader& parent, std::string_view key);

}  // namespace dtsim::results
