#include "strategies/nemo_import.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "network/cluster.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

// Deeper than any real chain of references; a circular one ends here.
constexpr int kMaxInterpolationDepth = 16;
// What one key's interpolations may expand to: a real key names a few others. Without a bound,
// a few lines that each name the next one many times expand exponentially.
constexpr int kMaxReferences = 10'000;
constexpr size_t kMaxResolvedBytes = size_t{1} << 20;
// 2^53: below it a double holds every integer, so a resolver's integral result is exact.
constexpr double kExactIntegers = 9007199254740992.0;

// Scalars as OmegaConf's YAML loader types them (PyYAML's YAML 1.1 booleans; integers in
// decimal; numbers as Python's float() reads them, `1e-5` and `.0333` included).
std::optional<bool> BoolOf(std::string_view text) {
  static const std::set<std::string_view> kTrue = {"true", "True", "TRUE", "yes", "Yes",
                                                   "YES",  "on",   "On",   "ON"};
  static const std::set<std::string_view> kFalse = {"false", "False", "FALSE", "no", "No",
                                                    "NO",    "off",   "Off",   "OFF"};
  if (kTrue.contains(text)) return true;
  if (kFalse.contains(text)) return false;
  return std::nullopt;
}

// Not inlined: inlined into NemoConfig::Int and Number, GCC 12 at -O2 warns that the string's
// first character may be uninitialized (-Wmaybe-uninitialized, a false positive that comes and
// goes as the unity batches change; a -Werror build fails on it).
[[gnu::noinline]] std::optional<int64_t> IntOf(std::string_view text) {
  if (text.starts_with('+')) text.remove_prefix(1);
  int64_t value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || code != std::errc() || end != text.data() + text.size()) return {};
  return value;
}

[[gnu::noinline]] std::optional<double> NumberOf(std::string_view text) {  // as IntOf
  if (text.starts_with('+')) text.remove_prefix(1);
  double value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || code != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value)) {
    return {};
  }
  return value;
}

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.', start)) {
    parts.emplace_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.emplace_back(path.substr(start));
  return parts;
}

std::string ParentOf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string() : std::string(path.substr(0, dot));
}

