#include "traces/json_splitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sim/base/strings.h"

namespace dtsim::traces {
namespace {

// The buffer starts at kFirstBytes (a small trace, or a fuzzer's input, pays for no more) and
// doubles when it fills, up to kMaxReadBytes, and beyond while one value and the room for a
// read of kMinReadBytes do not fit; a read takes what is free, up to kMaxReadBytes.
constexpr size_t kFirstBytes = size_t{64} << 10;
constexpr size_t kMinReadBytes = size_t{16} << 10;
constexpr size_t kMaxReadBytes = size_t{1} << 20;

enum ByteClass : uint8_t { kPlain, kQuote, kOpen, kClose, kSpace, kDelimiter };

constexpr std::array<uint8_t, 256> MakeClasses() {
  std::array<uint8_t, 256> classes{};
  classes['"'] = kQuote;
  classes['{'] = kOpen;
  classes['['] = kOpen;
  classes['}'] = kClose;
  classes[']'] = kClose;
  classes[' '] = kSpace;
  classes['\t'] = kSpace;
  classes['\n'] = kSpace;
  classes['\r'] = kSpace;
  classes[','] = kDelimiter;
  classes[':'] = kDelimiter;
  return classes;
}
constexpr std::array<uint8_t, 256> kClasses = MakeClasses();

uint8_t ClassOf(char c) { return kClasses[static_cast<uint8_t>(c)]; }

// The first byte at or after `i` and before `end` that is `a`, `b`, ... (up to five), or
// `end`. Reads up to 15 bytes past `end` (the buffer's padding) and ignores them.
template <char... kBytes>
size_t FindAny(const char* data, size_t i, size_t end) {
#if defined(__SSE2__)
  for (; i < end; i += 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
    __m128i hits = _mm_setzero_si128();
    ((hits = _mm_or_si128(hits, _mm_cmpeq_epi8(block, _mm_set1_epi8(kBytes)))), ...);
    auto mask = static_cast<uint32_t>(_mm_movemask_epi8(hits));
    if (end - i < 16) mask &= (uint32_t{1} << (end - i)) - 1;
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(mask));
  }
  return end;
#else
  for (; i < end; ++i) {
    if (((data[i] == kBytes) || ...)) return i;
  }
  return end;
#endif
}

constexpr size_t kScanBlock = 64;

// Bit k of the result is set where byte k of the 64 at `data` is `a` (or, with `fold`, where it
// is `a` once bit 5 is set: '[' and '{', ']' and '}').
#if defined(__SSE2__)
uint64_t Mask64(const char* data, char a, bool fold) {
  uint64_t mask = 0;
  const __m128i target = _mm_set1_epi8(a);
  const __m128i bit5 = _mm_set1_epi8(fold ? 0x20 : 0);
  for (size_t part = 0; part < 4; ++part) {
    __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * part));
    block = _mm_or_si128(block, bit5);
    const auto hits = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(block, target)));
    mask |= uint64_t{hits} << (16 * part);
  }
  return mask;
}
#else
uint64_t Mask64(const char* data, char a, bool fold) {
  uint64_t mask = 0;
  for (int k = 0; k < 64; ++k) {
    const char c = fold ? static_cast<char>(data[k] | 0x20) : data[k];
    if (c == a) mask |= uint64_t{1} << k;
  }
  return mask;
}
#endif

// Bit k set where an odd number of bits 0..k of `bits` are set.
uint64_t PrefixXor(uint64_t bits) {
  bits ^= bits << 1;
  bits ^= bits << 2;
  bits ^= bits << 4;
  bits ^= bits << 8;
  bits ^= bits << 16;
  bits ^= bits << 32;
  return bits;
}

// Follows strings and brackets through a container's text, 64 bytes at a time where no
// backslash is in sight (the common case in traces), byte by byte otherwise.
struct BracketScan {
  int level = 0;
  bool in_string = false;
  bool escaped = false;  // the next byte is escaped
  bool too_deep = false;
  size_t deep_at = 0;

  bool Open(size_t at, int max_depth) {
    if (level >= max_depth) {
      too_deep = true;
      deep_at = at;
      return false;
    }
    ++level;
    return true;
  }

  // The index of the bracket that closes the container (back to `depth`), if in these bytes.
  std::optional<size_t> Bytes(const char* data, size_t size, int depth, int max_depth) {
    for (size_t k = 0; k < size; ++k) {
      const char c = data[k];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (!Open(k, max_depth)) return std::nullopt;
      } else if ((c == '}' || c == ']') && --level == depth) {
        return k;
      }
    }
    return std::nullopt;
  }

  std::optional<size_t> Block(const char* data, int depth, int max_depth) {
    if (escaped || Mask64(data, '\\', false) != 0) {
      return Bytes(data, kScanBlock, depth, max_depth);
    }
    const uint64_t quotes = Mask64(data, '"', false);
    const uint64_t inside = PrefixXor(quotes) ^ (in_string ? ~uint64_t{0} : 0);
    const uint64_t opens = Mask64(data, '{', true) & ~inside;
    uint64_t brackets = (opens | Mask64(data, '}', true)) & ~inside;
    while (brackets != 0) {
      const auto k = static_cast<size_t>(__builtin_ctzll(brackets));
      brackets &= brackets - 1;
      if ((opens >> k) & 1) {
        if (!Open(k, max_depth)) return std::nullopt;
      } else if (--level == depth) {
        return k;
      }
    }
    in_string = (inside >> 63) & 1;
    return std::nullopt;
  }
};

}  // namespace

