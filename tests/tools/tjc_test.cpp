// The tjc command line, run as a user would: output, errors, exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "ir/text.h"

namespace tj {
namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

// stdout and stderr together, or stdout alone with `quiet`.
Result tjc(const std::string& args, const std::string& stdin_file = "", bool quiet = false) {
  std::string cmd = std::string(TJC_PATH) + " " + args + (stdin_file.empty() ? " </dev/null" : " <" + stdin_file) +
                    (quiet ? " 2>/dev/null" : " 2>&1");
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return r;
}

std::string temp_file(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(Tjc, TracePrintsParseableIR) {
  Result r = tjc("trace --model llama-layer --config tiny --mode decode --kv-len 32", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string& ir = r.out;
  Graph g = parse_graph(ir);
  EXPECT_EQ(print_graph(g), ir);
  EXPECT_NE(ir.find("input %k_cache : f32[1,2,32,16]"), std::string::npos);
}

TEST(Tjc, TraceSymbolicTokens) {
  Result r = tjc("trace --model mlp --tokens T --dtype bf16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("input %x : bf16[1,T,128]"), std::string::npos) << r.out;
}

TEST(Tjc, FmtRoundTripsAndReadsStdin) {
  std::string text = "graph g\ninput %x : f32[2,S]\n%0 = softmax(%x) {axis=-1} : f32[2,S]\nreturn %0\n";
  std::string path = temp_file("fmt_ok.tj", text);
  Result r = tjc("fmt " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "graph g\ninput %x : f32[2,S]\n%0 = softmax(%x) {axis=1} : f32[2,S]\nreturn %0\n");
  Result s = tjc("fmt -", path);
  EXPECT_EQ(s.code, 0);
  EXPECT_EQ(s.out, r.out);
}

TEST(Tjc, FmtMalformedExitsOneWithLocation) {
  std::string path = temp_file("fmt_bad.tj", "graph g\ninput %x : f32[2]\n%0 = frob(%x) : f32[2]\nreturn %0\n");
  Result r = tjc("fmt " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "tjc: error: " + path + ":3:6: error: unknown op at 'frob'\n");
  Result missing = tjc("fmt /nonexistent/file.tj");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("cannot open"), std::string::npos);
}

TEST(Tjc, RunPrintsShapesAndChecksums) {
  Result t = tjc("trace --model llama-layer --tokens 3 --kv-len 5", "", true);
  std::string path = temp_file("layer.tj", t.out);
  Result a = tjc("run " + path + " --dtype f64 --seed 7 --set pos=2", "", true);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("output 0: f64[1,3,128] sum="), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("output 2: f64[1,2,5,16] sum="), std::string::npos) << a.out;
  Result b = tjc("run " + path + " --dtype f64 --seed 7 --set pos=2", "", true);
  EXPECT_EQ(a.out, b.out);  // seeded: reproducible
  Result c = tjc("run " + path + " --dtype f64 --seed 8 --set pos=2", "", true);
  EXPECT_NE(a.out, c.out);
  Result bad_pos = tjc("run " + path + " --set pos=4");  // rows 4..6 exceed a cache of 5
  EXPECT_EQ(bad_pos.code, 1);
  EXPECT_NE(bad_pos.out.find("kv_write: rows [4, 7) outside cache length 5"), std::string::npos) << bad_pos.out;
}

TEST(Tjc, RunSymbolicNeedsSizes) {
  std::string path = temp_file("sym.tj", "graph g\ninput %x : f32[S,2]\n%0 = exp(%x) : f32[S,2]\nreturn %0\n");
  Result r = tjc("run " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("symbolic shape [S,2]"), std::string::npos) << r.out;
  Result ok = tjc("run " + path + " --sym S=4");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("output 0: f32[4,2]"), std::string::npos);
}

TEST(Tjc, BadArgumentsGiveUsageAndNonZeroExit) {
  for (const char* args : {"", "frobnicate", "trace --model gpt", "trace --config huge", "trace --tokens", "run",
                           "trace --layers -1", "run x.tj --dtype i64", "trace --mode decode --tokens 4",
                           "run /dev/null --sym S", "run /dev/null --set pos"}) {
    Result r = tjc(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_LT(r.code, 128) << args << ": crashed";
    EXPECT_FALSE(r.out.empty()) << args;
  }
}

TEST(Tjc, OptRunsPassesOnText) {
  std::string path = temp_file("opt.tj",
                               "graph g\ninput %x : f64[3]\ninput %y : f64[3]\n"
                               "%0 = mul(%x, %y) : f64[3]\n%1 = mul(%y, %x) : f64[3]\n%2 = add(%0, %1) : f64[3]\n"
                               "%3 = const {value=1.0} : f64[]\n%4 = mul(%2, %3) : f64[3]\nreturn %4\n");
  Result r = tjc("opt " + path, "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "graph g\ninput %x : f64[3]\ninput %y : f64[3]\n%0 = mul(%x, %y) : f64[3]\n%1 = add(%0, %0) : f64[3]\nreturn %1\n");
  Result only = tjc("opt - --passes simplify", path, true);
  EXPECT_NE(only.out.find("mul(%y, %x)"), std::string::npos) << only.out;
  EXPECT_EQ(only.out.find("mul(%2, %3)"), std::string::npos) << only.out;
  Result logged = tjc("opt " + path + " --log");
  EXPECT_NE(logged.out.find("// pass cse"), std::string::npos) << logged.out;
  EXPECT_NE(logged.out.find("(unchanged)"), std::string::npos) << logged.out;
  Result bad = tjc("opt " + path + " --passes cse,frobnicate");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("unknown pass 'frobnicate' (known: freeze, cse,"), std::string::npos) << bad.out;
}

TEST(Tjc, PassesReportAsJson) {
  Result r = tjc("passes --model llama-layer --dtype f64 --tokens 4 --json", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["differential"].get<bool>());
  ASSERT_GE(j["passes"].size(), 8u);
  int flash = 0;
  for (const auto& row : j["passes"]) {
    EXPECT_LE(row["max_rel_diff"].get<double>(), 1e-13) << row.dump();
    flash = row["counts"]["flash_attn"].get<int>();
  }
  EXPECT_EQ(flash, 1);
  EXPECT_EQ(j["passes"].back()["counts"]["composite"].get<int>(), 0);
  Result big = tjc("passes --model llama-layer --config llama3-8b --tokens 2048 --dtype bf16");
  ASSERT_EQ(big.code, 0) << big.out;
  EXPECT_NE(big.out.find("shape-only"), std::string::npos) << big.out;
}

TEST(Tjc, DemoRunsPrefillAndDecode) {
  Result r = tjc("demo");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("prefill: 16 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode: 8 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated tokens:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tj
