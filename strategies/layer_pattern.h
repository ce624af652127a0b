// Megatron-LM's per-layer patterns on the command line (megatron/training/arguments.py,
// moe_freq_type and its kin): a flag such as --window-attn-skip-freq takes an integer, or a
// Python list expression that its _eval_pattern evaluates, "([1]*3+[0])*12" for twelve
// repetitions of three windowed layers and a full one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::strategies {

// The longest list a pattern may evaluate to (a model's layer count is far below it).
inline constexpr int64_t kMaxLayerPatternLength = int64_t{1} << 16;

// An integer, or the list of integers a pattern expression evaluates to: integer literals and
// lists of them, parentheses, + (sum, or concatenation of lists) and * (product, or a list
// repeated). Anything else — names, calls, floats, a list longer than kMaxLayerPatternLength —
// is an error naming what it met; `flag` names the argument in errors.
Expected<std::variant<int64_t, std::vector<int64_t>>> EvalLayerPattern(std::string_view text,
                                                                       std::string_view flag);

// A per-layer list as the shortest of the expressions EvalLayerPattern reads back: a repeated
// period ("([1,1,1,1,1,0])*10"), else runs ("[0]*3+[1]*58").
std::string LayerPatternExpression(const std::vector<int64_t>& flags);

// Megatron-Core's windows as a model's fields: --window-size LEFT,RIGHT (its window_size, keys
// before and after a query; "(4096, 0)" and "4096,0" alike; LEFT -1 is unbounded: no window)
// sets sliding_window to LEFT, which must be causal (RIGHT 0); --window-attn-skip-freq
// (`skip`), an integer N or a list expression, sets sliding_window_pattern. Errors name the flag.
Status ReadMegatronWindows(std::string_view window_size, const std::optional<std::string>& skip,
                           Json& model);

// MoE on layer i >= first_dense with (i + 1) % every == 0 (a model's moe.first_dense_layers and
// moe.every).
struct EveryPlacement {
  int64_t first_dense = 0;
  int64_t every = 1;
};
// The placement that puts MoE on the layers `flags` marks 1, if one does (the first MoE layer
// after the dense ones must be the every-th counted from 1).
std::optional<EveryPlacement> PlacementAsEvery(std::span<const int64_t> flags);

// Megatron-Core's --moe-layer-freq `text` over `layers` decoder layers, set in `moe`: an integer
// N puts MoE on layers 0, N, 2N, … (gpt_layer_specs.py), a list on the layers it flags 1. The
// placement is written as moe.first_dense_layers and moe.every where they say it (MoE on layer
// i >= first_dense_layers with (i + 1) % every == 0: DeepSeek-V3's "[0]*3+[1]*58", N = 1, an
// alternation from layer 1), else as moe.layers, one flag a layer. Errors name the flag.
Status ReadMegatronMoeLayers(const std::string& text, int64_t layers, Json& moe);

}  // namespace dtsim::strategies
