#include "traces/op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "sim/base/json_reader.h"
#include "traces/torch_dtype.h"

namespace dtsim::traces {
namespace {

constexpr std::string_view kNoLaunch = "GPU op whose launching call is not in the trace";
constexpr std::string_view kNoOp = "GPU op launched outside any framework op";
constexpr std::string_view kNoShapes = "op instance recorded without input shapes";
constexpr std::string_view kBadShapes = "op instance with unreadable, zero-sized or untyped inputs";
constexpr std::string_view kBadGemm = "gemm whose input shapes do not multiply";

// One tensor input: its index among the op's inputs, dimensions and dtype.
struct TensorInput {
  size_t index = 0;
  std::vector<int64_t> dims;
  DType dtype = DType::kFp32;
};

// The tensor inputs of an op from the trace's "Input Dims" and "Input type" texts; nothing when
// they cannot be read or an input tensor has a zero dimension.
std::optional<std::vector<TensorInput>> TensorInputs(const OpShapes& shapes) {
  if (FindJsonNestingPastLimit(shapes.input_dims, kMaxJsonDepth) ||
      FindJsonNestingPastLimit(shapes.input_types, kMaxJsonDepth)) {
    return std::nullopt;
  }
  const Json dims = Json::parse(shapes.input_dims, nullptr, /*allow_exceptions=*/false);
  const Json types = Json::parse(shapes.input_types, nullptr, /*allow_exceptions=*/false);
  if (!dims.is_array() || !types.is_array()) return std::nullopt;
  std::vector<TensorInput> inputs;
  for (size_t i = 0; i < dims.size() && i < types.size(); ++i) {
    if (!dims[i].is_array() || dims[i].empty() || !types[i].is_string()) continue;
    const std::optional<TorchDtype> torch_type = LookUpTorchDtype(types[i].get<std::string>());
    const std::optional<DType> dtype = torch_type ? torch_type->dtype : std::nullopt;
    if (!dtype) continue;  // a list of tensors, a scalar list: not one tensor
    TensorInput input{i, {}, *dtype};
    for (const Json& d : dims[i]) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0) return std::nullopt;
      input.dims.push_back(d.get<int64_t>());
    }
    inputs.push_back(std::move(input));
  }
  if (inputs.empty()) return std::nullopt;
  return inputs;
}

// aten::mm(A[m,k], B[k,n]); addmm(bias, A, B); bmm(A[b,m,k], B[b,k,n]); baddbmm(bias, A, B).
std::optional<OpSignature> GemmSignature(std::string_view name,
                                         const std::vector<TensorInput>& inputs) {
  const bool batched = name == "aten::bmm" || name == "aten::baddbmm";
  const size_t first = (name == "aten::addmm" || name == "aten::baddbmm") ? 1 : 0;
  if (inputs.size() < first + 2) return std::nullopt;
  const std::vector<int64_t>& a = inputs[first].dims;
  const std::vector<int64_t>& b = inputs[first + 1].dims;
  const size_t rank = batched ? 3 : 2;
  if (a.size() != rank || b.size() != rank || a[rank - 1] != b[rank - 2]) return std::nullopt;
  if (batched && a[0] != b[0]) return std::nullopt;
  OpSignature signature{"gemm", inputs[first].dtype, {}};
  signature.SetDim("m", a[rank - 2]);
  signature.SetDim("k", a[rank - 1]);
  signature.SetDim("n", b[rank - 1]);
  if (batched && a[0] > 1) signature.SetDim("batch", a[0]);
  return signature;
}

bool IsGemm(std::string_view name) {
  return name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" ||
         name == "aten::baddbmm";
}

OpSignature GenericSignature(std::string_view name, const std::vector<TensorInput>& inputs) {
  OpSignature signature{std::string(name), inputs.front().dtype, {}};
  int64_t elements = 1;
  for (const int64_t d : inputs.front().dims) elements *= d;
  signature.SetDim("elements", elements);
  for (const TensorInput& input : inputs) {
    for (size_t j = 0; j < input.dims.size(); ++j) {
      signature.SetDim(fmt::format("in{}_d{}", input.index, j), input.dims[j]);
    }
  }
  return signature;
}

// Per thread, the framework ops sorted by start (outer before inner at equal starts).
std::unordered_map<uint32_t, std::vector<uint32_t>> OpsByThread(const Trace& trace) {
  std::unordered_map<uint32_t, std::vector<uint32_t>> ops;
  for (uint32_t i = 0; i < trace.host.size(); ++i) {
    if (trace.host[i].kind == HostEventKind::kOp) ops[trace.host[i].thread].push_back(i);
  }
  for (auto& [thread, list] : ops) {
    std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      const HostEvent& x = trace.host[a];
      const HostEvent& y = trace.host[b];
      return x.start != y.start ? x.start < y.start : x.duration > y.duration;
    });
  }
  return ops;
}

