#include "models/eager_kernels.h"

namespace dtsim::models {
namespace {

constexpr double kFp32 = 4;

}  // namespace

StreamBytes RmsNormBytes(double e, bool eager) {
  if (!eager) return {2 * e, 3 * e};
  const double cast = e == kFp32 ? 0 : e + kFp32;  // x.float() and type_as(x)
  return {.forward = cast + 8 + 4 + 8 + cast + 2 * e,
          .backward = 6 * e + cast + 24 + 4 + 28 + 12 + cast};
}

StreamBytes SwigluBytes(double e, bool eager) {
  return eager ? StreamBytes{5 * e, 9 * e} : StreamBytes{3 * e, 5 * e};
}

StreamBytes RotaryBytes(double e, bool eager) {
  const double bytes = eager ? 2 * e + 4 * kFp32 : 2 * e;
  return {bytes, bytes};
}

}  // namespace dtsim::models
