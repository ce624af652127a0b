// The Kineto reader's parsing against nlohmann's, the reference it replaced: it accepts exactly
// the documents nlohmann accepts (malformed values anywhere: in an event, its args, the
// metadata), reads every field of the shared real traces as nlohmann's DOM reads them, and
// writes args read as text exactly as nlohmann dumps them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

class KinetoParseTest : public testing_support::TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

// Values nlohmann accepts or rejects, some of each for every part of the grammar.
const char* const kValues[] = {
    "tru",
    "nul",
    "falsey",
    "true",
    "null",
    "01",
    "1.",
    "-",
    "+1",
    ".5",
    "1e",
    "0x10",
    "NaN",
    "Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "123456789012345678901234",
    "-9223372036854775809",
    "18446744073709551615",
    "-0",
    "1E+2",
    "2.5e-3",
    "\"\x01\"",
    "\"\\u12\"",
    "\"\\u0041\"",
    "\"\\ud800\"",
    "\"\\ud83d\\ude00\"",
    "\"\\x\"",
    "\"\xff\"",
    "\"\xc3\xa9\"",
    "\"\\/\"",
    "[1,]",
    "{\"a\":1,}",
    "{\"a\" 1}",
    "[1 2]",
    "{1:2}",
    "\"abc",
    "[",
    "{\"a\":{\"b\":[]}}",
    "[[],[[]]]",
    "[1,[2,{\"c\":null}]]",
    "{\"a\":1 \"b\":2}",
    "[\"]\"]",
    "{\"}\":\"{\"}",
    // A form feed is not JSON whitespace; simdjson ended a lone scalar's token at it.
    "1\x0c"
    "2",
    "1\x0c",
    "true\x0c"
    "x",
    "null\x0c",
};

TEST_F(KinetoParseTest, AcceptsExactlyWhatNlohmannAccepts) {
  int cases = 0;
  for (const char* value : kValues) {
    const std::string v = value;
    const std::string documents[] = {
        R"({"traceEvents": [{"ph": "X", "name": "op", "x": )" + v + "}]}",
        R"({"traceEvents": [{"ph": "X", "ts": )" + v + "}]}",
        R"({"traceEvents": [{"ph": "X", "args": {"Input Dims": )" + v + "}}]}",
        R"({"traceEvents": [{"ph": "X", "args": {"unknown": )" + v + "}}]}",
        R"({"traceEvents": [)" + v + "]}",
        R"({"deviceProperties": [)" + v + R"(], "traceEvents": []})",
        R"({"other": )" + v + R"(, "traceEvents": []})",
        R"({"distributedInfo": )" + v + R"(, "traceEvents": []})",
        "[" + v + "]",
    };
    for (const std::string& document : documents) {
      const bool valid = Json::accept(document);
      const Expected<Trace> trace = ReadKinetoTrace(Write("case.json", document));
      EXPECT_EQ(trace.ok(), valid) << document << "\n"
                                   << (trace.ok() ? "" : trace.error().ToString());
      if (!trace.ok() && !valid) {
        // The message is nlohmann's, with the line, column and byte.
        EXPECT_THAT(trace.error().ToString(),
                    testing::ContainsRegex("JSON syntax error at (line 1, column [0-9]+ "
                                           "\\()?byte [0-9]+\\)?: "));
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 9 * static_cast<int>(std::size(kValues)));
  // A UTF-8 byte order mark before the document, as nlohmann skips it; not after whitespace.
  EXPECT_TRUE(ReadKinetoTrace(Write("bom.json", "\xEF\xBB\xBF{\"traceEvents\": []}")).ok());
  EXPECT_FALSE(ReadKinetoTrace(Write("bom2.json", " \xEF\xBB\xBF{\"traceEvents\": []}")).ok());
  EXPECT_FALSE(Json::accept(" \xEF\xBB\xBF{\"traceEvents\": []}"));
}

// JSON allows no NUL byte outside a string's \u0000 escape. nlohmann takes one for the end of
// its input and accepts what came before; the reader refuses the file at the NUL's byte, and
// its message shows the byte instead of carrying it (a NUL cut the message short where it was
// printed). Where nlohmann finds an error of its own before the NUL, its message stands.
TEST_F(KinetoParseTest, RefusesANulByteAndShowsIt) {
  using namespace std::string_literals;
  const std::pair<std::string, std::string> kCases[] = {
      {"{\"traceEvents\": []}\0"s, "at byte 19: byte 0x00 where the end of the document"},
      {"0\0{\"traceEvents\": []}"s, "at byte 0: invalid number \"0\\u0000\""},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1\0}]}"s, "(byte 37): while parsing object"},
  };
  for (const auto& [document, expected] : kCases) {
    const Expected<Trace> trace = ReadKinetoTrace(Write("nul.json", document));
    ASSERT_FALSE(trace.ok()) << testing::PrintToString(document);
    const std::string message = trace.error().ToString();
    EXPECT_EQ(message.find('\0'), std::string::npos) << testing::PrintToString(message);
    EXPECT_THAT(message, testing::HasSubstr(expected));
  }
}

