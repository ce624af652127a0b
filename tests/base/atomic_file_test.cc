#include "sim/base/atomic_file.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sim/base/input_files.h"
#include "sim/base/sha256.h"
#include "sim/base/temp_files.h"
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

// Regression: a 250-byte name is legal, and its temporary file "<name>.tmp-<pid>" was not
// ("File name too long", after the work). A name past 255 bytes is refused before any.
TEST_F(AtomicFileTest, ALongLegalNameIsWrittenAndATooLongOneRefusedFirst) {
  const std::string longest = Path(std::string(250, 'a') + ".json");  // 255 bytes
  ASSERT_TRUE(WriteFileAtomically(longest, "{}").ok());
  EXPECT_EQ(*ReadFile(longest), "{}");
  ForgetInputFiles();                                    // read back here, not an input
  ASSERT_TRUE(WriteFileAtomically(longest, "[]").ok());  // replacing it too
  EXPECT_EQ(*ReadFile(longest), "[]");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  const std::string too_long = Path(std::string(251, 'a') + ".json");
  const Status refused = CheckOutputPath(too_long);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            "the file name is 256 bytes, past the 255 a file system takes");
}

// Regression: a path holding a NUL byte (a config's "\u0000", a Python str) opened the file
// named by what comes before the NUL: dtsim.simulate("c.json\x00x") simulated c.json.
TEST_F(AtomicFileTest, APathWithANulByteIsNoFile) {
  const std::string path = Path("c.json");
  ASSERT_TRUE(WriteFileAtomically(path, "{}").ok());
  const std::string with_nul = path + std::string(1, '\0') + "x";
  const Expected<std::string> read = ReadFile(with_nul);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().message(),
            fmt::format("a path with a NUL byte at offset {}: no file is named so", path.size()));
  EXPECT_THAT(read.error().value(), testing::HasSubstr("c.json\\u0000x"));
  const Status written = WriteFileAtomically(with_nul, "1");
  ASSERT_FALSE(written.ok());
  EXPECT_THAT(written.error().message(), testing::HasSubstr("a path with a NUL byte"));
  EXPECT_EQ(*ReadFile(path), "{}");
}

// "-" is standard input or output to other tools: `dtsim simulate C -o -` wrote a file named
// "-" silently, and reading "-" said only "cannot open". Outputs are refused, inputs say where
// the stream is; a file that is named "-" still reads, and ./- writes one.
TEST_F(AtomicFileTest, ADashIsNotAStream) {
  struct InDirectory {  // back to where the test started, whichever assertion ends it
    explicit InDirectory(const fs::path& dir) : before(fs::current_path()) {
      fs::current_path(dir);
    }
    ~InDirectory() { fs::current_path(before); }
    fs::path before;
  } in_temp_dir(Path(""));
  const Status written = WriteFileAtomically("-", "1");
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().ToString(),
            "-: \"-\" is not standard output here: give /dev/stdout for the stream, or ./- for "
            "a file so named");
  EXPECT_FALSE(fs::exists("-"));
  const Expected<std::string> read = ReadFile("-");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().ToString(), "-: no file is named \"-\" (standard input is /dev/stdin)");
  ASSERT_TRUE(WriteFileAtomically("./-", "1").ok());
  const Expected<std::string> named = ReadFile("-");
  ASSERT_TRUE(named.ok()) << named.error().ToString();
  EXPECT_EQ(*named, "1");
}

// Regression: as root, `dtsim simulate C -o /dev/full` renamed its temporary file over the
// device, leaving a 7 kB regular file at /dev/full (and `-o /dev/null` would do the same to
// /dev/null). Devices are written in place and never replaced.
TEST_F(AtomicFileTest, ADeviceIsWrittenInPlaceNeverReplaced) {
  ASSERT_TRUE(fs::is_character_file("/dev/null"));
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "result").ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(WritesInPlace("/dev/null"));
  EXPECT_TRUE(WritesInPlace("/dev/stdout"));
  EXPECT_FALSE(WritesInPlace(Path("out.json")));
  EXPECT_FALSE(WritesInPlace("/dev/shm/out.json"));  // an ordinary file system
  // Reading /dev/null does not make it an input that an output would clobber.
  ASSERT_TRUE(ReadFile("/dev/null").ok());
  EXPECT_TRUE(WriteFileAtomically("/dev/null", "result").ok());
}

