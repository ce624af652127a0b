// Where a result came from, recorded in every result family under "provenance" (docs/formats/
// provenance.md): dtsim's version and commit, the command and its arguments, the --set
// overrides, the config as simulated (after the overrides), what dtsim resolved from it (the
// cluster's bandwidths and latencies, the plan's defaults), and every input file with its size
// and SHA-256. Two results can then say what differs between them (`dtsim diff`, `dtsim report`).
//
// A command fills the process's record as it learns each part (ProvenanceRecord); a family
// writer adds it to its document with ProvenanceJson when it writes. The input files are the
// ones this process read (sim/base/input_files.h), hashed when the result is written.
#pragma once

#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::results {

struct Provenance {
  std::string command;                 // "simulate", "search", ...
  std::vector<std::string> arguments;  // after the command name, as given
  std::vector<std::string> overrides;  // --set KEY=VALUE, in order
  Json config;                         // the config after the overrides (null: none)
  OrderedJson resolved;                // what dtsim resolved from it (null: nothing recorded)
};

// The record of this process's command (one command per process; tests reset it).
Provenance& ProvenanceRecord();
void ResetProvenance(std::string command, std::vector<std::string> arguments);

// Records the config a command simulates: the document after the overrides, the overrides, and
// what dtsim resolved from it (the cluster spec, the GPU, the plan's defaults), when `config`
// is given (a sweep's or a search's base config is not one plan: it records no resolution).
void RecordConfig(const Json& document, const std::vector<std::string>& overrides,
                  const strategies::SimulationConfig* config);

// dtsim's version and the commit it was built from ("unknown" outside a git checkout).
std::string_view DtsimVersion();
std::string_view DtsimCommit();

// The "provenance" object: the record, dtsim's version and commit, and the input files read so
// far with their sizes and SHA-256 (a file that cannot be read again is listed with its error).
OrderedJson ProvenanceJson();

// The leaves of `value` under `prefix` as ("a.b[2].c", JSON text) pairs; an empty object or
// array has no leaf (so `"overrides": []` and no overrides compare equal).
void FlattenJson(const Json& value, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& out);

// The inputs two results were made from, flattened to "a.b.c" keys (the config after the
// overrides, the resolved values, the overrides and the input files' hashes), for comparing.
std::vector<std::pair<std::string, std::string>> FlatProvenance(const Json& provenance);

}  // namespace dtsim::results
