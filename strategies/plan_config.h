// A plan the search ranked, as a config `dtsim simulate` reads and simulates to the same
// figures (issue 35: plans out): the search's base config (its JSON after --set) with the
// plan's parallelism, global batch, micro-batch, recompute, precision and compression written in,
// and the cluster sized and the ranks simulated as the search had them.
#pragma once

#include "sim/base/json_reader.h"
#include "strategies/search.h"

namespace dtsim::strategies {

// `base`: the config's JSON the search read (no "search" section); `compression`: the search
// section's "compression" list as written (null: the config's own method); `nodes`: the
// cluster's node count in the search (--gpus).
Json PlanConfigJson(const Json& base, const PlanChoice& choice, const Json* compression, int nodes,
                    RanksMode ranks);

// The files a config names relative to itself ("profile", "calibration", "model.hf_config"),
// made absolute against `source`'s directory, so the config reads the same from elsewhere.
void AnchorRelativePaths(Json& config, const std::string& source);

}  // namespace dtsim::strategies
