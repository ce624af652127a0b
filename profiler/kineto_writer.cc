#include "profiler/kineto_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include <cxxabi.h>

#include "profiler/device_memory.h"
#include "profiler/profile_linker.h"
#include "sim/base/atomic_file.h"
#include "sim/base/buffered_text_writer.h"
#include "sim/base/strings.h"
#include "sim/base/time_format.h"

namespace dtsim::profiler {
namespace {

constexpr int kMaxShapeDepth = 64;

constexpr std::string_view kCopyKindNames[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                               "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr std::string_view kMemoryKindNames[] = {"Unknown",       "Pageable",      "Pinned",
                                                 "Device",        "Array",         "Managed",
                                                 "Device Static", "Managed Static"};
constexpr std::string_view kSyncNames[] = {"Unknown", "Event Sync", "Stream Wait Event",
                                           "Stream Sync", "Context Sync"};

template <typename Enum, size_t N>
std::string_view NameOf(const std::string_view (&names)[N], Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : names[0];
}

// A range PyTorch's emit_nvtx wrote: "aten::mm, seq = 3, op_id = 7, sizes = [[2, 3], [3, 4]],
// input_op_ids = [...]" -> op "aten::mm", sizes "[[2,3],[3,4]]" (empty when absent or unreadable).
struct EmitNvtxRange {
  std::string op;
  std::string input_dims;
};

std::optional<EmitNvtxRange> ParseEmitNvtx(std::string_view text) {
  const size_t comma = text.find(", ");
  if (comma == std::string_view::npos) return std::nullopt;
  const std::string_view op = text.substr(0, comma);
  if (op.find("::") == std::string_view::npos || op.find(' ') != std::string_view::npos ||
      text.find("op_id = ") == std::string_view::npos) {
    return std::nullopt;
  }
  EmitNvtxRange range{std::string(op), {}};
  const size_t sizes = text.find("sizes = [");
  if (sizes == std::string_view::npos) return range;
  const size_t open = sizes + std::string_view("sizes = ").size();
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    depth += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
    // Shapes nest two or three levels; deeper text is not a shape list, and dumping a
    // deeply nested value would recurse that deep.
    if (depth > kMaxShapeDepth) return range;
    if (depth != 0) continue;
    const nlohmann::json dims =
        nlohmann::json::parse(text.substr(open, i + 1 - open), nullptr, /*allow_exceptions=*/false);
    if (dims.is_array()) range.input_dims = dims.dump();
    break;
  }
  return range;
}

// Appends through BufferedTextWriter (Append, Separator, Flush).
class KinetoWriter : private BufferedTextWriter {
 public:
  KinetoWriter(std::ostream& out, const Profile& profile)
      : BufferedTextWriter(out),
        profile_(profile),
        linked_(LinkProfile(profile)),
        base_(BaseTime()),
        memory_(DeviceMemoryOf(profile.memory)) {}

  void Write() {
    WriteHeader();
    WriteProcessNames();
    for (const MarkerRange& range : linked_.ranges) WriteRange(range);
    for (uint32_t a = 0; a < profile_.api_calls.size(); ++a) WriteApiCall(a);
    for (const KernelRecord& kernel : profile_.kernels) WriteKernel(kernel);
    for (const MemcpyRecord& copy : profile_.memcpys) WriteMemcpy(copy);
    for (const MemsetRecord& set : profile_.memsets) WriteMemset(set);
    for (size_t s = 0; s < profile_.syncs.size(); ++s) WriteSync(s);
    WriteDeviceMemory();
    Append("\n]}}\n");
    Flush();
  }

 private:
  // The earliest time of any record (and the session start), so every timestamp is >= 0.
  TimeNs BaseTime() const {
    TimeNs base = profile_.session_start == TimeNs::Zero() ? TimeNs::Max() : profile_.session_start;
    const auto earliest = [&](TimeNs t) { base = std::min(base, t); };
    for (const ApiRecord& call : profile_.api_calls) earliest(call.start);
    for (const KernelRecord& kernel : profile_.kernels) earliest(kernel.start);
    for (const MemcpyRecord& copy : profile_.memcpys) earliest(copy.start);
    for (const MemsetRecord& set : profile_.memsets) earliest(set.start);
    for (const SyncRecord& sync : profile_.syncs) earliest(sync.start);
    for (const MarkerRecord& marker : profile_.markers) earliest(marker.time);
    for (const MemoryRecord& record : profile_.memory) earliest(record.time);
    return base == TimeNs::Max() ? TimeNs::Zero() : base;
  }

