// The protobuf wire code and the Chakra ET reader: wire-level round trips and malformed input,
// every attribute type through encode/decode, the shared chakra.0.et (3,664 nodes, 21
// collectives, counted with a separate Python decoder) and its converted JSON form (the same
// graph), the PyTorch host ET, a jsonizer stream, version checks and corrupt files.
#include "traces/chakra_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include "sim/graph/graph_json.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_wire.h"
#include "traces/chakra_writer.h"
#include "traces/protobuf_wire.h"
#include "traces/trace_format.h"

namespace dtsim::traces {
namespace {

using testing::HasSubstr;

TEST(ProtobufWire, RoundTripsEveryWireType) {
  wire::Writer writer;
  writer.Varint(1, 0);
  writer.Varint(2, UINT64_MAX);
  writer.Varint(3, wire::ZigZagEncode(-3));
  writer.Fixed64(4, 0x0123456789abcdefULL);
  writer.Fixed32(5, 0xdeadbeefU);
  writer.Bytes(6, "payload");
  writer.PackedVarints(536870911, {1, 300, 1ULL << 40});  // the largest field number
  wire::Reader reader(writer.data());
  wire::Field f;
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.value, 0u);
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.value, UINT64_MAX);
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(wire::ZigZagDecode(f.value), -3);
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.type, wire::WireType::kFixed64);
  EXPECT_EQ(f.value, 0x0123456789abcdefULL);
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.value, 0xdeadbeefU);
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.bytes, "payload");
  ASSERT_TRUE(reader.Next(f));
  EXPECT_EQ(f.number, 536870911u);
  std::vector<uint64_t> packed;
  ASSERT_TRUE(wire::ReadPackedVarints(f.bytes, packed));
  EXPECT_EQ(packed, (std::vector<uint64_t>{1, 300, 1ULL << 40}));
  EXPECT_FALSE(reader.Next(f));
  EXPECT_FALSE(reader.error());
  EXPECT_EQ(wire::ZigZagEncode(std::numeric_limits<int64_t>::min()), UINT64_MAX);
}

TEST(ProtobufWire, MalformedInputIsAnErrorWithItsOffset) {
  const auto error_of = [](std::string_view bytes) {
    wire::Reader reader(bytes);
    wire::Field f;
    while (reader.Next(f)) {
    }
    return reader.error().value_or("ok");
  };
  EXPECT_EQ(error_of(std::string("\x08\x96", 2)),
            "a varint is cut off or longer than 10 bytes at byte 1 of a 2-byte message");
  EXPECT_EQ(error_of(std::string(11, '\xff')),
            "a varint is cut off or longer than 10 bytes at byte 0 of a 11-byte message");
  EXPECT_EQ(error_of("\x12\x05"
                     "abc"),
            "field 2 declares 5 bytes but only 3 remain at byte 2 of "
            "a 5-byte message");
  EXPECT_THAT(error_of("\x0b"), HasSubstr("deprecated groups are not supported"));
  EXPECT_THAT(error_of("\x0e"), HasSubstr("wire type 6 (not a protobuf wire type)"));
  EXPECT_THAT(error_of(std::string(1, '\0')), HasSubstr("invalid field number 0"));
  EXPECT_THAT(error_of("\x0d\x01\x02"), HasSubstr("field 1 is cut off"));
}

// One attribute of every oneof type, with values at the edges of their ranges.
std::vector<ChakraAttribute> EveryAttributeType() {
  std::vector<ChakraAttribute> attrs;
  for (uint32_t field = kFirstAttributeField; field <= kLastAttributeField; ++field) {
    ChakraAttribute attr;
    attr.type = static_cast<AttributeType>(field);
    attr.name = std::string(AttributeJsonKey(attr.type));
    const size_t count = IsList(attr.type) ? 3 : 1;
    for (size_t i = 0; i < count; ++i) {
      switch (ClassOf(attr.type)) {
        case AttributeClass::kBool:
          attr.integers.push_back(i % 2 == 0 ? 1 : 0);
          break;
        case AttributeClass::kReal:
          attr.reals.push_back(i == 1 ? -0.5 : 1.25e3);  // exact in float and double
          break;
        case AttributeClass::kText:
          attr.texts.push_back(i == 1 ? std::string() : "text " + std::to_string(i));
          break;
        case AttributeClass::kInteger: {
          const auto type = static_cast<AttributeType>(IsList(attr.type) ? field - 1 : field);
          const bool is_signed = type == AttributeType::kInt32 || type == AttributeType::kInt64 ||
                                 type == AttributeType::kSint32 || type == AttributeType::kSint64 ||
                                 type == AttributeType::kSfixed32 ||
                                 type == AttributeType::kSfixed64;
          const bool wide = type == AttributeType::kInt64 || type == AttributeType::kSint64 ||
                            type == AttributeType::kSfixed64 || type == AttributeType::kUint64 ||
                            type == AttributeType::kFixed64;
          const int64_t big = wide ? INT64_MAX : INT32_MAX;
          const int64_t small = is_signed ? (wide ? INT64_MIN : INT32_MIN) : 0;
          attr.integers.push_back(i == 0 ? big : i == 1 ? small : 7);
        }
      }
    }
    attrs.push_back(std::move(attr));
  }
  return attrs;
}