// The text of `${` … `}` starting at `open` (at the `$`): the index one past its `}`, nested
// interpolations skipped; npos when it is not closed.
size_t InterpolationEnd(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text.compare(i, 2, "${") == 0) {
      ++depth;
      ++i;
    } else if (text[i] == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// A resolver's arguments split at the commas outside nested interpolations, trimmed.
std::vector<std::string_view> Arguments(std::string_view text) {
  std::vector<std::string_view> args;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "${") == 0) ++depth;
    if (text[i] == '}') --depth;
    if (text[i] == ',' && depth == 0) {
      args.push_back(Trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  args.push_back(Trim(text.substr(start)));
  return args;
}

// The config, its interpolations resolved where a key is read. Every key path read is
// remembered, so that the others can be listed.
class NemoConfig {
 public:
  NemoConfig(const Json& root, const std::string& file) : root_(root), file_(file) {}

  Error Fail(std::string message, std::string path, std::string value = {}) const {
    return Error(std::move(message), std::move(path), std::move(value)).InFile(file_);
  }

  // Marks a key read whose value changes nothing dtsim models (a null rampup, fp8 knobs
  // with fp8 off).
  void Read(std::string_view path) { read_.emplace(path); }

  // The scalar at `path` as text, interpolations resolved; nothing when absent or null.
  Expected<std::optional<std::string>> Text(std::string_view path) {
    const Json* value = Find(path);
    if (value == nullptr || value->is_null()) {
      if (value != nullptr) Read(path);
      return std::optional<std::string>();
    }
    Read(path);
    if (!value->is_string()) return Fail("expected a single value", std::string(path));
    references_ = 0;
    return Resolve(value->get<std::string>(), ParentOf(path), std::string(path), 0);
  }
  Expected<std::optional<int64_t>> Int(std::string_view path, int64_t min = 1) {
    DTSIM_ASSIGN_OR_RETURN(std::optional<std::string> text, Text(path));
    if (!text) return std::optional<int64_t>();
    // Moved out of the optional: GCC 12 at -O2 warns (-Wmaybe-uninitialized, a false positive)
    // on the optional's payload read through IntOf's inlined string_view.
    const std::string given = std::move(*text);
    const std::optional<int64_t> value = IntOf(given);
    if (!value || *value < min) {
      return Fail(min == 1 ? "expected a positive integer" : "expected a non-negative integer",
                  std::string(path), given);
    }
    return value;
  }
  Expected<std::optional<double>> Number(std::string_view path) {
    DTSIM_ASSIGN_OR_RETURN(std::optional<std::string> text, Text(path));
    if (!text) return std::optional<double>();
    const std::string given = std::move(*text);  // as in Int: GCC 12's false positive
    const std::optional<double> value = NumberOf(given);
    if (!value || *value < 0) {
      return Fail("expected a non-negative number", std::string(path), given);
    }
    return value;
  }
  Expected<std::optional<bool>> Bool(std::string_view path) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> text, Text(path));
    if (!text) return std::optional<bool>();
    const std::optional<bool> value = BoolOf(*text);
    if (!value) return Fail("expected true or false", std::string(path), *text);
    return value;
  }

  // The value at `path` as written (a list as its items), read; nothing when absent or null.
  std::optional<std::string> Shown(std::string_view path) {
    const Json* value = Find(path);
    if (value != nullptr) Read(path);
    if (value == nullptr || value->is_null()) return std::nullopt;
    return Render(*value);
  }

  // The keys not read, each "path: value" (a list as its items, or their count when long).
  std::vector<std::string> Unread() const {
    std::vector<std::string> unread;
    ListUnread(root_, "", unread);
    return unread;
  }

 private:
  const Json* Find(std::string_view path) const {
    const Json* node = &root_;
    for (const std::string& part : Split(path)) {
      if (!node->is_object()) return nullptr;
      const auto it = node->find(part);
      if (it == node->end()) return nullptr;
      node = &*it;
    }
    return node;
  }

  // `text` with each `${…}` replaced by its value; nothing when the whole text is one
  // interpolation of a null value. `parent`: the path of the mapping the text's key is in.
  Expected<std::optional<std::string>> Resolve(std::string_view text, const std::string& parent,
                                               const std::string& key, int depth) {
    if (depth > kMaxInterpolationDepth) {
      return Fail(fmt::format("interpolations nested more than {} deep (a circular reference?)",
                              kMaxInterpolationDepth),
                  key, std::string(text));
    }
    std::string out;
    size_t done = 0;
    for (size_t open = text.find("${"); open != std::string_view::npos;
         open = text.find("${", done)) {
      const size_t end = InterpolationEnd(text, open);
      if (end == std::string_view::npos) return Fail("an unclosed ${", key, std::string(text));
      DTSIM_ASSIGN_OR_RETURN(
          const std::optional<std::string> value,
          Evaluate(text.substr(open + 2, end - open - 3), parent, key, depth + 1));
      if (open == 0 && end == text.size()) return value;  // the whole text: null stays null
      out.append(text.substr(done, open - done));
      out.append(value.value_or("None"));  // as OmegaConf writes None into a string
      if (out.size() > kMaxResolvedBytes) {
        return Fail(fmt::format("interpolations expand past {} bytes", kMaxResolvedBytes), key);
      }
      done = end;
    }
    out.append(text.substr(done));
    return std::optional<std::string>(std::move(out));
  }

  // The inside of one `${…}`: a resolver call (`name:args`) or a key's path.
  Expected<std::optional<std::string>> Evaluate(std::string_view inside, const std::string& parent,
                                                const std::string& key, int depth) {
    if (++references_ > kMaxReferences) {
      return Fail(fmt::format("interpolations expand past {} references", kMaxReferences), key);
    }
    const size_t colon = inside.find(':');
    if (colon != std::string_view::npos && inside.find("${") > colon) {
      std::vector<std::string> args;
      for (std::string_view arg : Arguments(inside.substr(colon + 1))) {
        DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> value,
                               Resolve(arg, parent, key, depth + 1));
        args.push_back(value.value_or("None"));
      }
      DTSIM_ASSIGN_OR_RETURN(std::string value, Call(inside.substr(0, colon), args, key));
      return std::optional<std::string>(std::move(value));
    }
    std::string path = Absolute(inside, parent);
    const Json* node = Find(path);
    if (node == nullptr && path.starts_with("training.")) {  // the launcher's config root
      path.erase(0, std::string_view("training.").size());
      node = Find(path);
    }
    if (node == nullptr) {
      return Fail(fmt::format("${{{}}} names no key of this file", inside), key);
    }
    if (node->is_null()) return std::optional<std::string>();
    if (!node->is_string()) {
      return Fail(fmt::format("${{{}}} names a section, not a value", inside), key);
    }
    return Resolve(node->get<std::string>(), ParentOf(path), key, depth + 1);
  }

  // `.x` is beside the key, `..x` one level up; anything else is from the top.
  static std::string Absolute(std::string_view inside, const std::string& parent) {
    if (!inside.starts_with('.')) return std::string(inside);
    std::string base = parent;
    inside.remove_prefix(1);
    while (inside.starts_with('.')) {
      base = ParentOf(base);
      inside.remove_prefix(1);
    }
    return base.empty() ? std::string(inside) : fmt::format("{}.{}", base, inside);
  }

  // NeMo's resolvers (nemo.core's multiply; the launcher's divide_ceil and divide_floor).
  Expected<std::string> Call(std::string_view name, const std::vector<std::string>& args,
                             const std::string& key) const {
    if (name != "multiply" && name != "divide_ceil" && name != "divide_floor") {
      return Fail("dtsim resolves multiply, divide_ceil and divide_floor", key,
                  fmt::format("${{{}:…}}", name));
    }
    const std::optional<double> a = args.size() == 2 ? NumberOf(args[0]) : std::nullopt;
    const std::optional<double> b = args.size() == 2 ? NumberOf(args[1]) : std::nullopt;
    if (!a || !b || (name != "multiply" && *b == 0)) {
      return Fail(fmt::format("{} takes two numbers{}", name,
                              name == "multiply" ? "" : ", the second not 0"),
                  key, fmt::format("{}", fmt::join(args, ", ")));
    }
    const std::optional<int64_t> ia = IntOf(args[0]);
    const std::optional<int64_t> ib = IntOf(args[1]);
    double result = name == "multiply" ? *a * *b : *a / *b;
    if (name == "divide_ceil") result = std::ceil(result);
    if (name == "divide_floor") result = std::floor(result);
    const bool integral = name != "multiply" || (ia && ib);
    if (integral && std::abs(result) < kExactIntegers) {
      return fmt::format("{}", static_cast<int64_t>(result));
    }
    if (integral) return Fail("the result is past 2^53", key);
    return fmt::format("{}", result);
  }

  void ListUnread(const Json& node, const std::string& path,
                  std::vector<std::string>& unread) const {
    if (read_.contains(path)) return;
    if (node.is_object() && !node.empty()) {
      for (const auto& [key, value] : node.items()) {
        ListUnread(value, path.empty() ? key : fmt::format("{}.{}", path, key), unread);
      }
      return;
    }
    unread.push_back(fmt::format("{}: {}", path, Render(node)));
  }

  // A value as YAML's flow style writes it; a long list or mapping as its size.
  static std::string Render(const Json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_null()) return "null";
    constexpr size_t kShown = 4;
    std::vector<std::string> items;
    if (value.is_object()) {
      if (value.size() > kShown) return fmt::format("{{{} keys}}", value.size());
      for (const auto& [key, item] : value.items()) {
        items.push_back(fmt::format("{}: {}", key, Render(item)));
      }
      return fmt::format("{{{}}}", fmt::join(items, ", "));
    }
    if (value.size() > kShown) return fmt::format("[{} items]", value.size());
    for (const Json& item : value) items.push_back(Render(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }

  const Json& root_;
  const std::string& file_;
  std::set<std::string, std::less<>> read_;
  int references_ = 0;  // `${…}` evaluated for the key being read
};

