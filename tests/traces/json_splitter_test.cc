// The JSON splitter: every value of a document comes out as exactly its text, however the
// input arrives (one byte at a time, in odd pieces, in one go), with strings, escapes and
// brackets inside strings crossing the 64-byte scan blocks; limits and truncation are errors
// that name the byte.
#include "traces/json_splitter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/base/json_reader.h"

namespace dtsim::traces {
namespace {

// A streambuf that hands out at most `piece` bytes per read.
class PieceBuffer : public std::streambuf {
 public:
  PieceBuffer(std::string text, size_t piece) : text_(std::move(text)), piece_(piece) {}

 protected:
  std::streamsize xsgetn(char* out, std::streamsize count) override {
    const size_t n = std::min({static_cast<size_t>(count), piece_, text_.size() - at_});
    std::copy_n(text_.data() + at_, n, out);
    at_ += n;
    return static_cast<std::streamsize>(n);
  }
  int_type underflow() override { return traits_type::eof(); }

 private:
  std::string text_;
  size_t piece_;
  size_t at_ = 0;
};

// The texts of a root array's elements, or the error.
struct Split {
  std::vector<std::string> values;
  std::vector<uint64_t> offsets;
  std::optional<JsonSplitError> error;
};

Split SplitArray(const std::string& document, size_t piece, size_t max_value = 1 << 20,
                 int max_depth = kMaxJsonDepth) {
  PieceBuffer in(document, piece);
  JsonSplitter splitter(in, max_value, max_depth);
  Split split;
  if (!splitter.Consume('[')) {
    split.error = JsonSplitError{"no array"};
    return split;
  }
  if (splitter.Consume(']')) return split;
  for (;;) {
    JsonSlice slice;
    if ((split.error = splitter.Next(1, slice))) return split;
    split.values.emplace_back(slice.text());
    split.offsets.push_back(slice.offset);
    if (splitter.Consume(',')) continue;
    if (!splitter.Consume(']')) split.error = JsonSplitError{"no ']'"};
    return split;
  }
}

TEST(JsonSplitter, HandsOutEachValueAsItsTextWhateverThePieces) {
  const std::vector<std::string> values = {
      R"({"name": "a \"quoted\" {brace} [bracket]", "args": {"x": [1, 2, {"y": null}]}})",
      R"("a string with \\ and \\\" and \u00e9")",
      "-12.5e3",
      "true",
      "[]",
      "{}",
      R"(["\\", "\\\\", "]", "}"])",
      std::string(R"({"long": ")") + std::string(300, 'x') + R"(\\"})",
  };
  std::string document = "[ ";
  for (size_t i = 0; i < values.size(); ++i) document += (i ? " ,\n " : "") + values[i];
  document += " ]";
  for (const size_t piece :
       {size_t{1}, size_t{3}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, document.size()}) {
    const Split split = SplitArray(document, piece);
    ASSERT_FALSE(split.error) << "piece " << piece << ": " << split.error->message;
    EXPECT_EQ(split.values, values) << "piece " << piece;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(document.substr(split.offsets[i], values[i].size()), values[i]);
    }
  }
}

// A long document: the buffer moves what is left to its start, grows to its largest read,
// and beyond for a value larger than that (3 MiB here).
TEST(JsonSplitter, ReadsLongDocumentsAndValuesLargerThanItsBuffer) {
  std::vector<std::string> values;
  values.reserve(3001);
  for (int i = 0; i < 3000; ++i) {
    values.push_back(R"({"i": )" + std::to_string(i) + R"(, "pad": ")" +
                     std::string(static_cast<size_t>(300 + i % 700), 'p') + R"("})");
  }
  std::string large((size_t{3} << 20) + 2, 'x');  // a string of 3 MiB
  large.front() = large.back() = '"';
  values.insert(values.begin() + 1500, large);
  std::string document = "[";
  for (size_t i = 0; i < values.size(); ++i) document += (i ? "," : "") + values[i];
  document += "]";
  for (const size_t piece : {size_t{4096}, size_t{1} << 20}) {
    const Split split = SplitArray(document, piece, /*max_value=*/size_t{4} << 20);
    ASSERT_FALSE(split.error) << split.error->message;
    EXPECT_EQ(split.values, values);
  }
}

