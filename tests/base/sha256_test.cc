#include "sim/base/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/base/atomic_file.h"
#include "tests/testing/temp_dir.h"

namespace dtsim {
namespace {

// FIPS 180-4's examples (NIST's "SHA256.pdf") and the classic million 'a'.
TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Fed in pieces of every size across the 64-byte block boundary, the digest is the same.
TEST(Sha256Test, PiecesHashLikeTheWhole) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  const std::string whole = Sha256Hex(text);
  for (size_t piece = 1; piece <= 130; ++piece) {
    Sha256 hash;
    for (size_t at = 0; at < text.size(); at += piece) hash.Update(text.substr(at, piece));
    EXPECT_EQ(hash.HexDigest(), whole) << piece;
  }
}

using Sha256FileTest = testing_support::TempDirTest;

TEST_F(Sha256FileTest, AFileHashesLikeItsContent) {
  const std::string path = Path("input.json");
  ASSERT_TRUE(WriteFileAtomically(path, "abc").ok());
  EXPECT_EQ(*Sha256OfFile(path), Sha256Hex("abc"));
  EXPECT_FALSE(Sha256OfFile(Path("missing.json")).ok());
}

}  // namespace
}  // namespace dtsim
