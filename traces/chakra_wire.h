// The protobuf encoding of Chakra's messages (et_def.proto, see chakra_trace.h): GlobalMetadata
// and Node to and from their serialized bytes, with our own wire-format code
// (protobuf_wire.h). Decoding is strict about what it understands and lenient about what it
// does not: a known field with the wrong wire type, an enum value out of range or a malformed
// list is an error; a field this schema does not define is skipped and counted, as protobuf
// itself does. Packed and unpacked repeated scalars are both accepted.
#pragma once

#include <string>
#include <string_view>

#include "sim/base/status.h"
#include "traces/chakra_trace.h"
#include "traces/protobuf_wire.h"

namespace dtsim::traces {

struct ChakraMetadata {
  std::string version;
  std::vector<ChakraAttribute> attrs;
};

// `unknown_fields` is incremented for every field skipped. Errors carry no file.
Expected<ChakraMetadata> DecodeChakraMetadata(std::string_view message, int64_t& unknown_fields);
Expected<ChakraNode> DecodeChakraNode(std::string_view message, int64_t& unknown_fields);

// proto3 encoding: fields at their default (0, empty) are left out, repeated scalars packed.
std::string EncodeChakraMetadata(const ChakraMetadata& metadata);
std::string EncodeChakraNode(const ChakraNode& node);

// Encodes node after node reusing its buffers, where EncodeChakraNode allocates a few times
// per attribute: what an export of millions of nodes needs. Same bytes as EncodeChakraNode.
class ChakraNodeEncoder {
 public:
  // The node's bytes, valid until the next call.
  const std::string& Encode(const ChakraNode& node);
  // Appends the node as a record of the .et stream: [varint length][node].
  void AppendFramed(const ChakraNode& node, std::string& out);

 private:
  wire::Writer node_;
  wire::Writer attr_;    // one attribute's message
  wire::Writer values_;  // a list attribute's values
};

}  // namespace dtsim::traces
