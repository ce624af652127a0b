#include "traces/kineto_assembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "sim/base/strings.h"
#include "traces/kineto_reader.h"
#include "traces/torch_dtype.h"

namespace dtsim::traces {
namespace {

// Bounds past which a value is corrupt rather than big: times stay far from int64 overflow
// when the simulator adds them up, and sizes and groups from allocating absurd amounts.
constexpr int64_t kMaxTimestampNs = int64_t{1} << 61;  // ~73 years of epoch nanoseconds
constexpr int64_t kMaxDurationNs = int64_t{1} << 56;   // ~2.3 years
constexpr int64_t kMaxGroupSize = int64_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 44;  // 16 Ti elements in one message

// Bytes per element of a PyTorch dtype name (traces/torch_dtype.h); 0 when unknown.
int64_t DtypeBytes(std::string_view dtype) {
  const std::optional<TorchDtype> type = LookUpTorchDtype(dtype);
  return type ? type->bytes : 0;
}

// The collective a PyTorch collective name names ("allreduce", "all_reduce",
// "_allgather_base", "nccl:all_to_all", "reduce_scatter_tensor", "send").
std::optional<graph::CommKind> CollectiveFromName(std::string_view raw) {
  std::string name;
  for (char c : ToLower(raw)) {
    if (c != '_' && c != '-' && c != ' ') name.push_back(c);
  }
  if (name.starts_with("nccl:")) name = name.substr(5);
  using graph::CommKind;
  if (name.find("allreduce") != std::string::npos) return CommKind::kAllReduce;
  if (name.find("allgather") != std::string::npos) return CommKind::kAllGather;
  if (name.find("reducescatter") != std::string::npos) return CommKind::kReduceScatter;
  if (name.find("alltoall") != std::string::npos) return CommKind::kAllToAll;
  if (name.find("broadcast") != std::string::npos) return CommKind::kBroadcast;
  if (name.find("barrier") != std::string::npos) return CommKind::kBarrier;
  if (name.find("reduce") != std::string::npos) return CommKind::kReduce;
  if (name.find("send") != std::string::npos || name.find("recv") != std::string::npos) {
    return CommKind::kSendRecv;
  }
  return std::nullopt;
}

std::optional<SyncKind> SyncKindFromName(std::string_view name) {
  if (name == "Stream Sync") return SyncKind::kStreamSync;
  if (name == "Event Sync") return SyncKind::kEventSync;
  if (name == "Context Sync") return SyncKind::kContextSync;
  if (name == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
  return std::nullopt;
}

// Categories of Kineto's own that carry nothing the replay or the op table needs.
bool IsIgnoredKinetoCategory(std::string_view cat) {
  return cat == "python_function" || cat == "gpu_user_annotation" || cat == "overhead" ||
         cat == "cuda_profiler_range" || cat == "Trace" || cat == "cuda_event" ||
         cat == "cpu_instant_event" || cat == "Python" || cat == "cuda_sync_event";
}

// The 2021 schema's categories, mapped to today's.
std::string_view ModernCategory(std::string_view cat) {
  if (cat == "Operator") return "cpu_op";
  if (cat == "Runtime") return "cuda_runtime";
  if (cat == "Kernel") return "kernel";
  if (cat == "Memcpy") return "gpu_memcpy";
  if (cat == "Memset") return "gpu_memset";
  return cat;
}

// A CUDA API call that puts work on a stream.
bool LaunchesWork(std::string_view api) {
  return api.find("LaunchKernel") != std::string_view::npos ||
         api.find("cuLaunch") != std::string_view::npos ||
         api.find("Memcpy") != std::string_view::npos ||
         api.find("Memset") != std::string_view::npos;
}

}  // namespace

void KinetoAssembler::Reserve(uint64_t json_bytes) {
  constexpr uint64_t kBytesPerEvent = 256;
  constexpr uint64_t kMaxReserved = uint64_t{1} << 24;  // 16 M events: ~1 GB of host events
  const size_t events = static_cast<size_t>(std::min(json_bytes / kBytesPerEvent, kMaxReserved));
  trace_.host.reserve(events);
  trace_.device.reserve(events / 2);
}

void KinetoAssembler::Add(RawEvent& event) {
  ImportStats& stats = trace_.stats;
  ++stats.events;
  CountCategory(event);
  if (event.bad_time) return Drop("timestamp or duration is not a number");
  if ((event.ts_ns && (*event.ts_ns < 0 || *event.ts_ns > kMaxTimestampNs)) ||
      (event.dur_ns && *event.dur_ns > kMaxDurationNs)) {
    return Drop("timestamp or duration out of range");
  }
  if (event.ph == "X") return Complete(event);
  if (event.ph == "B" || event.ph == "E") return BeginEnd(event);
  if (event.ph == "s" || event.ph == "t" || event.ph == "f") {
    ++stats.flows;
    return;
  }
  if (event.ph == "M" || event.ph == "i" || event.ph == "I" || event.ph == "C") return;
  Drop(fmt::format("phase '{}' not read", event.ph));
}

void KinetoAssembler::CountCategory(const RawEvent& event) {
  // A trace has a few dozen distinct pairs, and runs of one: try the last pair first.
  if (last_category_ < categories_.size()) {
    Category& last = categories_[last_category_];
    if (last.ph == event.ph && last.cat == event.cat) {
      ++last.events;
      return;
    }
  }
  for (size_t i = 0; i < categories_.size(); ++i) {
    if (categories_[i].ph == event.ph && categories_[i].cat == event.cat) {
      ++categories_[i].events;
      last_category_ = i;
      return;
    }
  }
  last_category_ = categories_.size();
  categories_.push_back({event.ph, event.cat, 1});
}

void KinetoAssembler::Finish() {
  for (const Category& category : categories_) {
    trace_.stats.categories[fmt::format("{}/{}", category.ph, category.cat)] += category.events;
  }
  for (const auto& [track, open] : open_begins_) {
    if (!open.empty()) Drop("'B' without a matching 'E'", static_cast<int64_t>(open.size()));
  }
  std::sort(trace_.steps.begin(), trace_.steps.end(),
            [](const ProfilerStep& a, const ProfilerStep& b) { return a.start < b.start; });
  // A step recorded both ways (an annotation and an op of the same number) counts once.
  trace_.steps.erase(std::unique(trace_.steps.begin(), trace_.steps.end(),
                                 [](const ProfilerStep& a, const ProfilerStep& b) {
                                   return a.number == b.number && a.start == b.start;
                                 }),
                     trace_.steps.end());
  LinkLaunches();
  DescribeCollectives();
}

void KinetoAssembler::BeginEnd(RawEvent& event) {
  if (!event.ts_ns) return Drop("no timestamp");
  const std::string track = fmt::format("{}|{}|{}|{}", event.pid.number, event.pid.text,
                                        event.tid.number, event.tid.text);
  std::vector<RawEvent>& open = open_begins_[track];
  if (event.ph == "B") {
    open.push_back(std::move(event));
    return;
  }
  if (open.empty()) return Drop("'E' without a matching 'B'");
  RawEvent begin = std::move(open.back());
  open.pop_back();
  begin.dur_ns = *event.ts_ns - *begin.ts_ns;
  if (!begin.args.present()) begin.args = std::move(event.args);
  Complete(begin);
}

void KinetoAssembler::Complete(RawEvent& event) {
  if (!event.ts_ns) return Drop("no timestamp");
  if (!event.dur_ns) return Drop("complete event without duration");
  if (*event.dur_ns < 0) return Drop("negative duration");
  const std::string_view cat = ModernCategory(event.cat);
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") return Device(event, cat);
  if (cat == "cuda_sync") return Sync(event);
  if (cat == "cpu_op") return Host(event, HostEventKind::kOp);
  if (cat == "user_annotation") return Host(event, HostEventKind::kAnnotation);
  if (cat == "cuda_runtime") return Host(event, HostEventKind::kRuntime);
  if (cat == "cuda_driver") return Host(event, HostEventKind::kDriver);
  if (IsIgnoredKinetoCategory(cat)) return;
  Host(event, HostEventKind::kOther);
}

uint32_t KinetoAssembler::Thread(const RawEvent& event) {
  const int64_t pid = event.pid.Integer().value_or(-1);
  const int64_t tid = event.tid.Integer().value_or(pid);
  const std::pair<int64_t, int64_t> key(pid, tid);
  if (last_thread_ && last_thread_->first == key) return last_thread_->second;
  const auto [it, added] = thread_index_.emplace(key, static_cast<uint32_t>(trace_.threads.size()));
  if (added) trace_.threads.push_back({pid, tid});
  last_thread_ = *it;
  return it->second;
}

// Ops repeat their shapes: each distinct (dims, types) pair is kept once.
uint32_t KinetoAssembler::Shapes(const EventArgs& args) {
  shapes_key_.clear();
  args.AppendDump(KinetoArg::kInputDims, shapes_key_);
  const size_t dims_size = shapes_key_.size();
  shapes_key_ += '\n';  // never inside compact JSON
  args.AppendString(KinetoArg::kInputType, shapes_key_);
  const auto it = shapes_index_.find(shapes_key_);
  if (it != shapes_index_.end()) return it->second;
  const auto index = static_cast<uint32_t>(trace_.shapes.size());
  trace_.shapes.push_back({shapes_key_.substr(0, dims_size), shapes_key_.substr(dims_size + 1)});
  shapes_index_.emplace(shapes_key_, index);
  return index;
}

void KinetoAssembler::Host(RawEvent& event, HostEventKind kind) {
  if (!event.pid.Integer()) return Drop("host event on a named track");
  HostEvent host;
  host.start = TimeNs(*event.ts_ns);
  host.duration = DurationNs(*event.dur_ns);
  host.correlation = event.args.Int(KinetoArg::kCorrelation);
  host.external_id =
      event.args.Int(KinetoArg::kExternalId, event.args.Int(KinetoArg::kExternalIdLower));
  host.record_function = event.args.Int(KinetoArg::kRecordFunctionId);
  host.name = trace_.names.Intern(event.name);
  host.thread = Thread(event);
  host.kind = kind;
  if (event.args.Has(KinetoArg::kInputDims)) host.shapes = Shapes(event.args);
  ImportStats& stats = trace_.stats;
  switch (kind) {
    case HostEventKind::kOp:
      ++stats.host_ops;
      break;
    case HostEventKind::kAnnotation:
      ++stats.annotations;
      break;
    case HostEventKind::kRuntime:
    case HostEventKind::kDriver:
      ++stats.api_calls;
      break;
    case HostEventKind::kOther:
      break;
  }
  // ProfilerStep#N is a user annotation since PyTorch 1.10; 1.8 and 1.9 record it as an
  // operator (category "Operator", read as cpu_op).
  if ((kind == HostEventKind::kAnnotation || kind == HostEventKind::kOp) &&
      event.name.starts_with("ProfilerStep#")) {
    int64_t number = 0;
    const std::string_view digits = std::string_view(event.name).substr(13);
    std::from_chars(digits.data(), digits.data() + digits.size(), number);
    trace_.steps.push_back({number, host.thread, host.start, host.duration});
  }
  trace_.host.push_back(host);
}

void KinetoAssembler::Device(RawEvent& event, std::string_view cat) {
  if (*event.ts_ns == 0 && *event.dur_ns == 0) {
    ++trace_.stats.zero_timestamp_gpu_ops;
    return Drop("GPU op without timestamps (CUPTI lost them)");
  }
  DeviceEvent device;
  device.start = TimeNs(*event.ts_ns);
  device.duration = DurationNs(*event.dur_ns);
  device.correlation = event.args.Int(KinetoArg::kCorrelation);
  device.device =
      static_cast<int32_t>(event.args.Int(KinetoArg::kDevice, event.pid.Integer().value_or(0)));
  const std::optional<int64_t> tid_stream = event.tid.Integer();
  device.stream = event.args.Int(KinetoArg::kStream, tid_stream.value_or(0));
  device.name = trace_.names.Intern(event.name);
  ImportStats& stats = trace_.stats;
  if (cat == "kernel") {
    device.kind = DeviceEventKind::kKernel;
    ++stats.kernels;
    if (const std::optional<graph::CommKind> kind = NcclKernelKind(event.name)) {
      device.collective = Collective(event.args, *kind);
    }
  } else {
    device.kind = cat == "gpu_memcpy" ? DeviceEventKind::kMemcpy : DeviceEventKind::kMemset;
    ++(cat == "gpu_memcpy" ? stats.memcpys : stats.memsets);
    device.bytes = Bytes(std::max<int64_t>(0, event.args.Int(KinetoArg::kBytes, 0)));
  }
  trace_.device.push_back(device);
}

// The collective of an NCCL kernel from the args Kineto copies from record_param_comms.
uint32_t KinetoAssembler::Collective(const EventArgs& args, graph::CommKind name_kind) {
  CollectiveInfo info;
  info.kind = name_kind;
  const std::string collective_name = args.String(KinetoArg::kCollectiveName);
  if (const auto kind = CollectiveFromName(collective_name)) info.kind = *kind;
  const int64_t elements = args.Int(KinetoArg::kInMsgNelems);
  const int64_t element_bytes = DtypeBytes(args.String(KinetoArg::kDtype));
  if (elements >= 0 && elements <= kMaxElements && element_bytes > 0) {
    info.bytes = Bytes(elements * element_bytes);
    info.element_bytes = static_cast<int32_t>(element_bytes);
  } else {
    info.size_unknown = true;  // DescribeCollectives infers it from the annotation
  }
  const int64_t group_size = args.Int(KinetoArg::kGroupSize, 0);
  info.group_size =
      group_size > 0 && group_size <= kMaxGroupSize ? static_cast<int32_t>(group_size) : 0;
  info.process_group = args.String(KinetoArg::kProcessGroupName);
  // A list, or a string holding one (older PyTorch); ranks are global.
  const ArgValue& ranks = args.Get(KinetoArg::kProcessGroupRanks);
  if (ranks.type == ArgValue::Type::kString || ranks.type == ArgValue::Type::kJson) {
    const Expected<Json> list = ParseJson(ranks.text, "Process Group Ranks");
    if (list.ok() && list->is_array()) {
      for (const Json& rank : *list) {
        if (rank.is_number_integer() && rank.get<int64_t>() >= 0 &&
            rank.get<int64_t>() < kMaxGroupSize) {
          info.group_ranks.push_back(rank.get<int32_t>());
        }
      }
    }
  }
  const uint32_t index = static_cast<uint32_t>(trace_.collectives.size());
  trace_.collectives.push_back(std::move(info));
  return index;
}

void KinetoAssembler::Sync(RawEvent& event) {
  const std::string kind_name = event.args.String(KinetoArg::kCudaSyncKind);
  const std::optional<SyncKind> kind = SyncKindFromName(kind_name.empty() ? event.name : kind_name);
  if (!kind) return Drop(fmt::format("unknown cuda_sync kind '{}'", event.name));
  SyncEvent sync;
  sync.start = TimeNs(*event.ts_ns);
  sync.duration = DurationNs(*event.dur_ns);
  sync.correlation = event.args.Int(KinetoArg::kCorrelation);
  sync.stream = event.args.Int(KinetoArg::kStream);
  sync.wait_on_stream = event.args.Int(KinetoArg::kWaitOnStream);
  sync.record_correlation = event.args.Int(KinetoArg::kWaitOnEventRecord);
  sync.device =
      static_cast<int32_t>(event.args.Int(KinetoArg::kDevice, event.pid.Integer().value_or(0)));
  sync.kind = *kind;
  ++trace_.stats.syncs;
  trace_.syncs.push_back(sync);
}

void KinetoAssembler::LinkLaunches() {
  std::vector<int64_t> device_correlations;
  device_correlations.reserve(trace_.device.size());
  for (const DeviceEvent& device : trace_.device) device_correlations.push_back(device.correlation);
  std::sort(device_correlations.begin(), device_correlations.end());
  std::vector<int8_t> launches_work(trace_.names.size(), -1);  // per name, computed once
  std::vector<int64_t> api_correlations;
  for (const HostEvent& host : trace_.host) {
    if (!IsApiCall(host)) continue;
    api_correlations.push_back(host.correlation);
    int8_t& launches = launches_work[host.name.value()];
    if (launches < 0) launches = LaunchesWork(trace_.Name(host.name)) ? 1 : 0;
    if (launches == 1 && !std::binary_search(device_correlations.begin(), device_correlations.end(),
                                             host.correlation)) {
      ++trace_.stats.launches_without_gpu_op;
    }
  }
  std::sort(api_correlations.begin(), api_correlations.end());
  for (const int64_t correlation : device_correlations) {
    if (!std::binary_search(api_correlations.begin(), api_correlations.end(), correlation)) {
      ++trace_.stats.gpu_ops_without_launch;
    }
  }
}

namespace {

// A thread's nccl:* annotations sorted by start, with the latest end up to each, to find the
// innermost one around a launch without scanning them all.
struct AnnotationIndex {
  std::vector<const HostEvent*> by_start;
  std::vector<TimeNs> end_so_far;

