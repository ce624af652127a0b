// PyTorch dtype names as the Kineto reader (collective sizes) and the op profile (op keys) both
// read them, from one table.
#include "traces/torch_dtype.h"

#include <gtest/gtest.h>

namespace dtsim::traces {
namespace {

TEST(TorchDtypeTest, SpellingsOfOneTypeAgree) {
  for (const char* name : {"float", "Float", "c10::Float", "float32"}) {
    ASSERT_TRUE(LookUpTorchDtype(name).has_value()) << name;
    EXPECT_EQ(LookUpTorchDtype(name)->bytes, 4) << name;
    EXPECT_EQ(LookUpTorchDtype(name)->dtype, DType::kFp32) << name;
  }
  EXPECT_EQ(LookUpTorchDtype("c10::BFloat16")->dtype, DType::kBf16);
  EXPECT_EQ(LookUpTorchDtype("c10::Half")->bytes, 2);
  EXPECT_EQ(LookUpTorchDtype("long int")->dtype, DType::kInt64);
  EXPECT_EQ(LookUpTorchDtype("Long")->bytes, 8);
  EXPECT_EQ(LookUpTorchDtype("c10::Float8_e4m3fn")->dtype, DType::kFp8);
  EXPECT_EQ(LookUpTorchDtype("unsigned char")->dtype, DType::kInt8);
}

TEST(TorchDtypeTest, SizedButUnpricedAndUnknownTypes) {
  // bool and complex have a size (a collective over them moves bytes) but no priced DType.
  EXPECT_EQ(LookUpTorchDtype("bool")->bytes, 1);
  EXPECT_FALSE(LookUpTorchDtype("bool")->dtype.has_value());
  EXPECT_EQ(LookUpTorchDtype("ComplexDouble")->bytes, 16);
  EXPECT_FALSE(LookUpTorchDtype("c10::qint8").has_value());
  EXPECT_FALSE(LookUpTorchDtype("").has_value());
}

}  // namespace
}  // namespace dtsim::traces
