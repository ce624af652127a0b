// What NVIDIA's published training recipes set that their performance tables do not say, read
// from the recipes' code at the release a table names, for `dtsim validate`'s measured points
// (docs/validation.md, "What the recipes set"). Each setting names the file it comes from.
#pragma once

#include <string>
#include <vector>

#include "sim/base/json_reader.h"

namespace dtsim::strategies {

// A simulation config's sections a recipe may add to: the precision, recompute, plan and
// cluster already read from the point.
struct RecipeSections {
  Json& training;
  Json& parallelism;
  Json& cluster;
};

// Adds to `sections` what the recipe behind `point` (a calibration-points.json or
// published-points.json record) sets beyond its table: the gradients' and optimizer state's
// dtypes, FP8 parameters, a recompute policy the table leaves unsaid, the expert all-to-alls'
// overlap, the tensor-parallel collectives' (none before Megatron-LM's async all-reduce), the
// NCCL environment its launch scripts export. Each setting applied is added to `notes` with its
// source; a point no recipe below matches is left alone.
void ApplyPublishedRecipe(const Json& point, RecipeSections sections,
                          std::vector<std::string>& notes);

}  // namespace dtsim::strategies
