// CUPTI activity records to dtsim's typed records (profiler/profile.h): the one place that
// reads CUPTI's structs. The struct versions are those of the CUPTI headers this builds
// against (CUDA 13: Kernel10, Memcpy6, Memset4, Synchronization2, CudaEvent2, Marker2,
// Device5, Context3, Overhead3); only fields whose offsets have not moved since Kernel4 /
// Memcpy5 are read, pinned by static_asserts, so records a newer CUPTI writes read the same.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <cupti.h>

#include "profiler/profile.h"
#include "sim/base/status.h"

namespace dtsim::profiler {

// Converts records into a Profile, caching API function names by (domain, cbid).
class CuptiRecordConverter {
 public:
  explicit CuptiRecordConverter(Profile& profile) : profile_(profile) {}

  // One record. Kinds dtsim does not use are counted in Profile::counters.unhandled_kinds;
  // GPU records whose timestamps CUPTI could not collect (start == end == 0) are counted in
  // zero_timestamp_records and left out.
  void Add(const CUpti_Activity& record);

  // Every record of a completed buffer, walked with cuptiActivityGetNextRecord. A walk that
  // stops at an invalid record is counted (invalid_records) and keeps what came before.
  void AddBuffer(uint8_t* buffer, size_t valid_size);

 private:
  const std::string& ApiName(CUpti_ActivityKind kind, uint32_t cbid);

  Profile& profile_;
  std::map<std::pair<int, uint32_t>, std::string> api_names_;
};

// The CUPTI kind name of a record kind ("CONCURRENT_KERNEL"), for counts and messages.
std::string ActivityKindNameOf(CUpti_ActivityKind kind);

}  // namespace dtsim::profiler
