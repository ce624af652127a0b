#include "strategies/diloco.h"

#include <fmt/format.h>

#include <array>

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 4> kOuterPrecisionNames = {"fp32", "bf16", "fp8", "fp4"};
constexpr std::array<std::string_view, 2> kOuterStateNames = {"host", "gpu"};

Expected<SiteLink> SiteLinkFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  SiteLink link;
  DTSIM_ASSIGN_OR_RETURN(link.bandwidth, reader.Rate("bandwidth"));
  if (link.bandwidth.bits_per_second() == 0) {
    return Error("must be above 0", JsonChildPath(path, "bandwidth"),
                 JsonValueForError(*reader.Find("bandwidth")));
  }
  if (reader.Has("latency")) {
    DTSIM_ASSIGN_OR_RETURN(link.latency, reader.Duration("latency"));
  }
  reader.Allow("latency");
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return link;
}

}  // namespace

std::span<const std::string_view> OuterPrecisionNames() { return kOuterPrecisionNames; }
std::span<const std::string_view> OuterStateNames() { return kOuterStateNames; }

double OuterPrecisionBytes(OuterPrecision precision) {
  switch (precision) {
    case OuterPrecision::kFp32:
      return 4;
    case OuterPrecision::kBf16:
      return 2;
    case OuterPrecision::kFp8:
      return 1;
    case OuterPrecision::kFp4:
      return 0.5;
  }
  return 4;
}

Expected<DilocoConfig> DilocoFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  DilocoConfig config;
  if (!reader.Has("replicas"))
    return Error("missing required field", JsonChildPath(path, "replicas"));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("replicas", config.replicas, 2));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("sync_every", config.sync_every, 1));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("fragments", config.fragments, 1));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("overlap_steps", config.overlap_steps, 0));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("precision", kOuterPrecisionNames, config.precision));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("outer_state", kOuterStateNames, config.outer_state));
  if (config.sync_every % config.fragments != 0) {
    return Error(fmt::format("the {} fragments are synchronized {} steps apart each: sync_every "
                             "must be a multiple of fragments",
                             config.fragments, config.sync_every / config.fragments),
                 JsonChildPath(path, "sync_every"), std::to_string(config.sync_every));
  }
  // One fragment's synchronization ends before the next one's starts, so they never share the
  // network (Streaming DiLoCo's τ is at most the steps between fragments).
  const int64_t apart = config.sync_every / config.fragments;
  if (config.overlap_steps > apart) {
    return Error(fmt::format("a synchronization may run behind at most the {} steps until the "
                             "next fragment's (sync_every / fragments)",
                             apart),
                 JsonChildPath(path, "overlap_steps"), std::to_string(config.overlap_steps));
  }
  if (const Json* link = reader.Find("link")) {
    DTSIM_ASSIGN_OR_RETURN(config.link, SiteLinkFromJson(*link, JsonChildPath(path, "link")));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return config;
}

}  // namespace dtsim::strategies