// For each (time, query) of one thread, sorted by time, the innermost op of `ops` (sorted as
// above) open at that time: one sweep with a stack of the open ops, since ops nest.
void AssignInnermostOps(const Trace& trace, const std::vector<uint32_t>& ops,
                        const std::vector<std::pair<TimeNs, uint32_t>>& queries,
                        std::vector<uint32_t>& owner_of_query) {
  std::vector<uint32_t> open;
  size_t next = 0;
  for (const auto& [time, query] : queries) {
    for (; next < ops.size() && trace.host[ops[next]].start <= time; ++next) {
      while (!open.empty() && trace.host[open.back()].end() <= trace.host[ops[next]].start) {
        open.pop_back();
      }
      open.push_back(ops[next]);
    }
    while (!open.empty() && trace.host[open.back()].end() <= time) open.pop_back();
    owner_of_query[query] = open.empty() ? kNone : open.back();
  }
}

DurationNs Median(std::vector<DurationNs>& samples) {
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  if (samples.size() % 2 == 1) return samples[mid];
  return DurationNs((samples[mid - 1].ns() + samples[mid].ns()) / 2);
}

}  // namespace

Expected<OpProfile> BuildOpProfile(const Trace& trace, std::string gpu) {
  OpProfileStats stats;
  std::unordered_map<int64_t, uint32_t> launches;  // correlation → API call
  for (uint32_t i = 0; i < trace.host.size(); ++i) {
    const HostEvent& event = trace.host[i];
    if ((event.kind == HostEventKind::kRuntime || event.kind == HostEventKind::kDriver) &&
        event.correlation >= 0) {
      launches.emplace(event.correlation, i);
    }
  }
  // The launching call of every GPU op, grouped by thread, then the op open at each call.
  std::unordered_map<uint32_t, std::vector<std::pair<TimeNs, uint32_t>>> calls_by_thread;
  for (uint32_t d = 0; d < trace.device.size(); ++d) {
    const DeviceEvent& op = trace.device[d];
    if (op.collective != kNone) continue;
    ++stats.gpu_ops;
    const auto launch = launches.find(op.correlation);
    if (launch == launches.end()) {
      ++stats.left_out[std::string(kNoLaunch)];
      continue;
    }
    const HostEvent& call = trace.host[launch->second];
    calls_by_thread[call.thread].emplace_back(call.start, d);
  }
  const auto ops_by_thread = OpsByThread(trace);
  std::vector<uint32_t> owner(trace.device.size(), kNone);
  for (auto& [thread, calls] : calls_by_thread) {
    const auto ops = ops_by_thread.find(thread);
    if (ops == ops_by_thread.end()) continue;
    std::sort(calls.begin(), calls.end());
    AssignInnermostOps(trace, ops->second, calls, owner);
  }
  std::map<uint32_t, DurationNs> instance_time;  // framework op → its GPU time, in op order
  for (const auto& [thread, calls] : calls_by_thread) {
    for (const auto& [time, d] : calls) {
      if (owner[d] == kNone) {
        ++stats.left_out[std::string(kNoOp)];
        continue;
      }
      ++stats.attributed_gpu_ops;
      instance_time[owner[d]] += trace.device[d].duration;
    }
  }
  std::map<std::string, std::pair<OpSignature, std::vector<DurationNs>>> samples;
  for (const auto& [op_index, time] : instance_time) {
    ++stats.op_instances;
    const HostEvent& op = trace.host[op_index];
    const std::string_view name = trace.Name(op.name);
    if (op.shapes == kNone) {
      ++stats.left_out[std::string(kNoShapes)];
      continue;
    }
    const std::optional<std::vector<TensorInput>> inputs = TensorInputs(trace.shapes[op.shapes]);
    if (!inputs) {
      ++stats.left_out[std::string(kBadShapes)];
      continue;
    }
    std::optional<OpSignature> signature =
        IsGemm(name) ? GemmSignature(name, *inputs) : GenericSignature(name, *inputs);
    if (!signature) {
      ++stats.left_out[std::string(kBadGemm)];
      continue;
    }
    ++stats.keyed_instances;
    auto& entry = samples[signature->Key()];
    if (entry.second.empty()) entry.first = std::move(*signature);
    entry.second.push_back(time);
  }
  std::vector<MeasuredOp> ops;
  for (auto& [key, entry] : samples) {
    auto& [signature, times] = entry;
    int64_t total = 0;
    for (const DurationNs t : times) total += t.ns();
    const auto count = static_cast<int64_t>(times.size());
    MeasuredOp measured{.signature = signature,
                        .duration = DurationNs(total / count),
                        .samples = count,
                        .median = Median(times),
                        .min = times.front()};              // sorted by Median
    if (measured.duration <= DurationNs::Zero()) continue;  // zero-length ops price nothing
    ops.push_back(std::move(measured));
  }
  if (gpu.empty()) gpu = trace.gpu_name.empty() ? "unknown" : trace.gpu_name;
  DTSIM_ASSIGN_OR_RETURN(OpCostTable table,
                         OpCostTable::Make(std::move(gpu), "dtsim ops " + trace.file,
                                           std::move(ops), OpTiming::kInRun));
  return OpProfile{.table = std::move(table), .stats = std::move(stats)};
}

}  // namespace dtsim::traces
