// A fresh directory per test, named after the test and removed afterwards; the inputs that
// earlier tests of the process read are forgotten (sim/base/input_files.h).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sim/base/input_files.h"

namespace dtsim::testing_support {

class TempDirTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dtsim_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    // Files an earlier test read may have been removed and their inodes reused by this one's.
    ForgetInputFiles();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace dtsim::testing_support
