// The layer list of a bottleneck ResNet (He et al. 2016; torchvision's v1.5 layout, stride on
// the 3×3 convolution), used for its parameter count and its op decomposition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace dtsim::models {

struct ConvLayer {
  std::string name;  // "stage2.block0.conv2", "stage2.block0.downsample", "stem"
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel = 1;  // square kernels
  int64_t stride = 1;
  int64_t in_size = 0;        // input height = width
  int64_t out_size = 0;       // output height = width
  bool residual_end = false;  // the block's last conv: its output joins the residual add
};

// Every convolution in forward order (each followed by BatchNorm; ReLU except before adds).
std::vector<ConvLayer> ResNetConvs(const ResNetSpec& spec);
// Channels entering the classifier (4 × width × 2^(stages − 1); 2048 for ResNet-50).
int64_t ResNetFeatures(const ResNetSpec& spec);
// The spatial size after the stem's 2× stride and the 2× max pool (56 for 224).
int64_t ResNetPooledSize(const ResNetSpec& spec);

}  // namespace dtsim::models
