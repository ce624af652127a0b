// The files of `dtsim sweep -o PREFIX` (docs/formats/sweep-result.md): PREFIX.json with every
// point's full simulation result, and PREFIX.csv with one row of figures per point. The JSON
// is read back by `dtsim report`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "strategies/search.h"
#include "tools/results/simulate_result.h"

namespace dtsim::results {

// 1.1 added the CSV's cp_exposed_s column (after ep_exposed_s); 1.3 its time_to_train_s column
// (before error).
inline constexpr FileFormat kSweepFormat{"dtsim.sweep", 1, 3, "not a sweep result"};

// A varied config key: its values as given on the command line and as the JSON each became.
struct SweepAxis {
  std::string key;
  std::vector<std::string> texts;
  std::vector<OrderedJson> values;
};

struct SweepPoint {
  std::vector<size_t> choice;         // a value index per axis
  std::optional<OrderedJson> result;  // the simulation result (simulate_result.h); none if failed
  std::optional<strategies::PlanFigures> figures;
  int64_t memory_bytes = 0;  // the largest stage's, per GPU
  std::string error;
};

struct SweepDocument {
  std::string config;
  std::vector<std::string> set;  // --set overrides applied at every point
  std::vector<SweepAxis> axes;
  std::vector<SweepPoint> points;
};

OrderedJson SweepJson(const SweepDocument& sweep);

// Writes PREFIX.json and PREFIX.csv, each atomically.
Status WriteSweepFiles(const std::string& prefix, const SweepDocument& sweep);

// What a reader of PREFIX.json gets back.
struct SweepRecord {
  std::string config;
  std::vector<std::string> keys;  // the varied keys, slowest first
  struct Point {
    Json values;                                 // key → value
    std::optional<SimulateResultRecord> result;  // none for a failed point
    std::string error;
  };
  std::vector<Point> points;
};

Expected<SweepRecord> SweepFromJson(const Json& document);

}  // namespace dtsim::results
