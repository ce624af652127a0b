#include "sim/base/file_format.h"

#include <fmt/format.h>

#include <charconv>

#include "sim/base/strings.h"

namespace dtsim {
namespace {

// MAJOR of "MAJOR.MINOR" (both non-negative integers), or -1.
int MajorOf(std::string_view version) {
  int major = -1;
  int minor = -1;
  const char* end = version.data() + version.size();
  auto [dot, ec] = std::from_chars(version.data(), end, major);
  if (ec != std::errc() || dot == end || *dot != '.') return -1;
  auto [rest, ec_minor] = std::from_chars(dot + 1, end, minor);
  if (ec_minor != std::errc() || rest != end || major < 0 || minor < 0) return -1;
  return major;
}

Status CheckVersion(const Json& version, const FileFormat& format, const std::string& path) {
  int major = -1;
  if (version.is_string()) {
    major = MajorOf(version.get_ref<const std::string&>());
    if (major < 0) {
      return Error("expected a version \"MAJOR.MINOR\"", path, JsonValueForError(version));
    }
  } else if (version.is_number_integer()) {
    // The integer MAJOR of files written before the one convention.
    const bool same = version.is_number_unsigned()
                          ? version.get<uint64_t>() == static_cast<uint64_t>(format.major)
                          : version.get<int64_t>() == format.major;
    if (same) return Status::Ok();
  } else {
    return Error("expected a version \"MAJOR.MINOR\"", path, JsonValueForError(version));
  }
  if (major != format.major) {
    return Error(
        fmt::format("unsupported version of {} (this dtsim reads {}.x)", format.name, format.major),
        path, JsonValueForError(version));
  }
  return Status::Ok();
}

}  // namespace

std::string FileFormat::Version() const { return fmt::format("{}.{}", major, minor); }

OrderedJson FormatHeader(const FileFormat& format) {
  return {{"format", format.name}, {"version", format.Version()}};
}

Status CheckFormat(JsonObjectReader& root, const FileFormat& format) {
  DTSIM_ASSIGN_OR_RETURN(const std::string name, root.String("format"));
  if (name != format.name) {
    return Error(fmt::format("{}: expected format \"{}\"", format.what, format.name),
                 JsonChildPath(root.path(), "format"), Quote(name));
  }
  const std::string path = JsonChildPath(root.path(), "version");
  const Json* version = root.Find("version");
  if (version == nullptr) return Error("missing the version", path);
  return CheckVersion(*version, format, path);
}

Status CheckFormat(const Json& document, const FileFormat& format) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  return CheckFormat(root, format);
}

}  // namespace dtsim