JsonSplitter::JsonSplitter(std::streambuf& in, size_t max_value_bytes, int max_depth)
    : in_(in),
      max_value_bytes_(max_value_bytes),
      max_depth_(max_depth),
      buffer_(kFirstBytes + kJsonSlicePadding) {}

bool JsonSplitter::More(size_t& index) {
  if (eof_) return false;
  size_t capacity = buffer_.size() - kJsonSlicePadding;
  if (end_ + kMinReadBytes > capacity) {
    if (mark_ > 0) {  // drop what was handed out already
      std::memmove(buffer_.data(), buffer_.data() + mark_, end_ - mark_);
      consumed_ += mark_;
      end_ -= mark_;
      index -= mark_;
      mark_ = 0;
    }
    if (end_ + kMinReadBytes > capacity || capacity < kMaxReadBytes) {  // a long document
      capacity *= 2;
      buffer_.resize(capacity + kJsonSlicePadding);
    }
  }
  const std::streamsize got =
      in_.sgetn(buffer_.data() + end_,
                static_cast<std::streamsize>(std::min(kMaxReadBytes, capacity - end_)));
  if (got <= 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<size_t>(got);
  return true;
}

void JsonSplitter::SkipByteOrderMark() {
  while (end_ - pos_ < 3 && More(pos_)) {
  }
  if (end_ - pos_ >= 3 && std::memcmp(buffer_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) pos_ += 3;
}

std::optional<char> JsonSplitter::Peek() {
  for (;;) {
    while (pos_ < end_ && ClassOf(buffer_[pos_]) == kSpace) ++pos_;
    if (pos_ < end_) return buffer_[pos_];
    mark_ = pos_;
    if (!More(pos_)) return std::nullopt;
  }
}

bool JsonSplitter::Consume(char c) {
  if (Peek() != c) return false;
  ++pos_;
  return true;
}

std::optional<JsonSplitError> JsonSplitter::TooLarge() const {
  return JsonSplitError{fmt::format("a JSON value of more than {} MiB (starting at byte {}): "
                                    "more than a trace event or metadata entry may take",
                                    max_value_bytes_ >> 20, consumed_ + mark_),
                        consumed_ + mark_, /*syntax=*/false};
}

std::optional<JsonSplitError> JsonSplitter::EndInside(std::string_view what) const {
  return JsonSplitError{fmt::format("the document ends inside the {} that starts at byte {}", what,
                                    consumed_ + mark_),
                        consumed_ + end_};
}

std::optional<JsonSplitError> JsonSplitter::NeedMore(size_t& i, std::string_view what) {
  if (i - mark_ > max_value_bytes_) return TooLarge();
  if (!More(i)) return EndInside(what);
  return std::nullopt;
}

std::optional<JsonSplitError> JsonSplitter::SkipString(size_t& i) {
  for (;;) {
    i = FindAny<'"', '\\'>(buffer_.data(), i, end_);
    if (i + 1 >= end_) {  // a backslash must be followed by a byte to tell what it escapes
      if (i < end_ && buffer_[i] == '"') {
        ++i;
        return std::nullopt;
      }
      if (auto error = NeedMore(i, "string")) return error;
      continue;
    }
    if (buffer_[i] == '"') {
      ++i;
      return std::nullopt;
    }
    i += 2;  // an escape: the backslash and the byte it escapes
  }
}

std::optional<JsonSplitError> JsonSplitter::SkipContainer(int depth, size_t& i) {
  BracketScan scan{.level = depth};
  for (;;) {
    if (end_ - i < kScanBlock && !eof_) {  // keep a whole block in view when there is more
      if (i - mark_ > max_value_bytes_) return TooLarge();
      More(i);
      continue;
    }
    std::optional<size_t> closed;
    if (end_ - i >= kScanBlock) {
      closed = scan.Block(buffer_.data() + i, depth, max_depth_);
      if (!closed && !scan.too_deep) {
        i += kScanBlock;
        continue;
      }
    } else if (i < end_) {
      closed = scan.Bytes(buffer_.data() + i, end_ - i, depth, max_depth_);
      if (!closed && !scan.too_deep) {
        i = end_;
        continue;
      }
    } else {
      return EndInside("value");
    }
    if (scan.too_deep) {
      return JsonSplitError{fmt::format("JSON nested deeper than {} levels", max_depth_),
                            consumed_ + i + scan.deep_at, /*syntax=*/false};
    }
    i += *closed + 1;
    return std::nullopt;
  }
}

std::optional<JsonSplitError> JsonSplitter::Next(int depth, JsonSlice& slice) {
  const std::optional<char> first = Peek();
  if (!first) return JsonSplitError{"unexpected end of input; expected a value", offset()};
  if (ClassOf(*first) == kClose || ClassOf(*first) == kDelimiter) {
    return JsonSplitError{fmt::format("{} where a value was expected", QuoteChar(*first)),
                          offset()};
  }
  mark_ = pos_;
  size_t i = pos_;
  const uint8_t kind = ClassOf(*first);
  if (kind == kQuote) {
    ++i;
    if (auto error = SkipString(i)) return error;
  } else if (kind == kOpen) {
    if (auto error = SkipContainer(depth, i)) return error;
  } else {  // a number or a literal: up to the next delimiter, bracket, quote or space
    for (;;) {
      if (i == end_) {
        if (i - mark_ > max_value_bytes_) return TooLarge();
        if (!More(i)) break;
        continue;
      }
      if (ClassOf(buffer_[i]) != kPlain) break;
      ++i;
    }
  }
  pos_ = i;
  slice = JsonSlice{buffer_.data() + mark_, i - mark_, consumed_ + mark_};
  return std::nullopt;
}

}  // namespace dtsim::traces
