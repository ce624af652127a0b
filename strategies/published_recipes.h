// What NVIDIA's published training recipes set that their performance tables do not say, read
// from the recipes' code at the release a table names, for `dtsim validate`'s measured points
// (docs/validation.md, "What the recipes set"). Each setting names the file it comes from.
#pragma once

#include <string>
#include <vector>

#include "sim/base/json_reader.h"

namespace dtsim::strategies {

// Adds to `training` and `parallelism` (a simulation config's sections, the precision,
// recompute and plan already read from the point) what the recipe behind `point` (a
// calibration-points.json record) sets beyond its table: the gradients' and optimizer state's
// dtypes, FP8 parameters, a recompute policy the table leaves unsaid, the expert all-to-alls'
// overlap. Each setting applied is added to `notes` with its source; a point no recipe below
// matches is left alone.
void ApplyPublishedRecipe(const Json& point, Json& training, Json& parallelism,
                          std::vector<std::string>& notes);

}  // namespace dtsim::strategies
