#include "traces/protobuf_wire.h"

#include <fmt/format.h>

namespace dtsim::traces::wire {
namespace {

// Decodes a varint at `offset`, advancing it; nothing if cut off or longer than ten bytes.
std::optional<uint64_t> DecodeVarint(std::string_view buffer, size_t& offset) {
  uint64_t value = 0;
  for (int i = 0; i < kMaxVarintBytes; ++i) {
    if (offset >= buffer.size()) return std::nullopt;
    const auto byte = static_cast<uint8_t>(buffer[offset++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

uint64_t LoadLittleEndian(std::string_view buffer, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(buffer[offset + i]);
  }
  return value;
}

void StoreLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

bool ReadPackedFixed(std::string_view payload, int width, std::vector<uint64_t>& out) {
  if (payload.size() % width != 0) return false;
  for (size_t at = 0; at < payload.size(); at += width) {
    out.push_back(LoadLittleEndian(payload, at, width));
  }
  return true;
}

}  // namespace

bool Reader::Fail(std::string message) {
  error_ = fmt::format("{} at byte {} of a {}-byte message", message, offset_, buffer_.size());
  offset_ = buffer_.size();
  return false;
}

std::optional<uint64_t> Reader::ReadVarint() {
  if (error_) return std::nullopt;
  const size_t start = offset_;
  const std::optional<uint64_t> value = DecodeVarint(buffer_, offset_);
  if (!value) {
    offset_ = start;
    Fail("a varint is cut off or longer than 10 bytes");
  }
  return value;
}

bool Reader::Next(Field& field) {
  if (error_ || offset_ >= buffer_.size()) return false;
  const std::optional<uint64_t> tag = ReadVarint();
  if (!tag) return false;
  field.number = static_cast<uint32_t>(*tag >> 3);
  const auto type = static_cast<uint32_t>(*tag & 7);
  if (field.number == 0 || *tag >> 3 > UINT32_MAX >> 3) {
    return Fail(fmt::format("invalid field number {}", *tag >> 3));
  }
  field.bytes = {};
  switch (type) {
    case 0: {
      field.type = WireType::kVarint;
      const std::optional<uint64_t> value = ReadVarint();
      if (!value) return false;
      field.value = *value;
      return true;
    }
    case 1:
    case 5: {
      const int width = type == 1 ? 8 : 4;
      if (buffer_.size() - offset_ < static_cast<size_t>(width)) {
        return Fail(fmt::format("field {} is cut off", field.number));
      }
      field.type = type == 1 ? WireType::kFixed64 : WireType::kFixed32;
      field.value = LoadLittleEndian(buffer_, offset_, width);
      offset_ += width;
      return true;
    }
    case 2: {
      const std::optional<uint64_t> length = ReadVarint();
      if (!length) return false;
      if (*length > buffer_.size() - offset_) {
        return Fail(fmt::format("field {} declares {} bytes but only {} remain", field.number,
                                *length, buffer_.size() - offset_));
      }
      field.type = WireType::kLengthDelimited;
      field.bytes = buffer_.substr(offset_, *length);
      field.value = *length;
      offset_ += *length;
      return true;
    }
    default:
      return Fail(fmt::format("field {} has wire type {} ({})", field.number, type,
                              type == 3 || type == 4 ? "deprecated groups are not supported"
                                                     : "not a protobuf wire type"));
  }
}

bool ReadPackedVarints(std::string_view payload, std::vector<uint64_t>& out) {
  size_t offset = 0;
  while (offset < payload.size()) {
    const std::optional<uint64_t> value = DecodeVarint(payload, offset);
    if (!value) return false;
    out.push_back(*value);
  }
  return true;
}

bool ReadPackedFixed64(std::string_view payload, std::vector<uint64_t>& out) {
  return ReadPackedFixed(payload, 8, out);
}

bool ReadPackedFixed32(std::string_view payload, std::vector<uint64_t>& out) {
  return ReadPackedFixed(payload, 4, out);
}

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendFramed(std::string& out, std::string_view message) {
  AppendVarint(out, message.size());
  out.append(message);
}

int VarintSize(uint64_t value) {
  int bytes = 1;
  for (; value >= 0x80; value >>= 7) ++bytes;
  return bytes;
}

void Writer::Tag(uint32_t number, WireType type) {
  AppendVarint(data_, (static_cast<uint64_t>(number) << 3) | static_cast<uint64_t>(type));
}

void Writer::Varint(uint32_t number, uint64_t value) {
  Tag(number, WireType::kVarint);
  AppendVarint(data_, value);
}

void Writer::Fixed64(uint32_t number, uint64_t value) {
  Tag(number, WireType::kFixed64);
  StoreLittleEndian(data_, value, 8);
}

void Writer::Fixed32(uint32_t number, uint32_t value) {
  Tag(number, WireType::kFixed32);
  StoreLittleEndian(data_, value, 4);
}

void Writer::Bytes(uint32_t number, std::string_view bytes) {
  Tag(number, WireType::kLengthDelimited);
  AppendVarint(data_, bytes.size());
  data_.append(bytes);
}

void Writer::PackedVarints(uint32_t number, const std::vector<uint64_t>& values) {
  uint64_t length = 0;
  for (const uint64_t value : values) length += static_cast<uint64_t>(VarintSize(value));
  Tag(number, WireType::kLengthDelimited);
  AppendVarint(data_, length);
  for (const uint64_t value : values) AppendVarint(data_, value);
}

void Writer::RawVarint(uint64_t value) { AppendVarint(data_, value); }
void Writer::RawFixed64(uint64_t value) { StoreLittleEndian(data_, value, 8); }
void Writer::RawFixed32(uint32_t value) { StoreLittleEndian(data_, value, 4); }

void Writer::WrappedBytes(uint32_t outer, uint32_t inner, std::string_view bytes) {
  Tag(outer, WireType::kLengthDelimited);
  if (bytes.empty()) {
    AppendVarint(data_, 0);
    return;
  }
  const uint64_t inner_tag =
      (static_cast<uint64_t>(inner) << 3) | static_cast<uint64_t>(WireType::kLengthDelimited);
  AppendVarint(data_, static_cast<uint64_t>(VarintSize(inner_tag)) +
                          static_cast<uint64_t>(VarintSize(bytes.size())) + bytes.size());
  Bytes(inner, bytes);
}

}  // namespace dtsim::traces::wire
