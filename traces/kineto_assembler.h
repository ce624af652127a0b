// Builds a Trace from traceEvents entries as the Kineto reader parses them, one at a time:
// complete events and B/E pairs become host events (ops, annotations, CUDA API calls), device
// events (kernels, copies, sets; NCCL kernels with their collective) and sync records; what
// cannot be used is counted by reason. Finish() sorts the steps, links launches to their GPU
// ops and infers the collectives whose args did not give a size.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traces/kineto_event.h"
#include "traces/trace.h"

namespace dtsim::traces {

class KinetoAssembler {
 public:
  explicit KinetoAssembler(Trace& trace) : trace_(trace) {}

  // Room for the events of a document of `json_bytes`, guessed generously (Kineto writes
  // 250-600 bytes per event; reserving only takes address space, and saves the copies and
  // page faults of growing vectors of hundreds of MB).
  void Reserve(uint64_t json_bytes);
  // traceEvents entries added so far.
  int64_t events() const { return trace_.stats.events; }
  void Add(RawEvent& event);
  void Drop(const std::string& reason, int64_t count = 1) { trace_.stats.dropped[reason] += count; }
  void Finish();

 private:
  struct Category {
    std::string ph;
    std::string cat;
    int64_t events = 0;
  };

  void CountCategory(const RawEvent& event);
  void BeginEnd(RawEvent& event);
  void Complete(RawEvent& event);
  uint32_t Thread(const RawEvent& event);
  uint32_t Shapes(const EventArgs& args);
  void Host(RawEvent& event, HostEventKind kind);
  void Device(RawEvent& event, std::string_view cat);
  uint32_t Collective(const EventArgs& args, graph::CommKind name_kind);
  void Sync(RawEvent& event);
  void LinkLaunches();
  void DescribeCollectives();

  Trace& trace_;
  std::vector<Category> categories_;  // few distinct (ph, cat) pairs; merged by Finish
  size_t last_category_ = 0;
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_index_;
  std::optional<std::pair<std::pair<int64_t, int64_t>, uint32_t>> last_thread_;
  std::unordered_map<std::string, uint32_t> shapes_index_;
  std::string shapes_key_;
  std::map<std::string, std::vector<RawEvent>> open_begins_;
};

}  // namespace dtsim::traces
