// The protocol-buffers wire format (https://protobuf.dev/programming-guides/encoding/), enough
// to read and write Chakra execution traces without a libprotobuf dependency: base-128 varints,
// zigzag for sint32/sint64, little-endian fixed32/fixed64, and length-delimited fields (strings,
// bytes, embedded messages, packed repeated scalars). Both sides are bounds-checked: a reader
// never reads past its buffer, and every malformed input (an over-long varint, a length past the
// end, an unknown or deprecated wire type) becomes an error message, never undefined behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::traces::wire {

// A varint holds at most 64 bits in ten bytes of seven bits each.
inline constexpr int kMaxVarintBytes = 10;

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,  // deprecated groups: rejected
  kEndGroup = 4,
  kFixed32 = 5,
};

// One field of a message as it appears on the wire. For kLengthDelimited, `bytes` views the
// payload inside the reader's buffer; otherwise `value` holds the raw 64 bits (fixed32 in the
// low half).
struct Field {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t value = 0;
  std::string_view bytes;
};

// Reads the fields of one serialized message. Next() returns false at the end of the buffer
// and on the first malformed field, after which error() says what and at which offset.
class Reader {
 public:
  explicit Reader(std::string_view buffer) : buffer_(buffer) {}

  bool Next(Field& field);
  const std::optional<std::string>& error() const { return error_; }
  size_t offset() const { return offset_; }

  // A varint at the current offset (no tag): what message framing uses.
  std::optional<uint64_t> ReadVarint();

 private:
  bool Fail(std::string message);

  std::string_view buffer_;
  size_t offset_ = 0;
  std::optional<std::string> error_;
};

// Decode packed repeated scalars (varints, or little-endian 8- or 4-byte values) into `out`;
// false if the payload is malformed (a varint cut off, a length not a multiple of the width).
bool ReadPackedVarints(std::string_view payload, std::vector<uint64_t>& out);
bool ReadPackedFixed64(std::string_view payload, std::vector<uint64_t>& out);
bool ReadPackedFixed32(std::string_view payload, std::vector<uint64_t>& out);

inline int64_t ZigZagDecode(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}
inline uint64_t ZigZagEncode(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

// Appends fields to a serialized message. proto3 conventions are the caller's: this writes
// what it is asked to, including zero values.
class Writer {
 public:
  void Varint(uint32_t number, uint64_t value);
  void Fixed64(uint32_t number, uint64_t value);
  void Fixed32(uint32_t number, uint32_t value);
  void Bytes(uint32_t number, std::string_view bytes);  // string, bytes or embedded message
  void PackedVarints(uint32_t number, const std::vector<uint64_t>& values);
  // Untagged values: the elements of a packed repeated field, built up before it is framed.
  void RawVarint(uint64_t value);
  void RawFixed64(uint64_t value);
  void RawFixed32(uint32_t value);
  // Field `outer` holding a message whose one field `inner` is `bytes` (a packed list inside
  // its list message); with no bytes the inner field is left out, as proto3 omits an empty
  // packed field.
  void WrappedBytes(uint32_t outer, uint32_t inner, std::string_view bytes);

  const std::string& data() const { return data_; }
  std::string&& Take() && { return std::move(data_); }
  // Empties the message and keeps its buffer, for a writer reused message after message.
  void Clear() { data_.clear(); }

 private:
  void Tag(uint32_t number, WireType type);

  std::string data_;
};

// Appends `value` as a base-128 varint (also the length prefix of framed message streams).
void AppendVarint(std::string& out, uint64_t value);
// Appends `message` as one record of a framed message stream: [varint length][message].
void AppendFramed(std::string& out, std::string_view message);
// The bytes AppendVarint writes for `value` (1 to 10).
int VarintSize(uint64_t value);

}  // namespace dtsim::traces::wire