// Random documents: every element nlohmann writes (with escapes and brackets in strings,
// nesting, all scalar kinds) comes back as the same value.
TEST(JsonSplitter, AgreesWithNlohmannOnRandomDocuments) {
  std::mt19937 random(7);
  const std::string alphabet = "ab\"\\{}[],: \n\t/\x01z";
  const auto random_string = [&] {
    std::string text;
    const size_t size = random() % 90;
    for (size_t i = 0; i < size; ++i) text.push_back(alphabet[random() % alphabet.size()]);
    return text;
  };
  std::function<Json(int)> random_value = [&](int depth) -> Json {
    switch (random() % (depth > 4 ? 4 : 6)) {
      case 0:
        return random_string();
      case 1:
        return static_cast<int64_t>(random()) - (int64_t{1} << 30);
      case 2:
        return static_cast<double>(random()) / 7.0;
      case 3:
        return random() % 2 == 0 ? Json(nullptr) : Json(random() % 2 == 0);
      case 4: {
        Json array = Json::array();
        for (size_t i = random() % 5; i > 0; --i) array.push_back(random_value(depth + 1));
        return array;
      }
      default: {
        Json object = Json::object();
        for (size_t i = random() % 5; i > 0; --i) object[random_string()] = random_value(depth + 1);
        return object;
      }
    }
  };
  for (int round = 0; round < 50; ++round) {
    Json document = Json::array();
    for (int i = 0; i < 40; ++i) document.push_back(random_value(0));
    const std::string text = document.dump(round % 2 == 0 ? -1 : 1);
    const Split split = SplitArray(text, 1 + random() % 200);
    ASSERT_FALSE(split.error) << split.error->message;
    ASSERT_EQ(split.values.size(), document.size());
    for (size_t i = 0; i < document.size(); ++i) {
      EXPECT_EQ(Json::parse(split.values[i]), document[i]) << split.values[i];
    }
  }
}

TEST(JsonSplitter, LimitsAndTruncationAreErrorsNamingTheByte) {
  // Nesting: the 4th bracket opens level 4, past a limit of 3.
  Split split = SplitArray("[[[[1]]]]", 2, 1 << 20, /*max_depth=*/3);
  ASSERT_TRUE(split.error);
  EXPECT_FALSE(split.error->syntax);
  EXPECT_EQ(split.error->message, "JSON nested deeper than 3 levels");
  EXPECT_EQ(split.error->offset, 3u);
  // A value longer than the limit, found while reading it.
  split = SplitArray("[\"" + std::string(5000, 'x') + "\"]", 100, /*max_value=*/1000);
  ASSERT_TRUE(split.error);
  EXPECT_FALSE(split.error->syntax);
  EXPECT_NE(split.error->message.find("a JSON value of more than"), std::string::npos);
  // The input ends inside a string, an object, before a value.
  for (const std::string& truncated :
       {std::string(R"([{"a": "b)"), std::string(R"([{"a": [1)"), std::string("[1, ")}) {
    split = SplitArray(truncated, 3);
    ASSERT_TRUE(split.error) << truncated;
    EXPECT_TRUE(split.error->syntax);
  }
  split = SplitArray(R"([{"a": "b)", 3);  // the string is inside the object
  EXPECT_EQ(split.error->message, "the document ends inside the value that starts at byte 1");
  // A byte that cannot start a value.
  split = SplitArray("[1, ]", 3);
  ASSERT_TRUE(split.error);
  EXPECT_EQ(split.error->message, "']' where a value was expected");
  EXPECT_EQ(split.error->offset, 4u);
}

}  // namespace
}  // namespace dtsim::traces