// The flags the config stands for, each with the key it came from (for errors and for the
// flags ImportMegatronArguments lists), and what is approximated.
struct Translation {
  std::vector<std::string> args;
  std::map<std::string, std::string, std::less<>> key_of_flag;  // "num-layers" → model.num_layers
  std::vector<std::string> approximated;

  void Add(const std::string& flag, const std::string& key, std::optional<std::string> value = {}) {
    args.push_back("--" + flag);
    if (value) args.push_back(*std::move(value));
    key_of_flag.emplace(flag, key);
  }
  Status AddInt(NemoConfig& config, const std::string& flag, const std::string& key) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, config.Int(key));
    if (value) Add(flag, key, std::to_string(*value));
    return Status::Ok();
  }
  Status AddSwitch(NemoConfig& config, const std::string& flag, const std::string& key, bool when) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> value, config.Bool(key));
    if (value == when) Add(flag, key);
    return Status::Ok();
  }
};

// trainer.num_nodes × trainer.devices GPUs on the target's cluster; trainer.precision.
Status Trainer(NemoConfig& config, const ImportTarget& target, Json& cluster, Translation& out) {
  cluster = target.cluster;
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> nodes, config.Int("trainer.num_nodes"));
  if (cluster.contains("nodes") && nodes && cluster["nodes"] != *nodes) {
    return config.Fail(fmt::format("the cluster is given {} nodes", cluster["nodes"].dump()),
                       "trainer.num_nodes", std::to_string(*nodes));
  }
  if (!cluster.contains("nodes")) {
    if (!nodes) {
      return config.Fail("required: the job's size (or give the nodes)", "trainer.num_nodes");
    }
    cluster["nodes"] = *nodes;
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> devices, config.Int("trainer.devices"));
  Json network = cluster;
  network.erase("gpu");
  DTSIM_ASSIGN_OR_RETURN(const network::ClusterSpec spec,
                         network::ClusterFromJson(network, "cluster"));
  if (devices && *devices != spec.gpus_per_node) {
    return config.Fail(fmt::format("the cluster has {} GPUs a node", spec.gpus_per_node),
                       "trainer.devices", std::to_string(*devices));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> accelerator,
                         config.Text("trainer.accelerator"));
  if (accelerator && *accelerator != "gpu" && *accelerator != "auto") {
    return config.Fail("dtsim simulates GPUs", "trainer.accelerator", *accelerator);
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> accumulate,
                         config.Int("trainer.accumulate_grad_batches"));
  if (accumulate && *accumulate != 1) {
    return config.Fail("NeMo's Megatron models take 1 (the global batch sets accumulation)",
                       "trainer.accumulate_grad_batches", std::to_string(*accumulate));
  }
  // NeMo's default is 16 (FP16 mixed precision), spelt 16, 16-mixed, bf16, bf16-mixed, 32, ...
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> precision,
                         config.Text("trainer.precision"));
  const std::string given = precision.value_or("16");
  if (given.starts_with("bf16")) {
    out.Add("bf16", "trainer.precision");
  } else if (given == "16" || given.starts_with("16-")) {
    out.Add("fp16", "trainer.precision");
  } else if (given != "32" && !given.starts_with("32-")) {
    return config.Fail("expected 16, bf16 or 32 (or their -mixed forms)", "trainer.precision",
                       given);
  }
  // The run's length: max_steps iterations of the global batch (docs/time_to_train.md).
  return out.AddInt(config, "train-iters", "trainer.max_steps");
}

