#include "strategies/layer_pattern.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <utility>

#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

using Value = std::variant<int64_t, std::vector<int64_t>>;

// Integers are kept within this magnitude, so a product of two cannot overflow.
constexpr int64_t kMaxMagnitude = int64_t{1} << 30;
constexpr int kMaxDepth = 64;

// A recursive-descent evaluator over the text: expr := term ('+' term)*,
// term := atom ('*' atom)*, atom := INT | '(' expr ')' | '[' [expr (',' expr)* [',']] ']'.
class Evaluator {
 public:
  Evaluator(std::string_view text, std::string_view flag) : text_(text), flag_(flag) {}

  Expected<Value> Run() {
    DTSIM_ASSIGN_OR_RETURN(Value value, Expr(0));
    SkipSpace();
    if (at_ != text_.size()) return Fail("unexpected text");
    return value;
  }

 private:
  Error Fail(std::string_view what) const {
    return Error(fmt::format("{} at character {} of the pattern (an integer, or a list expression "
                             "such as \"([1]*3+[0])*12\")",
                             what, at_ + 1),
                 std::string(flag_), Quote(std::string(text_)));
  }

  void SkipSpace() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
  }
  bool Take(char c) {
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  Expected<Value> Expr(int depth) { return Chain(depth, '+'); }

  // Operands joined by `op`, left to right: terms by '+', atoms by '*'.
  Expected<Value> Chain(int depth, char op) {
    const auto operand = [&]() { return op == '+' ? Chain(depth, '*') : Atom(depth); };
    DTSIM_ASSIGN_OR_RETURN(Value left, operand());
    while (Take(op)) {
      DTSIM_ASSIGN_OR_RETURN(const Value right, operand());
      DTSIM_ASSIGN_OR_RETURN(left, Combine(std::move(left), right, op));
    }
    return left;
  }

  Expected<Value> Atom(int depth) {
    if (depth >= kMaxDepth) return Fail("nested too deeply");
    if (Take('(')) {
      DTSIM_ASSIGN_OR_RETURN(Value inner, Expr(depth + 1));
      if (!Take(')')) return Fail("expected ')'");
      return inner;
    }
    if (Take('[')) return List(depth + 1);
    SkipSpace();
    const size_t start = at_;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
    if (at_ == start) return Fail("expected an integer, '(' or '['");
    if (at_ - start > 9) return Fail("an integer too large");
    return Value(static_cast<int64_t>(std::stoll(std::string(text_.substr(start, at_ - start)))));
  }

  Expected<Value> List(int depth) {
    std::vector<int64_t> items;
    if (Take(']')) return Value(std::move(items));
    do {
      if (Take(']')) return Value(std::move(items));  // a trailing comma
      DTSIM_ASSIGN_OR_RETURN(const Value item, Expr(depth));
      if (!std::holds_alternative<int64_t>(item)) return Fail("a list inside a list");
      if (std::ssize(items) >= kMaxLayerPatternLength) return Fail("a list too long");
      items.push_back(std::get<int64_t>(item));
    } while (Take(','));
    if (!Take(']')) return Fail("expected ',' or ']'");
    return Value(std::move(items));
  }

  Expected<Value> Combine(Value left, const Value& right, char op) const {
    const auto* a = std::get_if<int64_t>(&left);
    const auto* b = std::get_if<int64_t>(&right);
    if (a != nullptr && b != nullptr) {
      const int64_t result = op == '+' ? *a + *b : *a * *b;
      if (result > kMaxMagnitude) return Fail("an integer too large");
      return Value(result);
    }
    if (op == '+') {
      if (a != nullptr || b != nullptr) return Fail("a list added to an integer");
      std::vector<int64_t> joined = std::get<std::vector<int64_t>>(std::move(left));
      const std::vector<int64_t>& tail = std::get<std::vector<int64_t>>(right);
      if (std::ssize(joined) + std::ssize(tail) > kMaxLayerPatternLength) {
        return Fail("a list too long");
      }
      joined.insert(joined.end(), tail.begin(), tail.end());
      return Value(std::move(joined));
    }
    if (a == nullptr && b == nullptr) return Fail("a list multiplied by a list");
    const std::vector<int64_t>& list = std::get<std::vector<int64_t>>(a != nullptr ? right : left);
    const int64_t times = a != nullptr ? *a : *b;
    if (!list.empty() && times > kMaxLayerPatternLength / std::ssize(list)) {
      return Fail("a list too long");
    }
    std::vector<int64_t> repeated;
    for (int64_t i = 0; i < times; ++i) repeated.insert(repeated.end(), list.begin(), list.end());
    return Value(std::move(repeated));
  }

  std::string_view text_;
  std::string_view flag_;
  size_t at_ = 0;
};

}  // namespace

Expected<std::variant<int64_t, std::vector<int64_t>>> EvalLayerPattern(std::string_view text,
                                                                       std::string_view flag) {
  return Evaluator(text, flag).Run();
}