TEST(ChakraWire, EveryAttributeTypeRoundTrips) {
  ChakraNode node;
  node.id = 1ULL << 63;
  node.name = "node";
  node.type = ChakraNodeType::kCommCollective;
  node.ctrl_deps = {3};
  node.data_deps = {1, 2, UINT64_MAX};
  node.start_time_micros = 5;
  node.duration_micros = 7;
  node.inputs = {"[[1, 2]]", "[[2]]", "['Tensor(float)']"};
  node.attrs = EveryAttributeType();
  int64_t unknown = 0;
  const Expected<ChakraNode> back = DecodeChakraNode(EncodeChakraNode(node), unknown);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(*back, node);
  EXPECT_EQ(unknown, 0);
}

// Numeric lists are written packed, as protobuf writes proto3's repeated scalars, so Chakra's
// generated classes re-encode dtsim's nodes to the same bytes (tools/peers/check_chakra_export.py
// checks whole exports that way); strings stay one field each. Bytes derived by hand for
// attr {name "g" int64_list {values 4 values 300}}: the varints 04 and ac 02 (3 bytes) in the
// Int64List as one field 1: 0a 03 04 ac 02 (5 bytes); the AttributeProto 0a 01 67 (name)
// 52 05 + those (int64_list is field 10): 10 bytes; the node's attr (field 10) 52 0a + those.
TEST(ChakraWire, NumericListsArePackedAsProtobufWritesThem) {
  ChakraNode node;
  node.attrs = {ChakraAttribute::Int64List("g", {4, 300})};
  EXPECT_EQ(EncodeChakraNode(node),
            std::string("\x52\x0a\x0a\x01g\x52\x05\x0a\x03\x04\xac\x02", 12));
  // A double list: field 4 holding {values: packed 8-byte little-endian}; 1.0 = 0x3ff0...0.
  ChakraAttribute reals{.name = "r", .type = AttributeType::kDoubleList, .reals = {1.0}};
  node.attrs = {reals};
  EXPECT_EQ(EncodeChakraNode(node), std::string("\x52\x0f\x0a\x01r\x22\x0a\x0a\x08"
                                                "\x00\x00\x00\x00\x00\x00\xf0\x3f",
                                                17));
  // An empty list is an empty list message (the oneof is set; its packed field is omitted).
  node.attrs = {ChakraAttribute::Int64List("e", {})};
  EXPECT_EQ(EncodeChakraNode(node), std::string("\x52\x05\x0a\x01"
                                                "e\x52\x00",
                                                7));
  // Strings cannot be packed: one values field each (0a 01 61, 0a 01 62) in the StringList,
  // field 30 (tag f2 01).
  ChakraAttribute texts{.name = "s", .type = AttributeType::kStringList, .texts = {"a", "b"}};
  node.attrs = {texts};
  EXPECT_EQ(EncodeChakraNode(node), std::string("\x52\x0c\x0a\x01s\xf2\x01\x06\x0a\x01"
                                                "a\x0a\x01"
                                                "b",
                                                14));
}

