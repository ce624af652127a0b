#include "sim/base/gzip.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"

namespace dtsim {
namespace {

using GzipTest = testing_support::TempDirTest;

// A JSON text long and repetitive enough to span several deflate chunks and compress well.
std::string LongJson() {
  std::string text = "[";
  for (int i = 0; i < 100000; ++i) {
    if (i > 0) text += ',';
    text += std::to_string(i % 977);
  }
  return text + "]";
}

TEST_F(GzipTest, AnOutputNamedGzIsWrittenCompressedAndReadsBackAsJson) {
  const std::string path = Path("timeline.json.gz");
  const std::string text = LongJson();
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  const std::string bytes = *ReadFile(path);
  EXPECT_TRUE(LooksGzipped(bytes));
  EXPECT_LT(bytes.size(), text.size() / 3);  // ~490 KB of digits compresses several-fold
  EXPECT_EQ(*InflateGzip(bytes, path), text);
  Expected<Json> json = ReadJsonFile(path);
  ASSERT_TRUE(json.ok()) << json.error().ToString();
  EXPECT_EQ(json->size(), 100000u);
  EXPECT_EQ((*json)[978], 1);
}

TEST_F(GzipTest, AnOutputWithAnyOtherNameIsWrittenPlain) {
  const std::string path = Path("result.json");
  ASSERT_TRUE(WriteFileAtomically(path, "{\"a\": 1}").ok());
  EXPECT_EQ(*ReadFile(path), "{\"a\": 1}");
  EXPECT_FALSE(WantsGzip("result.json"));
  EXPECT_FALSE(WantsGzip(".gz"));
  EXPECT_TRUE(WantsGzip("t.gz"));
}

TEST_F(GzipTest, ConcatenatedMembersReadAsOneStreamAsGunzipReadsThem) {
  const std::string a = Path("a.gz");
  const std::string b = Path("b.gz");
  ASSERT_TRUE(WriteFileAtomically(a, "{\"x\": ").ok());
  ASSERT_TRUE(WriteFileAtomically(b, "[1, 2]}").ok());
  const std::string both = *ReadFile(a) + *ReadFile(b);
  EXPECT_EQ(*InflateGzip(both, "both.gz"), "{\"x\": [1, 2]}");
}

TEST_F(GzipTest, ATruncatedFileIsAnErrorNamingItNotAShorterInput) {
  const std::string path = Path("config.json.gz");
  ASSERT_TRUE(WriteFileAtomically(path, LongJson()).ok());
  std::string bytes = *ReadFile(path);
  bytes.resize(bytes.size() / 2);
  Expected<std::string> text = InflateGzip(bytes, path);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().ToString().find("config.json.gz"), std::string::npos);
  EXPECT_NE(text.error().ToString().find("truncated or corrupt gzip"), std::string::npos);
}

TEST_F(GzipTest, CorruptDataIsAnError) {
  const std::string path = Path("x.gz");
  ASSERT_TRUE(WriteFileAtomically(path, LongJson()).ok());
  std::string bytes = *ReadFile(path);
  for (size_t i = 20; i < 60; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  EXPECT_FALSE(InflateGzip(bytes, "x.gz").ok());
}

// A small file that claims far more than a JSON input can be (a "gzip bomb") stops at the cap.
TEST_F(GzipTest, InflatingPastTheCapIsAnError) {
  const std::string path = Path("big.gz");
  ASSERT_TRUE(WriteFileAtomically(path, std::string(size_t{1} << 20, ' ')).ok());
  Expected<std::string> text = InflateGzip(*ReadFile(path), path, size_t{1} << 16);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().ToString().find("inflates to more than 65536 bytes"), std::string::npos);
}

TEST_F(GzipTest, AnUncommittedCompressedWriteLeavesNothing) {
  const std::string path = Path("t.json.gz");
  {
    Expected<std::unique_ptr<AtomicFileWriter>> writer = AtomicFileWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->stream() << LongJson();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace dtsim