  ExactMicros Ts(TimeNs time) const { return ExactMicros{(time - base_).ns()}; }
  static ExactMicros Dur(TimeNs start, TimeNs end) {
    return ExactMicros{std::max<int64_t>(0, (end - start).ns())};
  }

  void WriteHeader() {
    const ProfileCounters& c = profile_.counters;
    const LinkStats& l = linked_.stats;
    nlohmann::ordered_json unhandled = nlohmann::ordered_json::object();
    for (const auto& [kind, count] : c.unhandled_kinds) unhandled[kind] = count;
    const nlohmann::ordered_json other = {
        {"format", kProfileFormat.name},
        {"version", kProfileFormat.Version()},
        {"program", profile_.program},
        {"cupti_version", profile_.cupti_version},
        {"activity_kinds", profile_.enabled_kinds},
        {"api_calls_not_recorded", profile_.api_calls_not_recorded},
        {"capture_range", profile_.capture_range},
        {"capture_windows", profile_.capture_windows},
        {"flush_before_device_reset", profile_.flush_before_device_reset},
        {"device_reset_flushes", profile_.device_reset_flushes},
        {"records",
         {{"api_calls", profile_.api_calls.size()},
          {"kernels", profile_.kernels.size()},
          {"memcpys", profile_.memcpys.size()},
          {"memsets", profile_.memsets.size()},
          {"syncs", profile_.syncs.size()},
          {"cuda_events", profile_.cuda_events.size()},
          {"external_correlations", profile_.external_correlations.size()},
          {"markers", profile_.markers.size()},
          {"memory", profile_.memory.size()},
          {"overhead", c.overhead_records}}},
        {"lost",
         {{"dropped_records", c.dropped_records},
          {"declined_buffers", c.declined_buffers},
          {"invalid_records", c.invalid_records},
          {"zero_timestamp_records", c.zero_timestamp_records},
          {"unhandled_kinds", std::move(unhandled)}}},
        {"unlinked",
         {{"gpu_ops_without_launch", l.gpu_ops_without_launch},
          {"external_ids_without_api", l.external_ids_without_api},
          {"marker_ends_without_start", l.marker_ends_without_start},
          {"ranges_left_open", l.ranges_left_open},
          {"waits_without_event_record", l.waits_without_event_record}}},
        {"gpu_ops_in_nvtx_ranges", l.gpu_ops_in_ranges},
        {"buffers", c.buffers},
        {"buffer_bytes", c.buffer_bytes},
        {"profiling_overhead_us", c.overhead.ToMicrosecondsDouble()},
        {"device_memory_peaks", DeviceMemoryPeaks()}};
    nlohmann::ordered_json devices = nlohmann::ordered_json::array();
    for (const DeviceInfo& d : profile_.devices) {
      devices.push_back({{"id", d.id},
                         {"name", d.name},
                         {"totalGlobalMem", d.global_memory},
                         {"computeMajor", d.compute_major},
                         {"computeMinor", d.compute_minor},
                         {"maxThreadsPerBlock", d.max_threads_per_block},
                         {"maxThreadsPerMultiprocessor", d.max_threads_per_multiprocessor},
                         {"regsPerBlock", d.max_registers_per_block},
                         {"warpSize", d.warp_size},
                         {"sharedMemPerBlock", d.max_shared_memory_per_block},
                         {"numSms", d.multiprocessors}});
    }
    Append("{{\"otherData\":{},\n\"schemaVersion\":1,\n\"deviceProperties\":{},\n", other.dump(),
           devices.dump());
    if (profile_.rank >= 0) {
      Append("\"distributedInfo\":{{\"rank\":{},\"world_size\":{}}},\n", profile_.rank,
             std::max(profile_.world_size, profile_.rank + 1));
    }
    Append("\"baseTimeNanoseconds\":{},\n\"traceName\":{},\n\"traceEvents\":[", base_.ns(),
           Quote(profile_.program));
  }