// The model's shape and its layers' kinds; the vocabulary from the tokenizer.
Status Shape(NemoConfig& config, const ImportTarget& target, Translation& out) {
  const std::pair<const char*, const char*> sizes[] = {
      {"num-layers", "model.num_layers"},
      {"hidden-size", "model.hidden_size"},
      {"ffn-hidden-size", "model.ffn_hidden_size"},
      {"num-attention-heads", "model.num_attention_heads"},
      {"num-query-groups", "model.num_query_groups"},
      {"kv-channels", "model.kv_channels"},
      {"seq-length", "model.encoder_seq_length"},
      {"max-position-embeddings", "model.max_position_embeddings"},
      {"make-vocab-size-divisible-by", "model.make_vocab_size_divisible_by"}};
  for (const auto& [flag, key] : sizes) DTSIM_RETURN_IF_ERROR(out.AddInt(config, flag, key));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> sequence,
                         config.Int("model.encoder_seq_length"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> data_sequence,
                         config.Int("model.data.seq_length"));
  if (sequence && data_sequence && *sequence != *data_sequence) {
    return config.Fail(fmt::format("model.encoder_seq_length is {}", *sequence),
                       "model.data.seq_length", std::to_string(*data_sequence));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> norm, config.Text("model.normalization"));
  if (norm == "rmsnorm") out.Add("normalization", "model.normalization", "RMSNorm");
  if (norm == "layernorm1p") {
    out.approximated.push_back("model.normalization: layernorm1p (priced as layernorm)");
  }
  if (norm && *norm != "rmsnorm" && *norm != "layernorm" && *norm != "layernorm1p") {
    return config.Fail("expected layernorm, layernorm1p or rmsnorm", "model.normalization", *norm);
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> activation,
                         config.Text("model.activation"));
  const std::string act = activation.value_or("gelu");
  if (act == "swiglu" || act == "fast-swiglu") {
    out.Add("swiglu", "model.activation");
  } else if (act == "geglu" || act == "fast-geglu" || act == "reglu" || act == "fast-reglu") {
    out.Add("swiglu", "model.activation");
    out.approximated.push_back(
        fmt::format("model.activation: {} (priced as swiglu, the same gated MLP)", act));
  } else if (act == "squared-relu") {
    out.Add("squared-relu", "model.activation");
  } else if (act != "gelu") {
    return config.Fail("expected gelu, swiglu, geglu, reglu (or fast-…) or squared-relu",
                       "model.activation", act);
  }
  DTSIM_RETURN_IF_ERROR(out.AddSwitch(config, "disable-bias-linear", "model.bias", false));
  DTSIM_RETURN_IF_ERROR(out.AddSwitch(config, "untie-embeddings-and-output-weights",
                                      "model.share_embeddings_and_output_weights", false));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> position,
                         config.Text("model.position_embedding_type"));
  if (position == "rope" || position == "learned_absolute") {
    out.Add("position-embedding-type", "model.position_embedding_type", *position);
  } else if (position) {
    out.approximated.push_back(
        fmt::format("model.position_embedding_type: {} (priced as learned_absolute)", *position));
  }
  // NeMo's defaults: 0.1 each.
  for (const char* kind : {"hidden", "attention"}) {
    const std::string key = fmt::format("model.{}_dropout", kind);
    DTSIM_ASSIGN_OR_RETURN(const std::optional<double> p, config.Number(key));
    out.Add(fmt::format("{}-dropout", kind), key, fmt::format("{}", p.value_or(0.1)));
  }
  if (target.vocab) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> library,
                         config.Text("model.tokenizer.library"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> type,
                         config.Text("model.tokenizer.type"));
  if (library != "megatron" || type != "GPT2BPETokenizer") {
    return config.Fail(
        "the vocabulary is the tokenizer's, which the config only names: give its size "
        "(dtsim import nemo … --vocab N)",
        "model.tokenizer", fmt::format("{} {}", library.value_or("null"), type.value_or("null")));
  }
  out.Add("vocab-size", "model.tokenizer.type", "50257");  // GPT-2's BPE
  return Status::Ok();
}

