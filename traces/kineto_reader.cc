#include "traces/kineto_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "traces/json_stream.h"
#include "traces/torch_dtype.h"
#include "traces/trace_input.h"

namespace dtsim::traces {
namespace {

// Bounds past which a value is corrupt rather than big: times stay far from int64 overflow
// when the simulator adds them up, and sizes and groups from allocating absurd amounts.
constexpr int64_t kMaxTimestampNs = int64_t{1} << 61;  // ~73 years of epoch nanoseconds
constexpr int64_t kMaxDurationNs = int64_t{1} << 56;   // ~2.3 years
constexpr int64_t kMaxGroupSize = int64_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 44;  // 16 Ti elements in one message

// A pid or tid: Kineto writes integers, and strings for its own tracks ("Spans", "stream 7").
struct TrackId {
  bool is_number = false;
  int64_t number = 0;
  std::string text;

  void Clear() {
    is_number = false;
    number = 0;
    text.clear();
  }
  // The integer, also from a numeric string or "stream 7"; nothing otherwise.
  std::optional<int64_t> Integer() const {
    if (is_number) return number;
    std::string_view digits = text;
    if (digits.starts_with("stream ")) digits.remove_prefix(7);
    while (!digits.empty() && digits.back() == ' ') digits.remove_suffix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
      return std::nullopt;
    }
    return value;
  }
};

// The fields of one traceEvents entry that dtsim reads; `args` is kept as JSON.
struct RawEvent {
  std::string name;
  std::string cat;
  std::string ph;
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> dur_ns;
  bool bad_time = false;
  TrackId pid;
  TrackId tid;
  Json args;