// An export encodes millions of nodes with one encoder: what a node leaves in its buffers
// must not leak into the next, smaller one.
TEST(ChakraWire, AnEncoderReusedNodeAfterNodeWritesWhatEachAloneWould) {
  ChakraNode big;
  big.id = 9;
  big.name = "a collective with every attribute type";
  big.data_deps = {1, 2, 3};
  big.attrs = EveryAttributeType();
  ChakraNode small;
  small.id = 10;
  small.name = "gemm";
  small.duration_micros = 4;
  small.attrs = {ChakraAttribute::Bool("is_cpu_op", false)};
  ChakraNodeEncoder encoder;
  for (const ChakraNode* node : {&big, &small, &big, &small}) {
    EXPECT_EQ(encoder.Encode(*node), EncodeChakraNode(*node)) << node->name;
  }
  std::string framed;
  encoder.AppendFramed(small, framed);
  encoder.AppendFramed(big, framed);
  std::string expected;
  for (const ChakraNode* node : {&small, &big}) {
    const std::string bytes = EncodeChakraNode(*node);
    wire::AppendVarint(expected, bytes.size());
    expected += bytes;
  }
  EXPECT_EQ(framed, expected);
}

TEST(ChakraWire, AcceptsUnpackedRepeatedFieldsAndSkipsUnknownOnes) {
  wire::Writer node;
  node.Varint(1, 42);
  node.Varint(5, 7);  // data_deps, one element per field
  node.Varint(5, 9);
  node.Varint(99, 1);  // not in et_def.proto
  wire::Writer list;
  list.Varint(1, 4);
  list.Varint(1, 5);
  wire::Writer attr;
  attr.Bytes(1, "ids");
  attr.Bytes(10, list.data());  // int64_list, unpacked
  node.Bytes(10, attr.data());
  int64_t unknown = 0;
  const Expected<ChakraNode> decoded = DecodeChakraNode(node.data(), unknown);
  ASSERT_TRUE(decoded.ok()) << decoded.error().ToString();
  EXPECT_EQ(decoded->data_deps, (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(decoded->attrs.at(0).integers, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(unknown, 1);

  wire::Writer bad_type;
  bad_type.Varint(3, 12);
  EXPECT_THAT(DecodeChakraNode(bad_type.data(), unknown).error().message(),
              HasSubstr("node type 12 is not a Chakra NodeType"));
  wire::Writer bad_wire;
  bad_wire.Bytes(1, "x");
  EXPECT_THAT(DecodeChakraNode(bad_wire.data(), unknown).error().message(),
              HasSubstr("field 1 has wire type 2, expected 0"));
}

// chakra.0.et counted by a separate Python wire decoder: 3,664 nodes (3,643 COMP_NODE, 21
// COMM_COLL_NODE); the 21 collectives are 14 CPU-side c10d ops without comm_type and 7 NCCL
// kernels (5 ALL_REDUCE, 2 BROADCAST).
TEST(SharedChakraTrace, TheProtobufStreamImportsWithItsNodesAndCollectives) {
  const Expected<ChakraTrace> trace = ReadChakraTrace(SharedChakra(kChakraEt));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const ChakraImportStats& s = trace->stats;
  EXPECT_EQ(s.form, "protobuf");
  EXPECT_FALSE(s.gzip);
  EXPECT_EQ(s.bytes, 2978371u);
  EXPECT_EQ(s.nodes, 3664);
  EXPECT_EQ(s.nodes_by_type[static_cast<size_t>(ChakraNodeType::kCompute)], 3643);
  EXPECT_EQ(s.nodes_by_type[static_cast<size_t>(ChakraNodeType::kCommCollective)], 21);
  EXPECT_EQ(s.collectives, (std::map<std::string, int64_t>{
                               {"(no comm_type)", 14}, {"ALL_REDUCE", 5}, {"BROADCAST", 2}}));
  EXPECT_EQ(s.attributes, 22037);
  EXPECT_EQ(s.unknown_fields, 0);
  EXPECT_EQ(s.dangling_data_deps, 0);
  EXPECT_EQ(s.duplicate_ids, 0);
  EXPECT_EQ(s.nodes_without_duration, 3664 - 3507);
  EXPECT_EQ(trace->version, "");
  ASSERT_NE(trace->MetadataAttr("schema"), nullptr);
  EXPECT_EQ(trace->MetadataAttr("schema")->AsString(), "1.0.1");
  EXPECT_EQ(trace->MetadataAttr("pid")->AsInteger(), 114598);
  const ChakraNode& first = trace->nodes.front();
  EXPECT_EQ(first.id, 216u);
  EXPECT_EQ(first.name, "aten::flatten_dense_tensors(0)");
  EXPECT_EQ(first.ctrl_deps, std::vector<uint64_t>{3});
  EXPECT_EQ(first.duration_micros, 318u);
  EXPECT_TRUE(first.is_cpu_op());
  EXPECT_EQ(first.Attr("seq_id")->AsInteger(), -1);
  EXPECT_EQ(first.Attr("op_schema")->AsString(),
            "aten::flatten_dense_tensors(Tensor[] tensors) -> Tensor");
}

// chakra.0.json.gz is the same graph converted to {"workload_graph": [...]}: same ids, types,
// names (but for the converter's "Id" capitalization inside names), data deps and durations.
TEST(SharedChakraTrace, TheWorkloadGraphJsonIsTheSameGraph) {
  const Expected<ChakraTrace> et = ReadChakraTrace(SharedChakra(kChakraEt));
  const Expected<ChakraTrace> json = ReadChakraTrace(SharedChakra(kChakraWorkloadJson));
  ASSERT_TRUE(et.ok() && json.ok()) << json.error().ToString();
  EXPECT_EQ(json->stats.form, "workload_graph");
  EXPECT_TRUE(json->stats.gzip);
  ASSERT_EQ(json->nodes.size(), et->nodes.size());
  EXPECT_EQ(json->stats.collectives.at("(no comm_type)"), 21);  // the JSON form drops comm_type
  for (size_t i = 0; i < et->nodes.size(); ++i) {
    const ChakraNode& a = et->nodes[i];
    const ChakraNode& b = json->nodes[i];
    ASSERT_EQ(a.id, b.id);
    EXPECT_EQ(a.type, b.type) << a.id;
    EXPECT_EQ(a.data_deps, b.data_deps) << a.id;
    EXPECT_EQ(a.duration_micros, b.duration_micros) << a.id;
    EXPECT_EQ(a.is_cpu_op(), b.is_cpu_op()) << a.id;
  }
  const Expected<ChakraTrace> small = ReadChakraTrace(SharedChakra(kSmallChakraJson));
  ASSERT_TRUE(small.ok()) << small.error().ToString();
  EXPECT_EQ(small->nodes.size(), 7u);
  EXPECT_EQ(small->nodes[1].ctrl_deps, std::vector<uint64_t>{3});
  EXPECT_EQ(small->MetadataAttr("ngpus")->AsInteger(), 8);
}

// The PyTorch host execution trace: 38 nodes (Python count), the process and thread roots as
// METADATA_NODE; the parent becomes ctrl_deps.
TEST(SharedChakraTrace, ThePytorchHostExecutionTraceImports) {
  const Expected<ChakraTrace> trace = ReadChakraTrace(SharedKineto(kExecutionTraceHost));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->stats.form, "pytorch_execution_trace");
  EXPECT_EQ(trace->stats.nodes, 38);
  EXPECT_EQ(trace->stats.nodes_by_type[static_cast<size_t>(ChakraNodeType::kMetadata)], 2);
  EXPECT_EQ(trace->stats.cpu_ops, 38);
  EXPECT_EQ(trace->MetadataAttr("schema")->AsString(), "1.0.1");
  const ChakraNode& empty = trace->nodes[1];
  EXPECT_EQ(empty.name, "aten::empty");
  EXPECT_EQ(empty.ctrl_deps, std::vector<uint64_t>{4});
  EXPECT_EQ(empty.inputs.shapes, "[[[],[]],[],[],[],[],[]]");
  EXPECT_EQ(empty.Attr("rf_id")->AsInteger(), 3);
}

TEST(SharedChakraTrace, FormatsAreDetectedByContent) {
  const auto format_of = [](const std::string& path) {
    const Expected<TraceFormat> format = DetectTraceFormat(path);
    return format.ok() ? std::string(TraceFormatName(*format)) : format.error().ToString();
  };
  EXPECT_EQ(format_of(SharedChakra(kChakraEt)), "chakra_protobuf");
  EXPECT_EQ(format_of(SharedChakra(kChakraWorkloadJson)), "chakra_workload_graph");
  EXPECT_EQ(format_of(SharedChakra(kSmallChakraJson)), "chakra_workload_graph");
  EXPECT_EQ(format_of(SharedKineto(kExecutionTraceHost)), "pytorch_execution_trace");
  for (const char* file : kReplayableTraces) EXPECT_EQ(format_of(SharedKineto(file)), "kineto");
}

TEST(SharedChakraTrace, ReadingNeverModifiesTheInput) {
  const std::string path = SharedChakra(kChakraEt);
  const auto before = std::filesystem::last_write_time(path);
  const std::string bytes_before = FileBytes(path);
  ASSERT_TRUE(ReadChakraTrace(path).ok());
  EXPECT_EQ(std::filesystem::last_write_time(path), before);
  EXPECT_EQ(FileBytes(path), bytes_before);
}

class ChakraReaderTest : public testing_support::TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string ErrorOf(const std::string& path) {
    const Expected<ChakraTrace> trace = ReadChakraTrace(path);
    return trace.ok() ? std::string("ok") : trace.error().ToString();
  }
  // A framed stream: GlobalMetadata with `version`, then the nodes.
  static std::string Stream(const std::string& version, const std::vector<ChakraNode>& nodes) {
    std::string out;
    ChakraMetadata metadata{version, {ChakraAttribute::String("producer", "test")}};
    for (const std::string& message : [&] {
           std::vector<std::string> messages = {EncodeChakraMetadata(metadata)};
           for (const ChakraNode& node : nodes) messages.push_back(EncodeChakraNode(node));
           return messages;
         }()) {
      wire::AppendVarint(out, message.size());
      out += message;
    }
    return out;
  }
};

// proto3 JSON as chakra_jsonizer writes it: messages back to back, 64-bit integers as
// strings, enums by name, lists as {"values": [...]}.
TEST_F(ChakraReaderTest, ReadsAJsonizerStream) {
  const std::string path = Write("trace.0.json", R"json({
 "version": "0.0.4",
 "attr": [{"name": "schema", "stringVal": "1.0.2-chakra.0.0.4"}]
}{
 "id": "1", "name": "gemm", "type": "COMP_NODE", "durationMicros": "25",
 "attr": [{"name": "is_cpu_op", "boolVal": false}, {"name": "num_ops", "int64Val": "1024"}]
}
{
 "id": "2", "name": "allreduce", "type": "COMM_COLL_NODE", "dataDeps": ["1"],
 "attr": [{"name": "comm_type", "int64Val": "0"}, {"name": "comm_size", "int64Val": "4096"},
          {"name": "involved_dim", "boolList": {"values": [true, false]}},
          {"name": "ratio", "doubleVal": "NaN"}]
})json");
  const Expected<ChakraTrace> trace = ReadChakraTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->stats.form, "jsonizer");
  EXPECT_EQ(trace->version, "0.0.4");
  ASSERT_EQ(trace->nodes.size(), 2u);
  EXPECT_EQ(trace->nodes[0].duration_micros, 25u);
  EXPECT_EQ(trace->nodes[0].Attr("num_ops")->AsInteger(), 1024);
  EXPECT_EQ(trace->nodes[1].type, ChakraNodeType::kCommCollective);
  EXPECT_EQ(trace->nodes[1].data_deps, std::vector<uint64_t>{1});
  EXPECT_EQ(trace->nodes[1].Attr("involved_dim")->integers, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(trace->stats.collectives.at("ALL_REDUCE"), 1);
}