// Batch, recompute, FP8 and attention: the training section's flags.
Status Training(NemoConfig& config, Translation& out) {
  DTSIM_RETURN_IF_ERROR(out.AddInt(config, "micro-batch-size", "model.micro_batch_size"));
  DTSIM_RETURN_IF_ERROR(out.AddInt(config, "global-batch-size", "model.global_batch_size"));
  if (const std::optional<std::string> rampup = config.Shown("model.rampup_batch_size")) {
    out.approximated.push_back(
        fmt::format("model.rampup_batch_size: {} (dtsim simulates the full batch)", *rampup));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> granularity,
                         config.Text("model.activations_checkpoint_granularity"));
  if (granularity) {
    out.Add("recompute-granularity", "model.activations_checkpoint_granularity", *granularity);
  }
  if (granularity == "full") {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> method,
                           config.Text("model.activations_checkpoint_method"));
    if (method) out.Add("recompute-method", "model.activations_checkpoint_method", *method);
    DTSIM_RETURN_IF_ERROR(
        out.AddInt(config, "recompute-num-layers", "model.activations_checkpoint_num_layers"));
  } else {  // NeMo reads them only for full recompute
    config.Read("model.activations_checkpoint_method");
    config.Read("model.activations_checkpoint_num_layers");
  }
  // Transformer Engine's layer offloading (NeMo's model.cpu_offloading over
  // cpu_offloading_num_layers layers; weights are not offloaded by it any more).
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> offload, config.Bool("model.cpu_offloading"));
  if (offload.value_or(false)) {
    DTSIM_RETURN_IF_ERROR(
        out.AddInt(config, "cpu-offloading-num-layers", "model.cpu_offloading_num_layers"));
  } else {
    config.Read("model.cpu_offloading_num_layers");
  }
  for (const char* key : {"model.num_micro_batches_with_partial_activation_checkpoints",
                          "model.activations_checkpoint_layers_per_pipeline"}) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, config.Int(key, 0));
    if (value.value_or(0) != 0) {
      out.approximated.push_back(
          fmt::format("{}: {} (dtsim recomputes every micro-batch alike)", key, *value));
    }
  }
  // Transformer Engine picks a fused (flash) attention kernel; without it, NeMo's own
  // attention is unfused unless use_flash_attention.
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> te, config.Bool("model.transformer_engine"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> flash, config.Bool("model.use_flash_attention"));
  if (!te.value_or(false) && !flash.value_or(false)) {
    out.Add("attention-backend", "model.use_flash_attention", "unfused");
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> fp8, config.Bool("model.fp8"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> e4m3, config.Bool("model.fp8_e4m3"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> hybrid, config.Bool("model.fp8_hybrid"));
  if (fp8.value_or(false)) {
    if (!e4m3.value_or(false) && !hybrid.value_or(false)) {
      return config.Fail("fp8 needs fp8_e4m3 or fp8_hybrid", "model.fp8", "true");
    }
    out.Add("fp8-format", "model.fp8", e4m3.value_or(false) ? "e4m3" : "hybrid");
    out.Add("fp8-recipe", "model.fp8", "delayed");  // NeMo 1.x scales by the amax history
  } else {                                          // the scaling knobs act only with fp8 on
    for (const char* knob : {"margin", "interval", "amax_history_len", "amax_compute_algo"}) {
      config.Read(fmt::format("model.fp8_{}", knob));
    }
  }
  return Status::Ok();
}

// TP/SP/PP/VP/CP/EP, the distributed optimizer, the overlap of the gradient reduction.
Status Parallelism(NemoConfig& config, Translation& out) {
  const std::pair<const char*, const char*> sizes[] = {
      {"tensor-model-parallel-size", "model.tensor_model_parallel_size"},
      {"pipeline-model-parallel-size", "model.pipeline_model_parallel_size"},
      {"virtual-pipeline-model-parallel-size", "model.virtual_pipeline_model_parallel_size"},
      {"context-parallel-size", "model.context_parallel_size"},
      {"expert-model-parallel-size", "model.expert_model_parallel_size"},
      {"moe-router-topk", "model.moe_router_topk"}};
  for (const auto& [flag, key] : sizes) DTSIM_RETURN_IF_ERROR(out.AddInt(config, flag, key));
  DTSIM_RETURN_IF_ERROR(
      out.AddSwitch(config, "sequence-parallel", "model.sequence_parallel", true));
  DTSIM_RETURN_IF_ERROR(
      out.AddSwitch(config, "use-tp-pp-dp-mapping", "model.use_tp_pp_dp_mapping", true));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> experts, config.Int("model.num_moe_experts"));
  if (experts.value_or(1) > 1) {
    out.Add("num-experts", "model.num_moe_experts", std::to_string(*experts));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<double> capacity,
                         config.Number("model.moe_expert_capacity_factor"));
  if (capacity) {  // without one, Megatron-Core drops no token
    out.Add("moe-expert-capacity-factor", "model.moe_expert_capacity_factor",
            fmt::format("{}", *capacity));
  }
  config.Read("model.mcore_gpt");  // Megatron-Core's GPT model or NeMo's own: priced alike
  DTSIM_ASSIGN_OR_RETURN(const std::optional<std::string> optimizer,
                         config.Text("model.optim.name"));
  const bool distributed =
      optimizer == "distributed_fused_adam" || optimizer == "mcore_distributed_optim";
  if (distributed) out.Add("use-distributed-optimizer", "model.optim.name");
  if (optimizer && !distributed && *optimizer != "fused_adam" && *optimizer != "adam" &&
      *optimizer != "adamw") {
    out.approximated.push_back(
        fmt::format("model.optim.name: {} (dtsim's memory holds Adam's states)", *optimizer));
  }
  // Apex's distributed Adam overlaps the reduction unless told not to; NeMo's others do not.
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> overlap,
                         config.Bool("model.optim.overlap_grad_sync"));
  if (overlap.value_or(distributed)) {
    out.Add("overlap-grad-reduce", "model.optim.overlap_grad_sync");
  }
  return Status::Ok();
}

