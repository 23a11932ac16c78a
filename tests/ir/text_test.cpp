// Printer/parser: byte-exact round trips for every model, and a corpus of
// malformed inputs that must each fail with line:column and the offending token.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/text.h"
#include "ir/verifier.h"
#include "models/llama.h"

namespace tj {
namespace {

void expect_round_trip(const Graph& g) {
  verify(g);
  std::string once = print_graph(g);
  Graph back = parse_graph(once);
  verify(back);
  EXPECT_EQ(print_graph(back), once);
  EXPECT_EQ(back.size(), g.size());
}

TEST(TextRoundTrip, EveryModelEveryConfig) {
  for (const auto& name : models::llama_config_names()) {
    const auto& c = models::llama_config(name);
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(name + " " + std::string(dtype_name(dt)));
      models::Shapes prefill{1, 16, 16, dt}, decode{1, 1, 64, dt};
      expect_round_trip(models::trace_mlp(c, prefill));
      expect_round_trip(models::trace_llama_layer(c, prefill));
      expect_round_trip(models::trace_llama_layer(c, decode));
      expect_round_trip(models::trace_llama_layer(c, decode, {true}));
      expect_round_trip(models::trace_llama(c, prefill, 2));
      expect_round_trip(models::trace_llama(c, decode, 2));
    }
  }
}

TEST(TextRoundTrip, SymbolicShapes) {
  const auto& c = models::llama_config("tiny");
  models::Shapes s{Dim::symbol("B"), Dim::symbol("T"), Dim::symbol("T") + Dim::symbol("P"), DType::f32};
  Graph g = models::trace_llama_layer(c, s);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("input %k_cache : f32[B,2,P+T,16]"), std::string::npos) << text;
  EXPECT_NE(text.find("causal_mask(%pos) {q=T, k=P+T}"), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextRoundTrip, ConstantsKeepEveryBit) {
  const char* text =
      "graph consts\n"
      "input %x : f32[4]\n"
      "%0 = const {value=[0.1, -0.0, inf, -inf]} : f32[4]\n"
      "%1 = const {value=nan} : f64[]\n"
      "%2 = const {value=[3, -7]} : i64[2]\n"
      "%3 = const {value=1e-300} : f64[2,2]\n"
      "%4 = add(%x, %0) : f32[4]\n"
      "return %4, %1, %2, %3\n";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  const auto& d = *g.node(1).const_data();  // %0
  EXPECT_TRUE(std::signbit(d[1]));
  EXPECT_EQ((*g.node(g.outputs()[3]).const_data())[0], 1e-300);
}

// Log dumps summarize large constants (frozen weights): count and hash,
// never the data; small ones print in full; the default prints everything.
// Integer constants print exactly, not through a double (INT64_MAX is not
// 2^63); fuzz_compiled found the old cast to be undefined behaviour.
TEST(TextPrint, IntegerConstantsPrintExactly) {
  Graph g("ints");
  NDArray big = NDArray::of<int64_t>({2}, std::vector<int64_t>{INT64_MAX, (int64_t{1} << 53) + 1});
  g.set_outputs({g.add_const({DType::i64, {2}}, ConstValues::adopt(big))});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("[9223372036854775807, 9007199254740993]"), std::string::npos) << text;
}

TEST(TextPrint, LogDumpsSummarizeLargeConstants) {
  std::string big = "[";
  for (int i = 0; i < 40; ++i) big += (i ? ", " : "") + std::to_string(i) + ".5";
  big += "]";
  Graph g = parse_graph("graph g\ninput %x : f32[40]\n%0 = const {value=" + big + "} : f32[40]\n"
                        "%1 = const {value=[1.0, 2.0]} : f32[2]\n%2 = add(%x, %0) : f32[40]\nreturn %2, %1\n");
  std::string log = print_graph(g, log_print_options());
  EXPECT_NE(log.find("{value=<40 values, xxh3 "), std::string::npos) << log;
  EXPECT_EQ(log.find("39.5"), std::string::npos) << log;
  EXPECT_NE(log.find("{value=[1.0, 2.0]}"), std::string::npos) << log;
  EXPECT_NE(print_graph(g).find("39.5"), std::string::npos);
  // Another value, another hash.
  Graph h = parse_graph("graph g\ninput %x : f32[40]\n%0 = const {value=" + big.replace(1, 3, "7.5") + "} : f32[40]\n"
                        "%1 = const {value=[1.0, 2.0]} : f32[2]\n%2 = add(%x, %0) : f32[40]\nreturn %2, %1\n");
  EXPECT_NE(print_graph(h, log_print_options()), log);
  EXPECT_THROW(parse_graph(log), ParseError);  // a summary is not IR
}

TEST(TextParse, AcceptsCommentsBlankLinesAndDefaultAttrs) {
  Graph g = parse_graph(
      "# a comment\n\n"
      "graph g   # trailing comment\n"
      "input %x : f32[2, S]\n"
      "\n"
      "%a = softmax(%x) {axis=-1} : f32[2,S]\n"
      "%b = sum(%a) {axes=[1], keepdim=false} : f32[2]\n"
      "return %b\n");
  EXPECT_EQ(print_graph(g),
            "graph g\n"
            "input %x : f32[2,S]\n"
            "%0 = softmax(%x) {axis=1} : f32[2,S]\n"
            "%1 = sum(%0) {axes=[1]} : f32[2]\n"
            "return %1\n");
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(TextParse, MalformedCorpus) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(TJ_TEST_DATA) / "malformed")) {
    ++files;
    std::string text = slurp(entry.path());
    SCOPED_TRACE(entry.path().filename().string());
    std::string expect;
    if (text.rfind("# expect: ", 0) == 0) expect = text.substr(10, text.find('\n') - 10);
    try {
      parse_graph(text);
      ADD_FAILURE() << "parsed without error";
    } catch (const ParseError& e) {
      if (!expect.empty()) {
        EXPECT_EQ(std::string(e.what()), expect);
      }
      EXPECT_GE(e.line(), 1);
      EXPECT_GE(e.col(), 1);
    }
  }
  EXPECT_GE(files, 20);
}

// Every prefix of a valid file either parses or fails cleanly, never crashes.
TEST(TextParse, EveryTruncationFailsCleanly) {
  std::string text = print_graph(models::trace_llama_layer(models::llama_config("tiny"), {1, 2, 4, DType::f32}));
  // Only a prefix that already holds the return line can be a valid graph
  // (cutting a value name there may leave another valid name).
  size_t ret = text.find("\nreturn");
  int parsed = 0;
  for (size_t n = 0; n <= ret; n += 7) {
    try {
      parse_graph(std::string_view(text).substr(0, n));
      ++parsed;
    } catch (const ParseError&) {
    }
  }
  EXPECT_EQ(parsed, 0);
}

// Random byte flips: a ParseError or a valid graph, never anything else.
TEST(TextParse, ByteFlipsFailCleanly) {
  std::string text = print_graph(models::trace_mlp(models::llama_config("tiny"), {1, 4, 4, DType::f32}));
  uint64_t s = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string t = text;
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t[(s >> 33) % t.size()] = static_cast<char>((s >> 17) & 0xff);
    try {
      Graph g = parse_graph(t);
      verify(g);
    } catch (const ParseError&) {
    }
  }
}

}  // namespace
}  // namespace tj
