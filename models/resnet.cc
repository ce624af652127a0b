#include "models/resnet.h"

#include <fmt/format.h>

namespace dtsim::models {
namespace {

constexpr int64_t kExpansion = 4;  // bottleneck output channels = 4 × its width

int64_t ConvOut(int64_t size, int64_t kernel, int64_t stride) {
  const int64_t padding = kernel / 2;
  return (size + 2 * padding - kernel) / stride + 1;
}

ConvLayer Conv(std::string name, int64_t in, int64_t out, int64_t kernel, int64_t stride,
               int64_t size) {
  return {.name = std::move(name),
          .in_channels = in,
          .out_channels = out,
          .kernel = kernel,
          .stride = stride,
          .in_size = size,
          .out_size = ConvOut(size, kernel, stride)};
}

}  // namespace

int64_t ResNetFeatures(const ResNetSpec& spec) {
  return kExpansion * spec.width * (int64_t{1} << (spec.blocks.size() - 1));
}

int64_t ResNetPooledSize(const ResNetSpec& spec) {
  return ConvOut(ConvOut(spec.image_size, 7, 2), 3, 2);
}

std::vector<ConvLayer> ResNetConvs(const ResNetSpec& spec) {
  std::vector<ConvLayer> convs;
  convs.push_back(Conv("stem", spec.in_channels, spec.width, 7, 2, spec.image_size));
  int64_t channels = spec.width;
  int64_t size = ResNetPooledSize(spec);
  for (size_t stage = 0; stage < spec.blocks.size(); ++stage) {
    const int64_t width = spec.width << stage;
    for (int block = 0; block < spec.blocks[stage]; ++block) {
      const int64_t stride = (block == 0 && stage > 0) ? 2 : 1;
      const std::string prefix = fmt::format("stage{}.block{}", stage + 1, block);
      convs.push_back(Conv(prefix + ".conv1", channels, width, 1, 1, size));
      convs.push_back(Conv(prefix + ".conv2", width, width, 3, stride, size));
      const int64_t out_size = convs.back().out_size;
      convs.push_back(Conv(prefix + ".conv3", width, kExpansion * width, 1, 1, out_size));
      convs.back().residual_end = true;
      if (block == 0) {
        convs.push_back(
            Conv(prefix + ".downsample", channels, kExpansion * width, 1, stride, size));
      }
      channels = kExpansion * width;
      size = out_size;
    }
  }
  return convs;
}

}  // namespace dtsim::models
