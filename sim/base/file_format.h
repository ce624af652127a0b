// The one convention for the files dtsim writes: every document opens with
//   {"format": "dtsim.NAME", "version": "MAJOR.MINOR", ...}
// A reader accepts its own MAJOR with any MINOR (a newer minor only adds keys, which readers of
// an older minor ignore or, if strict, report by name); a new MAJOR means an incompatible
// change. Files written before the convention carried the integer MAJOR ("version": 1) in
// some formats; readers still accept that form. Part of dtsim_json (needs nlohmann-json).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim {

// Written documents keep their keys in the order written, so "format" and "version" come first.
using OrderedJson = nlohmann::ordered_json;

struct FileFormat {
  std::string_view name;  // "dtsim.simulate_result"
  int major = 1;
  int minor = 0;
  std::string_view what;  // for errors: "not a simulation result"

  std::string Version() const;  // "1.0"
};

// {"format": name, "version": "MAJOR.MINOR"}: the first keys of an ordered document.
OrderedJson FormatHeader(const FileFormat& format);

// Checks a document's "format" and "version" keys (and marks them known to `root`): the name
// must match and the version must carry this reader's MAJOR. Errors name the key and value.
Status CheckFormat(JsonObjectReader& root, const FileFormat& format);
Status CheckFormat(const Json& document, const FileFormat& format);

}  // namespace dtsim
