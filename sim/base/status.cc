#include "sim/base/status.h"

namespace dtsim {

Error Error::InFile(std::string file) && {
  if (file_.empty()) file_ = std::move(file);
  return std::move(*this);
}

Error Error::Under(const std::string& outer) && {
  if (outer.empty()) return std::move(*this);
  if (location_.empty()) {
    location_ = outer;
  } else if (location_.front() == '[') {
    location_ = outer + location_;
  } else {
    location_ = outer + "." + location_;
  }
  return std::move(*this);
}

std::string Error::ToString() const {
  std::string out;
  for (const std::string* part : {&file_, &location_}) {
    if (!part->empty()) out += *part + ": ";
  }
  out += message_;
  if (!value_.empty()) out += ", got " + value_;
  return out;
}

}  // namespace dtsim