// Megatron's flags in a message or listing, named by the keys they came from.
std::string InKeys(std::string text, const Translation& translation) {
  for (const auto& [flag, key] : translation.key_of_flag) {
    const std::string spelt = "--" + flag;
    for (size_t at = text.find(spelt); at != std::string::npos; at = text.find(spelt, at)) {
      const size_t end = at + spelt.size();
      if (end < text.size() && text[end] != ' ' && text[end] != ':' && text[end] != ')') {
        at = end;
        continue;
      }
      text.replace(at, spelt.size(), key);
      at += key.size();
    }
  }
  return text;
}

}  // namespace

Expected<ImportedConfig> ImportNemoConfig(const Json& yaml, const std::string& file,
                                          const ImportTarget& target) {
  if (!yaml.is_object() || !yaml.contains("model") || !yaml.contains("trainer")) {
    return Error("expected a NeMo training config: a mapping with trainer: and model:")
        .InFile(file);
  }
  NemoConfig config(yaml, file);
  Translation translation;
  ImportTarget megatron_target = target;
  DTSIM_RETURN_IF_ERROR(Trainer(config, target, megatron_target.cluster, translation));
  DTSIM_RETURN_IF_ERROR(Shape(config, target, translation));
  DTSIM_RETURN_IF_ERROR(Training(config, translation));
  DTSIM_RETURN_IF_ERROR(Parallelism(config, translation));
  Expected<ImportedConfig> imported = ImportMegatronArguments(translation.args, megatron_target);
  if (!imported.ok()) {
    const Error& error = imported.error();
    return Error(InKeys(error.message(), translation), InKeys(error.location(), translation),
                 error.value())
        .InFile(file);
  }
  ImportedConfig result = *std::move(imported);
  for (std::string& listed : result.not_modelled) listed = InKeys(std::move(listed), translation);
  result.not_modelled.insert(result.not_modelled.end(), translation.approximated.begin(),
                             translation.approximated.end());
  const std::vector<std::string> unread = config.Unread();
  result.not_modelled.insert(result.not_modelled.end(), unread.begin(), unread.end());
  return result;
}

}  // namespace dtsim::strategies
