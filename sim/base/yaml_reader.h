// Reading YAML inputs (a NeMo training config, strategies/nemo_import.h) as JSON values, so
// that one set of readers and one kind of error path serve both. Part of the base layer as a
// separate target (dtsim_yaml) because it needs yaml-cpp.
#pragma once

#include <string>
#include <string_view>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim {

// The deepest nesting of mappings and sequences read (a NeMo config nests 4 levels).
inline constexpr int kMaxYamlDepth = 64;
// The most values one document may expand to, the copies kept for its anchors included:
// aliases let a few lines name millions.
inline constexpr int64_t kMaxYamlValues = 1'000'000;

// Parses one YAML document (no text, or only comments: null). Mappings become objects, their
// keys the keys' text, a key given twice an error; sequences become arrays; null (`~`, `null`,
// an empty value) becomes null; every other scalar becomes a string of its text as written,
// quoted or not — how it is typed (`1e-5`, `yes`, `016`) is the reader's, since YAML's schemas
// and OmegaConf's disagree. Anchors and aliases are expanded, and YAML's merge key
// (`<<: *base`, or a list of them) merges mappings in: a mapping's own keys win, then the
// earlier merged mapping. Errors name `file` and the line and column: syntax errors with
// yaml-cpp's reason, several documents, a key that is not a scalar, a merge key not given
// mappings, nesting deeper than kMaxYamlDepth, more than kMaxYamlValues values.
Expected<Json> ParseYaml(std::string_view text, const std::string& file);
// Reads a file (recorded as an input: sim/base/input_files.h) and parses it.
Expected<Json> ReadYamlFile(const std::string& path);

}  // namespace dtsim