  void Clear() {
    name.clear();
    cat.clear();
    ph.clear();
    ts_ns.reset();
    dur_ns.reset();
    bad_time = false;
    pid.Clear();
    tid.Clear();
    args = Json();
  }
};

int64_t ArgInt(const Json& args, std::string_view key, int64_t fallback = -1) {
  if (!args.is_object()) return fallback;
  const auto it = args.find(key);
  if (it == args.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(std::llround(it->get<double>()));
  return fallback;
}

const Json* ArgFind(const Json& args, std::string_view key) {
  if (!args.is_object()) return nullptr;
  const auto it = args.find(key);
  return it == args.end() ? nullptr : &*it;
}

std::string ArgString(const Json& args, std::string_view key) {
  const Json* value = ArgFind(args, key);
  if (value == nullptr) return {};
  return value->is_string() ? value->get<std::string>() : value->dump();
}

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

// Collects events into a Trace as the parser delivers them.
class TraceAssembler {
 public:
  explicit TraceAssembler(Trace& trace) : trace_(trace) {}

  int64_t events() const { return trace_.stats.events; }

  void Add(RawEvent& event) {
    ImportStats& stats = trace_.stats;
    ++stats.events;
    ++stats.categories[fmt::format("{}/{}", event.ph, event.cat)];
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

  void Finish() {
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

  void Drop(const std::string& reason, int64_t count = 1) { trace_.stats.dropped[reason] += count; }

 private:
  void BeginEnd(RawEvent& event) {
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
    if (begin.args.is_null()) begin.args = std::move(event.args);
    Complete(begin);
  }

  void Complete(RawEvent& event) {
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

  uint32_t Thread(const RawEvent& event) {
    const int64_t pid = event.pid.Integer().value_or(-1);
    const int64_t tid = event.tid.Integer().value_or(pid);
    const auto [it, added] = thread_index_.emplace(std::make_pair(pid, tid),
                                                   static_cast<uint32_t>(trace_.threads.size()));
    if (added) trace_.threads.push_back({pid, tid});
    return it->second;
  }

  void Host(RawEvent& event, HostEventKind kind) {
    if (!event.pid.Integer()) return Drop("host event on a named track");
    HostEvent host;
    host.start = TimeNs(*event.ts_ns);
    host.duration = DurationNs(*event.dur_ns);
    host.correlation = ArgInt(event.args, "correlation");
    host.external_id = ArgInt(event.args, "External id", ArgInt(event.args, "external id"));
    host.record_function = ArgInt(event.args, "Record function id");
    host.name = trace_.names.Intern(event.name);
    host.thread = Thread(event);
    host.kind = kind;
    if (const Json* dims = ArgFind(event.args, "Input Dims")) {
      host.shapes = static_cast<uint32_t>(trace_.shapes.size());
      trace_.shapes.push_back({dims->dump(), ArgString(event.args, "Input type")});
    }
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

  void Device(RawEvent& event, std::string_view cat) {
    if (*event.ts_ns == 0 && *event.dur_ns == 0) {
      ++trace_.stats.zero_timestamp_gpu_ops;
      return Drop("GPU op without timestamps (CUPTI lost them)");
    }
    DeviceEvent device;
    device.start = TimeNs(*event.ts_ns);
    device.duration = DurationNs(*event.dur_ns);
    device.correlation = ArgInt(event.args, "correlation");
    device.device =
        static_cast<int32_t>(ArgInt(event.args, "device", event.pid.Integer().value_or(0)));
    const std::optional<int64_t> tid_stream = event.tid.Integer();
    device.stream = ArgInt(event.args, "stream", tid_stream.value_or(0));
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
      device.bytes = Bytes(std::max<int64_t>(0, ArgInt(event.args, "bytes", 0)));
    }
    trace_.device.push_back(device);
  }

  // The collective of an NCCL kernel from the args Kineto copies from record_param_comms.
  uint32_t Collective(const Json& args, graph::CommKind name_kind) {
    CollectiveInfo info;
    info.kind = name_kind;
    const std::string collective_name = ArgString(args, "Collective name");
    if (const auto kind = CollectiveFromName(collective_name)) info.kind = *kind;
    const int64_t elements = ArgInt(args, "In msg nelems");
    const int64_t element_bytes = DtypeBytes(ArgString(args, "dtype"));
    if (elements >= 0 && elements <= kMaxElements && element_bytes > 0) {
      info.bytes = Bytes(elements * element_bytes);
      info.element_bytes = static_cast<int32_t>(element_bytes);
    } else {
      info.size_unknown = true;  // DescribeCollectives infers it from the annotation
    }
    const int64_t group_size = ArgInt(args, "Group size", 0);
    info.group_size =
        group_size > 0 && group_size <= kMaxGroupSize ? static_cast<int32_t>(group_size) : 0;
    info.process_group = ArgString(args, "Process Group Name");
    if (const Json* ranks = ArgFind(args, "Process Group Ranks")) {
      Json list = *ranks;
      if (ranks->is_string()) {
        const Expected<Json> parsed = ParseJson(ranks->get<std::string>(), "Process Group Ranks");
        if (parsed.ok()) list = *parsed;
      }
      if (list.is_array()) {
        for (const Json& rank : list) {
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

  void Sync(RawEvent& event) {
    const std::string kind_name = ArgString(event.args, "cuda_sync_kind");
    const std::optional<SyncKind> kind =
        SyncKindFromName(kind_name.empty() ? event.name : kind_name);
    if (!kind) return Drop(fmt::format("unknown cuda_sync kind '{}'", event.name));
    SyncEvent sync;
    sync.start = TimeNs(*event.ts_ns);
    sync.duration = DurationNs(*event.dur_ns);
    sync.correlation = ArgInt(event.args, "correlation");
    sync.stream = ArgInt(event.args, "stream");
    sync.wait_on_stream = ArgInt(event.args, "wait_on_stream");
    sync.record_correlation = ArgInt(event.args, "wait_on_cuda_event_record_corr_id");
    sync.device =
        static_cast<int32_t>(ArgInt(event.args, "device", event.pid.Integer().value_or(0)));
    sync.kind = *kind;
    ++trace_.stats.syncs;
    trace_.syncs.push_back(sync);
  }

  static bool LaunchesWork(std::string_view api) {
    return api.find("LaunchKernel") != std::string_view::npos ||
           api.find("cuLaunch") != std::string_view::npos ||
           api.find("Memcpy") != std::string_view::npos ||
           api.find("Memset") != std::string_view::npos;
  }

  void LinkLaunches() {
    std::unordered_set<int64_t> api_correlations;
    std::unordered_set<int64_t> device_correlations;
    for (const DeviceEvent& device : trace_.device) device_correlations.insert(device.correlation);
    for (const HostEvent& host : trace_.host) {
      if (host.kind != HostEventKind::kRuntime && host.kind != HostEventKind::kDriver) continue;
      api_correlations.insert(host.correlation);
      if (LaunchesWork(trace_.Name(host.name)) && !device_correlations.contains(host.correlation)) {
        ++trace_.stats.launches_without_gpu_op;
      }
    }
    for (const DeviceEvent& device : trace_.device) {
      if (!api_correlations.contains(device.correlation)) ++trace_.stats.gpu_ops_without_launch;
    }
  }

  // Counts the collectives and, where the kernel's args did not say, infers the kind and size
  // from the nccl:* annotation around the launch (its first input's shape and type).
  void DescribeCollectives() {
    std::unordered_map<int64_t, const HostEvent*> api_by_correlation;
    std::unordered_map<uint32_t, std::vector<const HostEvent*>> nccl_annotations;  // per thread
    for (const HostEvent& host : trace_.host) {
      if (host.kind == HostEventKind::kRuntime || host.kind == HostEventKind::kDriver) {
        api_by_correlation.emplace(host.correlation, &host);
      } else if (trace_.Name(host.name).starts_with("nccl:")) {
        nccl_annotations[host.thread].push_back(&host);
      }
    }
    for (const DeviceEvent& device : trace_.device) {
      if (device.collective == kNone) continue;
      CollectiveInfo& info = trace_.collectives[device.collective];
      ++trace_.stats.collectives;
      if (!info.size_unknown) continue;
      ++trace_.stats.collectives_inferred;
      info.size_inferred = true;
      if (info.group_size == 0) info.group_size = trace_.world_size;
      const auto api = api_by_correlation.find(device.correlation);
      if (api == api_by_correlation.end()) continue;
      const HostEvent& launch = *api->second;
      const HostEvent* annotation = nullptr;  // the innermost nccl:* range around the launch
      for (const HostEvent* candidate : nccl_annotations[launch.thread]) {
        if (candidate->start <= launch.start && candidate->end() >= launch.end() &&
            (annotation == nullptr || candidate->start >= annotation->start)) {
          annotation = candidate;
        }
      }
      if (annotation == nullptr) continue;
      if (const auto kind = CollectiveFromName(trace_.Name(annotation->name))) info.kind = *kind;
      if (annotation->shapes == kNone) continue;
      const OpShapes& shapes = trace_.shapes[annotation->shapes];
      const Expected<Json> dims = ParseJson(shapes.input_dims, "Input Dims");
      const Expected<Json> types = ParseJson(shapes.input_types, "Input type");
      if (!dims.ok() || !types.ok() || !dims->is_array() || dims->empty() ||
          !(*dims)[0].is_array() || !types->is_array() || types->empty() ||
          !(*types)[0].is_string()) {
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

  Trace& trace_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_index_;
  std::map<std::string, std::vector<RawEvent>> open_begins_;
};

// The SAX handler: streams traceEvents into the assembler, keeps the other top-level keys.
class KinetoSax : public ValueSax<KinetoSax> {
 public:
  KinetoSax(TraceAssembler& assembler, Json& metadata)
      : assembler_(assembler), metadata_(metadata) {}

  bool saw_events() const { return saw_events_; }
  bool root_is_array() const { return root_is_array_; }

  bool number_integer(int64_t value) { return Number(Json(value), std::to_string(value)); }
  bool number_unsigned(uint64_t value) { return Number(Json(value), std::to_string(value)); }
  bool number_float(double value, const std::string& text) { return Number(Json(value), text); }
  bool string(std::string& value) {
    if (value.size() > kMaxTraceStringBytes) {
      error_ = fmt::format(
          "a string of {} bytes in traceEvents entry {}: more than the {} MiB a "
          "name or argument may take",
          value.size(), assembler_.events(), kMaxTraceStringBytes >> 20);
      return false;
    }
    if (InEventField()) {
      EventString(value);
      return true;
    }
    return Scalar(Json(std::move(value)));
  }

  bool key(std::string& key) {
    if (dom_.active()) {
      dom_.Key(key);
    } else if (depth_ == 1 && !root_is_array_) {
      top_key_ = key;
    } else if (depth_ == event_depth_ + 1) {
      event_key_ = key;
    }
    return true;
  }

 private:
  // Depths: 0 is outside everything, 1 inside the root container; events sit at
  // event_depth_ (2 inside {"traceEvents": [...]}, 1 inside a bare array) and their fields
  // one deeper.
  bool InEventField() const { return !dom_.active() && in_event_ && depth_ == event_depth_ + 1; }

  friend class ValueSax<KinetoSax>;

  bool Open(bool object) {
    if (depth_ >= kMaxJsonDepth) {
      error_ = fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth);
      return false;
    }
    if (dom_.active()) {
      dom_.Open(object);
      ++depth_;
      return true;
    }
    if (depth_ == 0) {
      root_is_array_ = !object;
      if (root_is_array_) {
        event_depth_ = 1;
        in_events_array_ = true;
        saw_events_ = true;
      }
    } else if (depth_ == 1 && !root_is_array_) {
      if (top_key_ == "traceEvents" && !object) {
        in_events_array_ = true;
        saw_events_ = true;
      } else {
        dom_.Begin(&metadata_[top_key_]);
        dom_.Open(object);
      }
    } else if (in_events_array_ && depth_ == event_depth_) {
      if (object) {
        event_.Clear();
        in_event_ = true;
      } else {
        assembler_.Drop("traceEvents entry that is not an object");
        dom_.Begin(&scratch_);
        dom_.Open(object);
      }
    } else if (in_event_ && depth_ == event_depth_ + 1) {
      dom_.Begin(event_key_ == "args" ? &event_.args : &scratch_);
      dom_.Open(object);
    }
    ++depth_;
    return true;
  }

  bool Close() {
    --depth_;
    if (dom_.active()) {
      dom_.Close();
      return true;
    }
    if (in_event_ && depth_ == event_depth_) {
      in_event_ = false;
      if (assembler_.events() >= kMaxTraceEvents) {
        error_ = fmt::format(
            "more than {} traceEvents entries: dtsim indexes a trace's events "
            "with 32 bits",
            kMaxTraceEvents);
        return false;
      }
      assembler_.Add(event_);
    } else if (in_events_array_ && depth_ == event_depth_ - 1) {
      in_events_array_ = false;
    }
    return true;
  }

  bool Scalar(Json value) {
    if (dom_.active()) {
      dom_.Scalar(std::move(value));
    } else if (depth_ == 1 && !root_is_array_) {
      metadata_[top_key_] = std::move(value);
    } else if (in_events_array_ && depth_ == event_depth_) {
      assembler_.Drop("traceEvents entry that is not an object");
    }
    return true;
  }

  bool Number(Json value, const std::string& text) {
    if (!InEventField()) return Scalar(std::move(value));
    if (event_key_ == "ts" || event_key_ == "dur") {
      const std::optional<int64_t> ns = MicrosecondsTextToNs(text);
      if (!ns) event_.bad_time = true;
      (event_key_ == "ts" ? event_.ts_ns : event_.dur_ns) = ns;
    } else if (event_key_ == "pid" || event_key_ == "tid") {
      TrackId& track = event_key_ == "pid" ? event_.pid : event_.tid;
      track.is_number = value.is_number_integer();
      track.number = track.is_number ? value.get<int64_t>() : 0;
    }
    return true;
  }

  void EventString(std::string& value) {
    if (event_key_ == "name") {
      event_.name = std::move(value);
    } else if (event_key_ == "cat") {
      event_.cat = std::move(value);
    } else if (event_key_ == "ph") {
      event_.ph = std::move(value);
    } else if (event_key_ == "pid" || event_key_ == "tid") {
      TrackId& track = event_key_ == "pid" ? event_.pid : event_.tid;
      track.text = std::move(value);
    } else if (event_key_ == "ts" || event_key_ == "dur") {  // Perfetto accepts numeric strings
      const std::optional<int64_t> ns = MicrosecondsTextToNs(value);
      if (!ns) event_.bad_time = true;
      (event_key_ == "ts" ? event_.ts_ns : event_.dur_ns) = ns;
    }
  }

  TraceAssembler& assembler_;
  Json& metadata_;
  DomBuilder dom_;
  Json scratch_;
  RawEvent event_;
  std::string top_key_;
  std::string event_key_;
  int depth_ = 0;
  int event_depth_ = 2;
  bool root_is_array_ = false;
  bool in_events_array_ = false;
  bool in_event_ = false;
  bool saw_events_ = false;
};

void ReadMetadata(const Json& metadata, Trace& trace) {
  const bool kineto = metadata.contains("schemaVersion") || metadata.contains("deviceProperties") ||
                      metadata.contains("distributedInfo");
  trace.format = kineto ? "kineto" : "chrome";
  if (const auto it = metadata.find("distributedInfo"); it != metadata.end() && it->is_object()) {
    trace.rank = static_cast<int32_t>(ArgInt(*it, "rank", -1));
    trace.world_size = static_cast<int32_t>(ArgInt(*it, "world_size", 0));
    trace.backend = ArgString(*it, "backend");
  }
  if (const auto it = metadata.find("deviceProperties");
      it != metadata.end() && it->is_array() && !it->empty()) {
    trace.gpu_name = ArgString((*it)[0], "name");
  }
  if (const auto it = metadata.find("baseTimeNanoseconds");
      it != metadata.end() && it->is_number_integer()) {
    trace.base_time_ns = it->get<int64_t>();
  }
}

}  // namespace

std::optional<int64_t> MicrosecondsTextToNs(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.find_first_of("eE") != std::string_view::npos) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
        std::abs(value) > 9e15) {
      return std::nullopt;
    }
    return std::llround(value * 1000.0);
  }
  const bool negative = text.front() == '-';
  if (negative) text.remove_prefix(1);
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  constexpr int64_t kMaxMicroseconds = 9'000'000'000'000'000;  // ×1000 still fits an int64
  int64_t micros = 0;
  if (!whole.empty()) {
    const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), micros);
    if (ec != std::errc() || end != whole.data() + whole.size() || micros > kMaxMicroseconds) {
      return std::nullopt;
    }
  } else if (fraction.empty()) {
    return std::nullopt;
  }
  int64_t nanos = 0;
  for (size_t i = 0; i < fraction.size(); ++i) {
    const char c = fraction[i];
    if (c < '0' || c > '9') return std::nullopt;
    if (i < 3) nanos = nanos * 10 + (c - '0');
    if (i == 3 && c >= '5') ++nanos;  // round half up on the fourth decimal
  }
  for (size_t i = fraction.size(); i < 3; ++i) nanos *= 10;
  const int64_t ns = micros * 1000 + nanos;
  return negative ? -ns : ns;
}

std::optional<graph::CommKind> NcclKernelKind(std::string_view kernel_name) {
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

Expected<Trace> ReadKinetoTrace(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceInputBuffer> buffer, TraceInputBuffer::Open(path));
  Trace trace;
  trace.file = path;
  Json metadata = Json::object();
  TraceAssembler assembler(trace);
  KinetoSax sax(assembler, metadata);
  std::istream stream(buffer.get());
  bool parsed = false;
  try {
    parsed = Json::sax_parse(stream, &sax, Json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception& e) {  // nlohmann reports through parse_error; belt and braces
    return Error(fmt::format("cannot parse: {}", e.what())).InFile(path);
  }
  if (buffer->error()) return *buffer->error();
  if (!parsed) {
    return Error(sax.error().value_or("not valid JSON")).InFile(path);
  }
  if (!sax.saw_events()) {
    const bool execution_trace = metadata.contains("nodes");
    return Error(execution_trace
                     ? "a PyTorch execution trace (\"nodes\"), not a profiler trace: it has no "
                       "traceEvents"
                     : "not a Kineto or Chrome trace: no \"traceEvents\" array and not a bare "
                       "array of events")
        .InFile(path);
  }
  ReadMetadata(metadata, trace);
  if (sax.root_is_array()) trace.format = "chrome";
  trace.stats.bytes = buffer->bytes_read();
  trace.stats.file_bytes = buffer->file_bytes();
  trace.stats.gzip = buffer->compressed();
  assembler.Finish();
  return trace;
}

}  // namespace dtsim::traces