TEST_F(ChakraReaderTest, UnknownVersionsAreRejectedByName) {
  ChakraNode node;
  node.id = 1;
  node.type = ChakraNodeType::kCompute;
  EXPECT_EQ(ErrorOf(Write("ok.et", Stream("0.0.4", {node}))), "ok");
  EXPECT_THAT(ErrorOf(Write("new.et", Stream("1.2.0", {node}))),
              HasSubstr("new.et: GlobalMetadata.version: Chakra ET schema version \"1.2.0\" is "
                        "not one this reader knows (0.0.x)"));
  EXPECT_THAT(ErrorOf(Write("new.json", R"({"version": "0.1.0"}{"id": "1"})")),
              HasSubstr("Chakra ET schema version \"0.1.0\""));
  EXPECT_THAT(ErrorOf(Write("et.json", R"({"schema": "2.0.0", "nodes": []})")),
              HasSubstr("PyTorch execution trace schema \"2.0.0\" is not one this reader knows"));
}

TEST_F(ChakraReaderTest, CorruptFilesGiveClearErrors) {
  ChakraNode node;
  node.id = 7;
  node.name = "kernel";
  node.type = ChakraNodeType::kCompute;
  const std::string good = Stream("0.0.4", {node, node});
  EXPECT_THAT(ErrorOf(Write("cut.et", good.substr(0, good.size() - 3))),
              HasSubstr("record 2 (node 1) declares 12 bytes but the file ends after 9: the "
                        "file is truncated"));
  std::string huge = good;
  huge += std::string("\xff\xff\xff\xff\x0f", 5);  // a 4 GiB length prefix
  EXPECT_THAT(ErrorOf(Write("huge.et", huge)),
              HasSubstr("record 3 (node 2) declares 4294967295 bytes, more than the 256 MiB"));
  // 200 MiB declared, under the limit, in a file that holds none of it: the error comes from
  // what the file holds (a fuzzer's 144-byte file once made the reader zero 220 MiB first).
  std::string declared = good;
  declared += std::string("\x80\x80\x80\x64", 4);  // 0x64 << 21 = 209715200
  EXPECT_THAT(ErrorOf(Write("declared.et", declared + "abc")),
              HasSubstr("record 3 (node 2) declares 209715200 bytes but the file ends after 3: "
                        "the file is truncated"));
  std::string bad_node = good;
  // A node is 08 07 (id) 12 06 "kernel" (name) 18 04 (type): make the type's tag wire type 7.
  bad_node[bad_node.size() - 2] = '\x1f';
  EXPECT_THAT(ErrorOf(Write("bad.et", bad_node)), HasSubstr("record 2 (node 1): field 3 has wire "
                                                            "type 7"));
  EXPECT_THAT(ErrorOf(Write("text.et", "hello")), HasSubstr("not a trace dtsim reads"));
  EXPECT_THAT(ErrorOf(Write("empty.et", "")), HasSubstr("the file is empty"));
  EXPECT_THAT(ErrorOf(SharedKineto(kAlexnetTrace)), HasSubstr("not a Chakra execution trace"));
  EXPECT_THAT(ErrorOf(Write("cut.json", R"({"workload_graph": [{"Id": 1, "Name": "a")")),
              HasSubstr("JSON syntax error"));
  EXPECT_THAT(ErrorOf(Write("type.json", R"({"workload_graph": [{"Id": 1, "NodeType": 9}]})")),
              HasSubstr("workload_graph[0].NodeType: a Chakra NodeType"));
  const std::string whole = FileBytes(SharedChakra(kChakraWorkloadJson));
  EXPECT_THAT(ErrorOf(Write("half.json.gz", whole.substr(0, whole.size() / 2))),
              HasSubstr("half.json.gz: unexpected end of the gzip stream"));
}