  void WriteProcessNames() {
    std::set<uint32_t> processes;
    for (const ApiRecord& call : profile_.api_calls) processes.insert(call.process);
    for (const MarkerRange& range : linked_.ranges) processes.insert(range.process);
    for (const uint32_t process : processes) {
      Append(R"({}{{"name":"process_name","ph":"M","ts":0,"pid":{},"tid":0,"args":{{"name":{}}}}})",
             Separator(), process, Quote(profile_.program));
    }
    std::set<std::pair<uint32_t, uint32_t>> streams;
    const auto add = [&](uint32_t device, uint32_t stream) { streams.emplace(device, stream); };
    for (const KernelRecord& k : profile_.kernels) add(k.device, k.stream);
    for (const MemcpyRecord& m : profile_.memcpys) add(m.device, m.stream);
    for (const MemsetRecord& m : profile_.memsets) add(m.device, m.stream);
    std::set<uint32_t> devices;
    for (const DeviceMemoryPoint& peak : memory_.peaks) {  // a device with memory but no op
      if (std::none_of(streams.begin(), streams.end(),
                       [&](const auto& s) { return s.first == peak.device; }) &&
          devices.insert(peak.device).second) {
        Append(
            R"({}{{"name":"process_name","ph":"M","ts":0,"pid":{},"tid":0,"args":{{"name":"GPU {}"}}}})",
            Separator(), peak.device, peak.device);
      }
    }
    for (const auto& [device, stream] : streams) {
      if (devices.insert(device).second) {
        Append(
            R"({}{{"name":"process_name","ph":"M","ts":0,"pid":{},"tid":0,"args":{{"name":"GPU {}"}}}})",
            Separator(), device, device);
      }
      Append(
          R"({}{{"name":"thread_name","ph":"M","ts":0,"pid":{},"tid":{},"args":{{"name":"stream {}"}}}})",
          Separator(), device, stream, stream);
    }
  }

  void WriteRange(const MarkerRange& range) {
    const std::optional<EmitNvtxRange> op = ParseEmitNvtx(range.name);
    std::string args = range.domain.empty() ? "" : ",\"domain\":" + Quote(range.domain);
    if (op && !op->input_dims.empty()) args += ",\"Input Dims\":" + op->input_dims;
    if (op) args += ",\"nvtx\":" + Quote(range.name);
    Append(
        R"({}{{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
        Separator(), op ? "cpu_op" : "user_annotation", Quote(op ? op->op : range.name),
        range.process, range.thread, Ts(range.start), Dur(range.start, range.end),
        std::string_view(args).substr(args.empty() ? 0 : 1));
  }

  std::string ExternalIdArg(uint32_t api) const {
    if (api == kNoIndex || !linked_.api_external_id[api]) return "";
    return fmt::format(",\"External id\":{}", *linked_.api_external_id[api]);
  }

  void WriteApiCall(uint32_t a) {
    const ApiRecord& call = profile_.api_calls[a];
    Append(
        R"({}{{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"cbid":{},"correlation":{}{}}}}})",
        Separator(), call.domain == ApiDomain::kRuntime ? "cuda_runtime" : "cuda_driver",
        Quote(call.name), call.process, call.thread, Ts(call.start), Dur(call.start, call.end),
        call.cbid, call.correlation, ExternalIdArg(a));
  }

  // The GPU op's common args and its flow from the launch.
  template <typename Record>
  void WriteGpuOp(const Record& op, std::string_view category, const std::string& name,
                  const std::string& extra_args) {
    const uint32_t launch = linked_.Launch(LaunchCorrelation(op));
    Append(
        R"({}{{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"device":{},"context":{},"stream":{},"correlation":{}{}{}}}}})",
        Separator(), category, Quote(name), op.device, op.stream, Ts(op.start),
        Dur(op.start, op.end), op.device, op.context, op.stream, LaunchCorrelation(op),
        ExternalIdArg(launch), extra_args);
    if (launch == kNoIndex) return;
    const ApiRecord& call = profile_.api_calls[launch];
    Append(R"({}{{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"cat":"ac2g","name":"ac2g"}})",
           Separator(), LaunchCorrelation(op), call.process, call.thread, Ts(call.start));
    Append(
        R"({}{{"ph":"f","id":{},"pid":{},"tid":{},"ts":{},"cat":"ac2g","name":"ac2g","bp":"e"}})",
        Separator(), LaunchCorrelation(op), op.device, op.stream, Ts(op.start));
  }

