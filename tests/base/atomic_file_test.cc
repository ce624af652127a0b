#include "sim/base/atomic_file.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace dtsim {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtsim_atomic_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReadsBack) {
  const std::string path = (dir_ / "out.json").string();
  ASSERT_TRUE(WriteFileAtomically(path, "{\"a\": 1}\n").ok());
  EXPECT_EQ(*ReadFile(path), "{\"a\": 1}\n");
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesThePreviousFileAndNoTemporary) {
  const std::string path = (dir_ / "result.json").string();
  ASSERT_TRUE(WriteFileAtomically(path, "good").ok());
  {
    auto writer = AtomicFileWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->stream() << "half-writ";
    // Dropped without Commit(), as when the writer fails midway.
  }
  EXPECT_EQ(*ReadFile(path), "good");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(AtomicFileTest, UnwritableDirectoryIsAnErrorNamingThePath) {
  const std::string path = (dir_ / "missing" / "out.json").string();
  const Status status = WriteFileAtomically(path, "x");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().file(), path);
  EXPECT_NE(status.error().message().find("No such file or directory"), std::string::npos);
}

TEST_F(AtomicFileTest, ReadingADirectoryIsAnError) {
  EXPECT_FALSE(ReadFile(dir_.string()).ok());
}

}  // namespace
}  // namespace dtsim