  void Sort() {
    std::stable_sort(by_start.begin(), by_start.end(),
                     [](const HostEvent* a, const HostEvent* b) { return a->start < b->start; });
    TimeNs latest;
    for (size_t i = 0; i < by_start.size(); ++i) {
      latest = i == 0 ? by_start[i]->end() : std::max(latest, by_start[i]->end());
      end_so_far.push_back(latest);
    }
  }
  // The range that contains `launch` with the latest start (the later one of equal starts).
  const HostEvent* Around(const HostEvent& launch) const {
    size_t i = static_cast<size_t>(
        std::upper_bound(by_start.begin(), by_start.end(), launch.start,
                         [](TimeNs start, const HostEvent* a) { return start < a->start; }) -
        by_start.begin());
    while (i > 0 && end_so_far[i - 1] >= launch.end()) {
      --i;
      if (by_start[i]->end() >= launch.end()) return by_start[i];
    }
    return nullptr;
  }
};

}  // namespace

// Counts the collectives and, where the kernel's args did not say, infers the kind and size
// from the nccl:* annotation around the launch (its first input's shape and type).
void KinetoAssembler::DescribeCollectives() {
  std::unordered_map<int64_t, const HostEvent*> launches;  // of the collectives to infer
  for (const DeviceEvent& device : trace_.device) {
    if (device.collective == kNone) continue;
    ++trace_.stats.collectives;
    if (trace_.collectives[device.collective].size_unknown) {
      launches.emplace(device.correlation, nullptr);
    }
  }
  if (launches.empty()) return;
  std::unordered_map<uint32_t, AnnotationIndex> nccl_annotations;  // per thread
  for (const HostEvent& host : trace_.host) {
    if (IsApiCall(host)) {
      const auto it = launches.find(host.correlation);
      if (it != launches.end() && it->second == nullptr) it->second = &host;  // the first
    } else if (trace_.Name(host.name).starts_with("nccl:")) {
      nccl_annotations[host.thread].by_start.push_back(&host);
    }
  }
  for (auto& [thread, index] : nccl_annotations) index.Sort();
  for (const DeviceEvent& device : trace_.device) {
    if (device.collective == kNone) continue;
    CollectiveInfo& info = trace_.collectives[device.collective];
    if (!info.size_unknown) continue;
    ++trace_.stats.collectives_inferred;
    info.size_inferred = true;
    if (info.group_size == 0) info.group_size = trace_.world_size;
    const HostEvent* launch = launches.at(device.correlation);
    if (launch == nullptr) continue;
    const auto thread = nccl_annotations.find(launch->thread);
    if (thread == nccl_annotations.end()) continue;
    const HostEvent* annotation = thread->second.Around(*launch);
    if (annotation == nullptr) continue;
    if (const auto kind = CollectiveFromName(trace_.Name(annotation->name))) info.kind = *kind;
    if (annotation->shapes == kNone) continue;
    const OpShapes& shapes = trace_.shapes[annotation->shapes];
    const Expected<Json> dims = ParseJson(shapes.input_dims, "Input Dims");
    const Expected<Json> types = ParseJson(shapes.input_types, "Input type");
    if (!dims.ok() || !types.ok() || !dims->is_array() || dims->empty() || !(*dims)[0].is_array() ||
        !types->is_array() || types->empty() || !(*types)[0].is_string()) {
      continue;
    }
    int64_t elements = 1;
    for (const Json& extent : (*dims)[0]) {
      if (!extent.is_number_integer() || extent.get<int64_t>() < 0 ||
          extent.get<int64_t>() > kMaxElements || elements > kMaxElements) {
        elements = -1;
        break;
      }
      elements *= extent.get<int64_t>();
    }
    const int64_t element_bytes = DtypeBytes((*types)[0].get<std::string>());
    if (element_bytes == 0 || elements < 0 || elements > kMaxElements) continue;
    info.bytes = Bytes(elements * element_bytes);
    info.element_bytes = static_cast<int32_t>(element_bytes);
    info.size_unknown = false;
  }
}

std::optional<graph::CommKind> NcclKernelKind(std::string_view kernel_name) {
  // Most kernels are not NCCL's: look for "nccl" in any case before lowering the name.
  bool nccl = false;
  for (size_t i = 0; !nccl && i + 4 <= kernel_name.size(); ++i) {
    nccl = (kernel_name[i] | 0x20) == 'n' && (kernel_name[i + 1] | 0x20) == 'c' &&
           (kernel_name[i + 2] | 0x20) == 'c' && (kernel_name[i + 3] | 0x20) == 'l';
  }
  if (!nccl) return std::nullopt;
  const std::string name = ToLower(kernel_name);
  size_t at = name.find("nccldevkernel_");
  size_t prefix = 14;
  if (at == std::string::npos) {
    at = name.find("ncclkernel_");
    prefix = 11;
  }
  if (at == std::string::npos) return std::nullopt;
  const std::string_view rest = std::string_view(name).substr(at + prefix);
  const std::string_view collective = rest.substr(0, rest.find_first_of("_("));
  if (collective == "sendrecv" || collective == "send" || collective == "recv") {
    return graph::CommKind::kSendRecv;
  }
  return CollectiveFromName(collective).value_or(graph::CommKind::kAllReduce);
}

}  // namespace dtsim::traces