TEST_F(AtomicFileTest, AFullDeviceIsAWriteErrorNamingTheReason) {
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const Status status = WriteFileAtomically("/dev/full", std::string(1 << 20, 'x'));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().ToString(), "/dev/full: write failed: No space left on device");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST_F(AtomicFileTest, NothingIsCreatedUnderDevOrProc) {
  for (const std::string path : {"/dev/dtsim-no-such-device.json", "/proc/dtsim.json"}) {
    const Status status = WriteFileAtomically(path, "x");
    ASSERT_FALSE(status.ok()) << path;
    EXPECT_EQ(status.error().ToString(),
              path + ": no such device or file (outputs are not created under /dev or /proc)");
    EXPECT_EQ(status.error().ToString(), CheckOutputPath(path).error().ToString());
    EXPECT_FALSE(fs::exists(path));
  }
}

TEST_F(AtomicFileTest, ADirectoryIsRefusedBeforeWriting) {
  const Status status = CheckOutputPath(dir_.string());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().ToString(), dir_.string() + ": is a directory, not a file");
  EXPECT_FALSE(AtomicFileWriter::Open(dir_.string()).ok());
}

TEST_F(AtomicFileTest, ALinkToAFileIsFollowedAndStaysALink) {
  ASSERT_TRUE(WriteFileAtomically(Path("run5.json"), "old").ok());
  fs::create_symlink("run5.json", Path("latest.json"));
  ASSERT_TRUE(WriteFileAtomically(Path("latest.json"), "new").ok());
  EXPECT_TRUE(fs::is_symlink(Path("latest.json")));
  EXPECT_EQ(*ReadFile(Path("run5.json")), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  // A dangling link is replaced by the file, as before.
  fs::create_symlink("missing.json", Path("dangling.json"));
  ASSERT_TRUE(WriteFileAtomically(Path("dangling.json"), "x").ok());
  EXPECT_FALSE(fs::is_symlink(Path("dangling.json")));
}

TEST_F(AtomicFileTest, APipeIsWrittenInPlace) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = *ReadFile(fifo); });
  const Status status = WriteFileAtomically(fifo, "streamed");
  if (!status.ok()) std::ofstream(fifo).close();  // the reader would wait for a writer forever
  reader.join();
  ASSERT_TRUE(status.ok()) << status.error().ToString();
  EXPECT_EQ(received, "streamed");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// Ctrl-C or a kill while a large output is written: the temporary file goes with the process
// (it left a 1 GB "timeline.json.tmp-<pid>"), and the process still ends by that signal.
TEST_F(AtomicFileTest, ASignalRemovesTheTemporaryFileAndStillEndsTheProcess) {
  // "fast": the child is a fork of this test, writing in this test's directory (a "threadsafe"
  // child re-runs the test from the start, in a directory named after its own pid).
  GTEST_FLAG_SET(death_test_style, "fast");
  const std::string path = Path("timeline.json");
  for (const int signal_number : {SIGTERM, SIGINT}) {
    EXPECT_EXIT(
        {
          RemoveTemporaryFilesOnSignals();
          auto writer = AtomicFileWriter::Open(path);
          if (!writer.ok()) std::_Exit(3);
          (*writer)->stream() << std::string(1 << 20, 'x');
          (*writer)->stream().flush();
          std::raise(signal_number);
          std::_Exit(4);  // not reached
        },
        testing::KilledBySignal(signal_number), "");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0)
        << strsignal(signal_number);
  }
  // A signal the process ignores (a background job's SIGINT, nohup's SIGHUP) stays ignored.
  EXPECT_EXIT(
      {
        std::signal(SIGHUP, SIG_IGN);
        RemoveTemporaryFilesOnSignals();
        std::raise(SIGHUP);
        std::_Exit(0);
      },
      testing::ExitedWithCode(0), "");
}