  void WriteKernel(const KernelRecord& k) {
    WriteGpuOp(
        k, "kernel", DemangledName(k.name),
        fmt::format(
            R"(,"registers per thread":{},"shared memory":{},"grid":[{},{},{}],"block":[{},{},{}]{})",
            k.registers_per_thread, k.static_shared_memory + k.dynamic_shared_memory, k.grid[0],
            k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
            k.graph_id == 0 ? "" : fmt::format(",\"graph id\":{}", k.graph_id)));
  }

  void WriteMemcpy(const MemcpyRecord& m) {
    const int64_t ns = std::max<int64_t>(1, (m.end - m.start).ns());
    WriteGpuOp(
        m, "gpu_memcpy",
        fmt::format("Memcpy {} ({} -> {})", NameOf(kCopyKindNames, m.kind),
                    NameOf(kMemoryKindNames, m.source), NameOf(kMemoryKindNames, m.destination)),
        fmt::format(R"json(,"bytes":{},"memory bandwidth (GB/s)":{})json", m.bytes,
                    static_cast<double>(m.bytes) / static_cast<double>(ns)));
  }

  void WriteMemset(const MemsetRecord& m) {
    const int64_t ns = std::max<int64_t>(1, (m.end - m.start).ns());
    WriteGpuOp(m, "gpu_memset", "Memset (Device)",
               fmt::format(R"json(,"bytes":{},"memory bandwidth (GB/s)":{})json", m.bytes,
                           static_cast<double>(m.bytes) / static_cast<double>(ns)));
  }

  // Per device, the most memory allocated through CUDA at once in the profile (MEMORY2 records)
  // and when (µs from the trace's base time).
  nlohmann::ordered_json DeviceMemoryPeaks() const {
    nlohmann::ordered_json peaks = nlohmann::ordered_json::array();
    for (const DeviceMemoryPoint& peak : memory_.peaks) {
      peaks.push_back({{"device", peak.device},
                       {"bytes", peak.bytes},
                       {"at_us", static_cast<double>((peak.time - base_).ns()) / 1e3}});
    }
    return peaks;
  }

  // A counter track per device: the memory allocated through CUDA after each allocation or
  // release (what PyTorch's allocator reserves, and libraries' own).
  void WriteDeviceMemory() {
    for (const DeviceMemoryPoint& point : memory_.timeline) {
      Append(
          R"({}{{"ph":"C","name":"device memory allocated through CUDA","pid":{},"tid":0,"ts":{},"args":{{"bytes":{}}}}})",
          Separator(), point.device, Ts(point.time), point.bytes);
    }
  }

  void WriteSync(size_t s) {
    const SyncRecord& sync = profile_.syncs[s];
    const std::string_view kind = NameOf(kSyncNames, sync.type);
    std::string wait;
    if (const std::optional<EventOrigin>& origin = linked_.sync_event_origin[s]) {
      wait = fmt::format(R"(,"wait_on_stream":{},"wait_on_cuda_event_record_corr_id":{})",
                         origin->stream, origin->correlation);
    }
    const uint32_t device = profile_.DeviceOfContext(sync.context);
    Append(
        R"({}{{"ph":"X","cat":"cuda_sync","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"cuda_sync_kind":"{}","device":{},"context":{},"stream":{},"correlation":{},"cuda_event":{}{}{}}}}})",
        Separator(), kind, device, sync.stream, Ts(sync.start), Dur(sync.start, sync.end), kind,
        device, sync.context, sync.stream, sync.correlation, sync.cuda_event,
        ExternalIdArg(linked_.Launch(sync.correlation)), wait);
  }

  const Profile& profile_;
  const LinkedProfile linked_;
  const TimeNs base_;
  const DeviceMemory memory_;
};

}  // namespace

std::string DemangledName(const std::string& name) {
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : name;
}

void WriteKinetoTrace(std::ostream& out, const Profile& profile) {
  KinetoWriter(out, profile).Write();
}

Status WriteKinetoTraceFile(const std::string& path, const Profile& profile) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  WriteKinetoTrace(writer->stream(), profile);
  return writer->Commit();
}

}  // namespace dtsim::profiler
