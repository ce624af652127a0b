#include "sim/base/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/testing/temp_dir.h"

namespace dtsim {
namespace {

namespace fs = std::filesystem;

using AtomicFileTest = testing_support::TempDirTest;

TEST_F(AtomicFileTest, WritesAndReadsBack) {
  const std::string path = Path("out.json");
  ASSERT_TRUE(WriteFileAtomically(path, "{\"a\": 1}\n").ok());
  EXPECT_EQ(*ReadFile(path), "{\"a\": 1}\n");
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesThePreviousFileAndNoTemporary) {
  const std::string path = Path("result.json");
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

// Regression (issue 26): `dtsim simulate same.json -o same.json` replaced the config.
TEST_F(AtomicFileTest, AFileThatWasReadIsNeverReplaced) {
  const std::string path = Path("config.json");
  ASSERT_TRUE(WriteFileAtomically(path, "config").ok());
  ASSERT_TRUE(ReadFile(path).ok());
  Status status = WriteFileAtomically(path, "result");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().ToString(),
            path +
                ": refusing to write an output over an input of this command: the input "
                "would be lost");
  // Another spelling and a link to it are the same file.
  fs::create_symlink(path, Path("link.json"));
  status = WriteFileAtomically(dir_.string() + "/./link.json", "result");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("(the same file as " + path + ")"), std::string::npos);
  EXPECT_EQ(*ReadFile(path), "config");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  // A file only written, never read, is replaced as before.
  ASSERT_TRUE(WriteFileAtomically(Path("out.json"), "1").ok());
  EXPECT_TRUE(WriteFileAtomically(Path("out.json"), "2").ok());
}

TEST_F(AtomicFileTest, UnwritableDirectoryIsAnErrorNamingThePath) {
  const std::string path = Path("missing/out.json");
  const Status status = WriteFileAtomically(path, "x");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().file(), path);
  EXPECT_NE(status.error().message().find("No such file or directory"), std::string::npos);
}

TEST_F(AtomicFileTest, ReadingADirectoryIsAnError) { EXPECT_FALSE(ReadFile(dir_.string()).ok()); }

}  // namespace
}  // namespace dtsim