std::string LayerPatternExpression(const std::vector<int64_t>& flags) {
  const size_t n = flags.size();
  for (size_t period = 1; period < n; ++period) {
    if (n % period != 0) continue;
    bool repeats = true;
    for (size_t i = period; repeats && i < n; ++i) repeats = flags[i] == flags[i - period];
    if (repeats) {
      const std::vector<int64_t> head(flags.begin(),
                                      flags.begin() + static_cast<ptrdiff_t>(period));
      return fmt::format("([{}])*{}", fmt::join(head, ","), n / period);
    }
  }
  std::vector<std::string> runs;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && flags[j] == flags[i]) ++j;
    runs.push_back(fmt::format("[{}]*{}", flags[i], j - i));
    i = j;
  }
  return fmt::format("{}", fmt::join(runs, "+"));
}

std::optional<EveryPlacement> PlacementAsEvery(std::span<const int64_t> flags) {
  const auto first = std::find(flags.begin(), flags.end(), 1);
  if (first == flags.end()) return std::nullopt;
  const auto second = std::find(first + 1, flags.end(), 1);
  EveryPlacement placement{.first_dense = first - flags.begin(),
                           .every = second == flags.end() ? 1 : second - first};
  // Layers before the first every-th are dense without being counted.
  if (placement.first_dense + 1 == placement.every) placement.first_dense = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    const auto layer = static_cast<int64_t>(i);
    const bool moe = layer >= placement.first_dense && (layer + 1) % placement.every == 0;
    if (flags[i] != (moe ? 1 : 0)) return std::nullopt;
  }
  return placement;
}

Status ReadMegatronMoeLayers(const std::string& text, int64_t layers, Json& moe) {
  DTSIM_ASSIGN_OR_RETURN(const auto pattern, EvalLayerPattern(text, "--moe-layer-freq"));
  std::vector<int64_t> flags;
  if (const auto* every = std::get_if<int64_t>(&pattern)) {
    if (*every < 1) {
      return Error("expected a positive integer or a list", "--moe-layer-freq", Quote(text));
    }
    if (*every == 1) {
      moe["every"] = 1;
      return Status::Ok();
    }
    // gpt_layer_specs.py: [1 if i % N == 0 else 0 for i in range(num_layers)].
    if (layers > kMaxLayerPatternLength) {
      return Error(
          fmt::format("more layers than dtsim lists MoE layers for ({})", kMaxLayerPatternLength),
          "--num-layers", std::to_string(layers));
    }
    flags.resize(static_cast<size_t>(layers));
    for (int64_t i = 0; i < layers; ++i) flags[static_cast<size_t>(i)] = i % *every == 0 ? 1 : 0;
  } else {
    flags = std::get<std::vector<int64_t>>(pattern);
  }
  if (std::ssize(flags) != layers) {
    return Error(
        fmt::format("expected one flag a layer: {} layers, {} flags", layers, flags.size()),
        "--moe-layer-freq", Quote(text));
  }
  if (std::any_of(flags.begin(), flags.end(),
                  [](int64_t flag) { return flag != 0 && flag != 1; })) {
    return Error("expected flags of 0 (dense MLP) or 1 (MoE)", "--moe-layer-freq", Quote(text));
  }
  if (std::find(flags.begin(), flags.end(), 1) == flags.end()) {
    return Error("no layer is MoE", "--moe-layer-freq", Quote(text));
  }
  // Where it can, the plan says it as first_dense_layers and every (from 1).
  if (const std::optional<EveryPlacement> placement = PlacementAsEvery(flags)) {
    moe["first_dense_layers"] = placement->first_dense;
    moe["every"] = placement->every;
  } else {
    moe["layers"] = flags;
  }
  return Status::Ok();
}

Status ReadMegatronWindows(std::string_view window_size, const std::optional<std::string>& skip,
                           Json& model) {
  std::string text(window_size);
  std::erase_if(text, [](char c) { return c == '(' || c == ')' || c == ' '; });
  const auto parse = [](std::string_view part, int64_t& out) {
    const auto [end, code] = std::from_chars(part.data(), part.data() + part.size(), out);
    return code == std::errc() && end == part.data() + part.size();
  };
  const size_t comma = text.find(',');
  int64_t left = 0;
  int64_t right = 0;
  if (comma == std::string::npos || !parse(std::string_view(text).substr(0, comma), left) ||
      !parse(std::string_view(text).substr(comma + 1), right)) {
    return Error("expected LEFT,RIGHT (Megatron-Core's window_size, e.g. 4096,0)", "--window-size",
                 Quote(std::string(window_size)));
  }
  if (left == -1) return Status::Ok();  // unbounded on the left: full attention
  if (left < 1 || right != 0) {
    return Error("dtsim models causal windows: LEFT of at least 1 key before the query, RIGHT 0",
                 "--window-size", Quote(std::string(window_size)));
  }
  model["sliding_window"] = left;
  if (!skip) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const auto pattern, EvalLayerPattern(*skip, "--window-attn-skip-freq"));
  if (const auto* every = std::get_if<int64_t>(&pattern)) {
    if (*every < 2) {
      return Error("expected at least 2 (every N-th layer keeps full attention)",
                   "--window-attn-skip-freq", Quote(*skip));
    }
    model["sliding_window_pattern"] = *every;
  } else {
    model["sliding_window_pattern"] = std::get<std::vector<int64_t>>(pattern);
  }
  return Status::Ok();
}

}  // namespace dtsim::strategies