// Random byte corruption of the shared Chakra files and of a dtsim export: every copy imports
// (and then builds a graph or fails clearly) or fails with an error naming the file; none
// crashes or hangs (ASan and UBSan runs check the rest).
TEST_F(ChakraReaderTest, SurvivesRandomCorruptionOfTheSharedTraces) {
  int imported = 0;
  int failed = 0;
  // dtsim's own export too: its dtsim.* attributes are input like any other.
  const Expected<graph::TaskGraph> example =
      graph::LoadTaskGraph(std::string(DTSIM_SOURCE_DIR) + "/tools/examples/pipeline_2x2.json");
  ASSERT_TRUE(example.ok());
  ASSERT_TRUE(WriteChakraGraph(*example, Path("export")).ok());
  for (const std::string& source :
       {SharedChakra(kChakraEt), SharedChakra(kChakraWorkloadJson), SharedChakra(kSmallChakraJson),
        SharedKineto(kExecutionTraceHost), Path("export.0.et")}) {
    const std::string original = FileBytes(source);
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    for (int copy = 0; copy < 40; ++copy) {
      std::string bytes = original;
      for (int flips = 0; flips < 1 + copy % 8; ++flips) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        bytes[(state >> 16) % bytes.size()] = static_cast<char>(state >> 56);
      }
      if (copy % 5 == 4) bytes.resize((state >> 8) % bytes.size());
      const std::string path = Write("corrupt", bytes);
      const Expected<ChakraTrace> trace = ReadChakraTrace(path);
      if (trace.ok()) {
        ++imported;
        // Whatever imported must become a graph or a clear error, never a crash.
        const Expected<ChakraGraph> graph = BuildChakraGraph(std::span(&*trace, 1));
        if (!graph.ok()) {
          EXPECT_FALSE(graph.error().ToString().empty());
        }
      } else {
        ++failed;
        EXPECT_THAT(trace.error().ToString(), HasSubstr(path));
      }
    }
  }
  EXPECT_EQ(imported + failed, 200);
  std::printf("corrupted Chakra copies: %d imported, %d clear errors\n", imported, failed);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace dtsim::traces