// /dev/zero given as a config grew the process by 150 MB a second until the kernel killed it.
// A text reader refuses a binary stream at once; any file past 1 GiB is refused by its size.
TEST_F(AtomicFileTest, EndlessAndHugeInputsAreRefused) {
  for (const std::string device : {"/dev/zero", "/dev/urandom"}) {
    const auto read = ReadFile(device, FileContent::kTextOrGzip);
    ASSERT_FALSE(read.ok()) << device;
    EXPECT_THAT(read.error().ToString(),
                testing::StartsWith(device + ": binary data (a NUL byte at offset "));
  }
  // A sparse file one byte past the limit: refused by its size, without reading it.
  const std::string huge = Path("huge.json");
  { std::ofstream(huge) << "{}"; }
  fs::resize_file(huge, kMaxInputFileBytes + 1);
  const auto read = ReadFile(huge);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().ToString(),
            huge +
                ": is 1.00 GiB (1073741825 bytes); dtsim reads files of at most 1 GiB (no "
                "config, table, trace index or result is larger)");
  // A regular file with a NUL byte is the parser's to judge (its message names line and column).
  ASSERT_TRUE(WriteFileAtomically(Path("nul.json"), std::string("{\0}", 3)).ok());
  EXPECT_TRUE(ReadFile(Path("nul.json"), FileContent::kTextOrGzip).ok());
}

// `yes | dtsim simulate /dev/stdin` read a gigabyte of "y" before the size limit: a JSON reader
// refuses a stream whose first character cannot begin JSON, after its first chunk.
TEST_F(AtomicFileTest, AStreamThatCannotBeJsonIsRefusedAtItsStart) {
  const auto read_fifo = [&](const std::string& text) {
    const std::string fifo = Path("stream.fifo");
    fs::remove(fifo);
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] { std::ofstream(fifo) << text; });
    const auto read = ReadFile(fifo, FileContent::kJsonOrGzip);  // opens it, and reads it all
    writer.join();
    return read;
  };
  std::string yes;
  for (int i = 0; i < 1000; ++i) yes += "y\n";
  const auto refused = read_fifo(yes);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "not JSON: it starts with 'y' at offset 0");
  const auto json = read_fifo(" \n [1, 2]");
  ASSERT_TRUE(json.ok()) << json.error().ToString();
  EXPECT_EQ(*json, " \n [1, 2]");
}

// What a pipe held is digested as it is read: the provenance of `dtsim simulate <(jq ...)`
// recorded the SHA-256 of nothing (the pipe was at its end when it was read again).
TEST_F(AtomicFileTest, APipeReadWholeKeepsTheDigestOfWhatItHeld) {
  const std::string fifo = Path("config.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "{\"a\": 1}"; });
  const auto read = ReadFile(fifo, FileContent::kTextOrGzip);
  if (!read.ok()) std::ifstream(fifo).close();  // the writer would wait for a reader forever
  writer.join();
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(*read, "{\"a\": 1}");
  const std::optional<StreamDigest> digest = InputStreamDigest(fifo);
  ASSERT_TRUE(digest.has_value());
  EXPECT_EQ(digest->sha256, Sha256Hex("{\"a\": 1}"));
  EXPECT_EQ(digest->bytes, 8u);
  ASSERT_TRUE(WriteFileAtomically(Path("plain.json"), "{}").ok());
  ASSERT_TRUE(ReadFile(Path("plain.json")).ok());
  EXPECT_FALSE(InputStreamDigest(Path("plain.json")).has_value());  // read again when needed
}

}  // namespace
}  // namespace dtsim