// Args read as text (Input Dims, Input type) are nlohmann's dump of the value: objects with
// sorted keys, floats as nlohmann writes them, big integers as floats, escapes normalized.
TEST_F(KinetoParseTest, WritesArgsAsNlohmannDumpsThem) {
  const std::string dims =
      R"([[1, 2.50], {"b": 1, "a": [ -0 ]}, 18446744073709551615, 123456789012345678901234,
          "s\"q\u0041\n", true, null, 1E2, -7, "plain"])";
  const std::string path = Write("dims.json", R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "na\u006de": "aten::mm", "name": "aten::mm", "pid": 1,
     "tid": 1, "ts": "10.5", "dur": 3, "args": {"Input Dims": )" +
                                                  dims + R"(,
     "Input type": ["float", "c10::BFloat16"], "External id": 5, "External id": 6}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 1,
     "args": {"Input Dims": "not a list", "Input type": "float"}}]})");
  const Expected<Trace> trace = ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->host.size(), 2u);
  const HostEvent& mm = trace->host[0];
  EXPECT_EQ(trace->Name(mm.name), "aten::mm");
  EXPECT_EQ(mm.start, TimeNs(10500));
  EXPECT_EQ(mm.external_id, 6);  // the last of two equal keys
  ASSERT_NE(mm.shapes, kNone);
  EXPECT_EQ(trace->shapes[mm.shapes].input_dims, Json::parse(dims).dump());
  EXPECT_EQ(trace->shapes[mm.shapes].input_types, R"(["float","c10::BFloat16"])");
  const HostEvent& add = trace->host[1];
  ASSERT_NE(add.shapes, kNone);
  EXPECT_EQ(trace->shapes[add.shapes].input_dims, R"("not a list")");
  EXPECT_EQ(trace->shapes[add.shapes].input_types, "float");
}

// Every host and device event of the shared traces, against nlohmann's DOM of the same file:
// name, start, duration, correlation, and the shapes' text.
TEST(KinetoParse, ReadsTheSharedTracesAsNlohmannsDomDoes) {
  for (const char* file : kReplayableTraces) {
    SCOPED_TRACE(file);
    const Json document = Json::parse(GunzipFile(SharedKineto(file)));
    // (start, name) → (duration, correlation, dims, types) for every complete event.
    std::multimap<std::tuple<int64_t, std::string>, std::tuple<int64_t, int64_t, std::string>>
        expected;
    for (const Json& event : document["traceEvents"]) {
      if (!event.is_object() || event.value("ph", "") != "X" || !event.contains("ts") ||
          !event.contains("dur")) {
        continue;
      }
      const auto ns = [](const Json& value) {
        return value.is_string() ? MicrosecondsTextToNs(value.get<std::string>())
                                 : MicrosecondsTextToNs(value.dump());
      };
      const Json args = event.value("args", Json::object());
      std::string shapes;
      if (args.contains("Input Dims")) {
        const Json& types = args.value("Input type", Json());
        shapes = args["Input Dims"].dump() + "|" +
                 (types.is_string() ? types.get<std::string>() : types.dump());
      }
      expected.emplace(
          std::make_tuple(*ns(event["ts"]), event.value("name", "")),
          std::make_tuple(*ns(event["dur"]), args.value("correlation", int64_t{-1}), shapes));
    }
    const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(file));
    ASSERT_TRUE(trace.ok()) << trace.error().ToString();
    const auto check = [&](TimeNs start, graph::NameId name, DurationNs duration,
                           int64_t correlation, const std::string& shapes) {
      const auto [first, last] =
          expected.equal_range(std::make_tuple(start.ns(), std::string(trace->Name(name))));
      bool found = false;
      for (auto it = first; it != last && !found; ++it) {
        found = it->second == std::make_tuple(duration.ns(), correlation, shapes);
      }
      EXPECT_TRUE(found) << trace->Name(name) << " at " << start.ns() << " ns: " << shapes;
    };
    for (const HostEvent& host : trace->host) {
      const std::string shapes = host.shapes == kNone
                                     ? ""
                                     : trace->shapes[host.shapes].input_dims + "|" +
                                           trace->shapes[host.shapes].input_types;
      check(host.start, host.name, host.duration, host.correlation, shapes);
    }
    for (const DeviceEvent& device : trace->device) {
      check(device.start, device.name, device.duration, device.correlation, "");
    }
  }
}

}  // namespace
}  // namespace dtsim::traces
