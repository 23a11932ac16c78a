// The tjc command line, run as a user would: output, errors, exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "io/npy.h"
#include "ir/text.h"
#include "tensorjit/safetensors.h"

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

// The tiny Llama layer over 2 devices, Megatron style: the graph with its
// shardings (it parses back), and the report's two all-reduces.
TEST(Tjc, PartitionReportsTheCollectives) {
  Result r = tjc("partition --model llama-layer --config tiny --tokens 4 --mesh tp=2 --megatron tp --report", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  Graph g = parse_graph(r.out);
  EXPECT_EQ(g.mesh().str(), "{tp=2}");
  EXPECT_NE(r.out.find("param %wq : f32[128,128@tp]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#   all_reduce %57 for add %58 over tp: f32[1,4,128] partial(tp) -> f32[1,4,128], 2048 B, 2048 B sent\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# in all: 2 all_reduce; 4096 bytes sent per device\n"), std::string::npos) << r.out;
  for (const char* args : {"--mesh tp=0", "--mesh x", "--mesh tp=2 --shard wq:5=tp", "--mesh tp=2 --shard nope:1=tp", "",
                           "--mesh tp=2 --megatron dp", "--mesh tp=3 --shard wq:1=tp", "--mesh tp=2 --shard wq=tp"}) {
    Result bad = tjc(std::string("partition --model llama-layer --config tiny --tokens 4 ") + args);
    EXPECT_EQ(bad.code, 1) << args << ": " << bad.out;
    EXPECT_NE(bad.out.find("tjc: error: "), std::string::npos) << args << ": " << bad.out;
  }
}

TEST(Tjc, RunRejectsBadSizes) {
  std::string path = temp_file("sym_bad.tj", "graph g\ninput %x : f32[S,2]\n%0 = exp(%x) : f32[S,2]\nreturn %0\n");
  for (const char* v : {"1e30", "nan", "2.5", "-3", "abc", "", "4x", "1099511627777", "99999999999999999999"}) {
    Result r = tjc("run " + path + " --sym S=" + v);
    EXPECT_EQ(r.code, 1) << v << ": " << r.out;
    if (*v) {
      EXPECT_NE(r.out.find("not a non-negative integer"), std::string::npos) << v << ": " << r.out;
    }
  }
  Result q = tjc("run " + path + " --sym Q=3");
  EXPECT_EQ(q.code, 1);
  EXPECT_NE(q.out.find("the graph has no size symbol 'Q' (its symbols: S)"), std::string::npos) << q.out;
}

TEST(Tjc, RunSetMustSuitTheDtype) {
  std::string path = temp_file("set.tj",
                               "graph g\ninput %pos : i64[]\ninput %i : i32[]\ninput %flag : bool[]\ninput %x : f32[]\n"
                               "%0 = cast(%pos) {to=f32} : f32[]\n%1 = add(%0, %x) : f32[]\nreturn %1, %i, %flag\n");
  for (const char* set : {"pos=nan", "pos=2.5", "pos=1e3", "pos=9223372036854775808", "i=2147483648", "i=-2147483649",
                          "flag=2", "flag=yes", "x=abc", "x=1e39", "x=1,2"}) {
    Result r = tjc("run " + path + " --set " + set);
    EXPECT_EQ(r.code, 1) << set << ": " << r.out;
    EXPECT_NE(r.out.find("tjc: error: --set " + std::string(set).substr(0, std::string(set).find('='))), std::string::npos) << r.out;
  }
  Result ok = tjc("run " + path + " --dtype f64 --set pos=3 --set i=-2147483648 --set flag=true --set x=inf", "", true);
  ASSERT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out, "output 0: f64[] sum=inf l2=inf\noutput 1: i32[] sum=-2147483648 l2=2147483648\noutput 2: bool[] sum=1 l2=1\n");
}

TEST(Tjc, RunGivenInputsAndOutputFiles) {
  std::string path = temp_file("given.tj",
                               "graph g\ninput %a : f32[N]\ninput %b : f32[N]\ninput %m : f32[2,K]\n"
                               "%0 = add(%a, %b) : f32[N]\n%1 = neg(%m) : f32[2,K]\nreturn %0, %1\n");
  std::string dir = ::testing::TempDir() + "tj_run_out";
  std::filesystem::remove_all(dir);
  Result r = tjc("run " + path + " --input a=1,2,3 --input b=10,20,nan --input m=1,2,3,4,5,6 --sym K=3 --output " + dir, "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("output 0: f32[3] sum=nan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output 1: f32[2,3] sum=-21 "), std::string::npos) << r.out;
  NDArray o0 = read_npy(dir + "/output0.npy"), o1 = read_npy(dir + "/output1.npy");
  EXPECT_EQ(o0.type_str(), "f32[3]");
  EXPECT_EQ(o0.get(1), 22);
  EXPECT_TRUE(std::isnan(o0.get(2)));
  EXPECT_EQ(o1.get(5), -6);
  // An output file is an input file: the same run, read back.
  Result again = tjc("run " + path + " --input a=" + dir + "/output0.npy --input b=0,0,0 --input m=" + dir +
                     "/output1.npy", "", true);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("output 1: f32[2,3] sum=21 "), std::string::npos) << again.out;
  struct Bad {
    std::string args, message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--input a=1,2 --input b=1,2,3 --sym K=1", "--input b: N = 3 here, but 2 elsewhere"},
           {"--input m=1,2,3", "--input m: the input is f32[2,K]: give its sizes with --sym"},
           {"--input m=1,2,3 --sym K=2", "--input m: 3 values given, f32[2,K] has 4"},
           {"--input a=1,x", "--input a: 'x' is not a f32 number"},
           {"--input z=1", "no input or param named 'z'"},
           {"--input a=/nonexistent.npy", "cannot open '/nonexistent.npy'"},
           {"--input a=" + dir + "/output1.npy", "--input a: rank 2 given, the input is f32[N]"},
           {"--output /proc/tj_x", "cannot create folder '/proc/tj_x'"},
           {"--output " + path, "cannot create folder '" + path + "'"},
           {"--check --compiled", "not both"},
       }) {
    Result e = tjc("run " + path + " " + b.args);
    EXPECT_EQ(e.code, 1) << b.args << ": " << e.out;
    EXPECT_NE(e.out.find(b.message), std::string::npos) << b.args << ": " << e.out;
  }
  NDArray f64(DType::f64, {3});
  std::string f64_path = ::testing::TempDir() + "given_f64.npy";
  write_npy(f64_path, f64);
  Result wrong = tjc("run " + path + " --sym K=1 --input b=1,2,3 --input a=" + f64_path);
  EXPECT_EQ(wrong.code, 1);
  EXPECT_NE(wrong.out.find(f64_path + " holds f64, the input is f32[N]"), std::string::npos) << wrong.out;
}

// Weights from a safetensors file: tensors named like params or inputs bind
// them; the others are ignored; a file that binds nothing or holds another
// dtype is an error.
TEST(Tjc, RunWeightsFromSafetensors) {
  std::string path = temp_file("mlp.tj",
                               "graph mlp\ninput %x : f32[N,3]\nparam %w : f32[3,2]\n"
                               "%0 = matmul(%x, %w) : f32[N,2]\nreturn %0\n");
  NDArray x(DType::f32, {2, 3}), w(DType::f32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) x.set(i, i + 1), w.set(i, i % 2 ? -1 : 1);
  std::string file = ::testing::TempDir() + "mlp.safetensors";
  write_safetensors(file, {{"x", x}, {"w", w}, {"unused", NDArray(DType::i64, {4})}});
  // x @ w = [[1-2+3, -1+2-3], [4-5+6, -4+5-6]] = [[2, -2], [5, -5]]: sum 0, and the check passes.
  Result r = tjc("run " + path + " --weights " + file + " --check", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("output 0: f32[2,2] sum=0 "), std::string::npos) << r.out;
  std::string other = ::testing::TempDir() + "other.safetensors";
  write_safetensors(other, {{"v", w}});
  std::string wrong = ::testing::TempDir() + "wrong.safetensors";
  write_safetensors(wrong, {{"w", NDArray(DType::f64, {3, 2})}});
  std::string broken = temp_file("broken.safetensors", "not a safetensors file");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--weights " + other, "none of its 1 tensors names an input or param"},
           {"--weights " + wrong, "tensor 'w' is f64, the graph's w is f32[3,2]"},
           {"--weights " + broken, "not a valid safetensors file"},
           {"--weights " + file + " --input x=1,2,3", "--input x given twice"}}) {
    Result bad = tjc("run " + path + " " + args);
    EXPECT_EQ(bad.code, 1) << args;
    EXPECT_NE(bad.out.find(message), std::string::npos) << args << ": " << bad.out;
  }
}

TEST(Tjc, RunGivenIntegersAreExact) {
  std::string path = temp_file("ints.tj", "graph g\ninput %a : i64[N]\ninput %s : i32[]\ninput %f : bool[2]\nreturn %a, %s, %f\n");
  for (const char* bad : {"a=9223372036854775808", "a=-9223372036854775809", "a=1.0", "a=1e3", "a=nan", "s=2147483648",
                          "s=1,2", "f=1,2", "f=0,0,1"}) {
    Result r = tjc("run " + path + " --input " + bad);
    EXPECT_EQ(r.code, 1) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("tjc: error: --input"), std::string::npos) << r.out;
  }
  Result ok = tjc("run " + path + " --dtype f64 --input a=-7,0,5 --input s=-2147483648 --input f=true,0", "", true);
  ASSERT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out, "output 0: i64[3] sum=-2 l2=8.602325267\noutput 1: i32[] sum=-2147483648 l2=2147483648\n"
                    "output 2: bool[2] sum=1 l2=1\n");
}

TEST(Tjc, RunCompiledAndCheck) {
  std::string path = temp_file("check.tj", "graph g\ninput %x : f32[4,8]\nparam %w : f32[8]\n"
                                           "%0 = mul(%x, %w) : f32[4,8]\n%1 = exp(%0) : f32[4,8]\nreturn %1\n");
  Result interp = tjc("run " + path + " --seed 3", "", true);
  Result compiled = tjc("run " + path + " --seed 3 --compiled", "", true);
  ASSERT_EQ(compiled.code, 0) << compiled.out;
  EXPECT_NE(compiled.out.find("output 0: f32[4,8] sum="), std::string::npos) << compiled.out;
  Result check = tjc("run " + path + " --seed 3 --check", "", true);
  ASSERT_EQ(check.code, 0) << check.out;
  EXPECT_EQ(check.out.rfind(interp.out, 0), 0u) << check.out;  // the interpreter's outputs first
  EXPECT_NE(check.out.find("check output 0: f32[4,8] max_abs_diff="), std::string::npos) << check.out;
  EXPECT_NE(check.out.find(" ok\n"), std::string::npos) << check.out;
  // In f64 the interpreter is more precise than the f32 compiled code: within
  // the default tolerance, not within zero.
  EXPECT_EQ(tjc("run " + path + " --seed 3 --check --dtype f64", "", true).code, 0);
  Result strict = tjc("run " + path + " --seed 3 --check --dtype f64 --tol 0");
  EXPECT_EQ(strict.code, 1) << strict.out;
  EXPECT_NE(strict.out.find("DIFFERENT (beyond tolerance)"), std::string::npos) << strict.out;
  EXPECT_NE(strict.out.find("tjc: error: outputs differ"), std::string::npos) << strict.out;
  for (const char* tol : {"nan", "-1", "2", "x"}) EXPECT_NE(tjc("run " + path + " --check --tol " + tol).code, 0) << tol;
}

TEST(Tjc, RunCheckGivesEachRunItsOwnCaches) {
  // The compiled code writes the cache in place (a donated input); %2 reads
  // the cache as given, so a shared cache would show as a difference.
  std::string path = temp_file("kv.tj", "graph g\ninput %cache : f32[1,1,4,2]\ninput %new : f32[1,1,1,2]\ninput %pos : i64[]\n"
                                        "%0 = kv_write(%cache, %new, %pos) : f32[1,1,4,2]\n%1 = sum(%0) {axes=[2]} : f32[1,1,2]\n"
                                        "%2 = sum(%cache) {axes=[2]} : f32[1,1,2]\nreturn %0, %1, %2\n");
  std::string dir = ::testing::TempDir() + "tj_kv_out";
  Result r = tjc("run " + path + " --check --set pos=3 --input new=5,6 --input cache=0,0,1,1,2,2,3,3", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("output 2: f32[1,1,2] sum=12 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check output 2: f32[1,1,2] max_abs_diff=0 max_rel_diff=0 bit_identical=yes"), std::string::npos) << r.out;
  Result c = tjc("run " + path + " --compiled --set pos=3 --input new=5,6 --input cache=0,0,1,1,2,2,3,3 --output " + dir, "", true);
  ASSERT_EQ(c.code, 0) << c.out;
  NDArray cache = read_npy(dir + "/output0.npy");
  EXPECT_EQ(cache.to_vector(), (std::vector<double>{0, 0, 1, 1, 2, 2, 5, 6}));
  EXPECT_EQ(read_npy(dir + "/output2.npy").to_vector(), (std::vector<double>{6, 6}));
}

TEST(Tjc, NumericOptionsAreBounded) {
  struct Bad {
    std::string args, message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"trace --model llama --layers 99999999999", "--layers"},
           {"trace --model llama --layers 0", "--layers"},
           {"trace --batch 99999999999", "--batch"},
           {"trace --batch 0", "--batch"},
           {"trace --tokens 99999999999", "--tokens must be in 1..1048576"},
           {"trace --tokens 0", "--tokens must be in 1..1048576"},
           {"trace --mode decode --kv-len 99999999999", "--kv-len must be in 1..1048576"},
           {"run /dev/null --seed -1", "--seed"},
           {"opt /dev/null --seed x", "--seed"},
           {"bench --seconds nan", "--seconds"},
           {"bench --busy 65", "--busy"},
           {"bench --busy -1", "--busy"},
           {"bench --repeat 101", "--repeat"},
           {"bench --repeat two", "--repeat"},
           {"bench --seconds 1e9", "--seconds"},
           {"dynamic-demo --steps 99999999999", "--steps must be in 1..100000"},
           {"explain --first-kv 99999999999", "--first-kv in 2..65536"},
       }) {
    Result r = tjc(b.args);
    EXPECT_EQ(r.code, 1) << b.args << ": " << r.out;
    EXPECT_NE(r.out.find(b.message), std::string::npos) << b.args << ": " << r.out;
  }
}

TEST(Tjc, OutputPathErrorsAreClear) {
  std::string file = temp_file("not_a_folder", "x");
  for (const std::string& args : {std::string("codegen --model mlp -o /proc/tj_x"), "codegen --model mlp -o " + file,
                                  std::string("bench --model mlp --dump /proc/tj_x")}) {
    Result r = tjc(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("tjc: error: cannot create folder '"), std::string::npos) << args << ": " << r.out;
  }
  for (const char* args : {"kernels --model mlp --dot /proc/tj_x/k.dot", "memplan --model branches --svg /proc/tj_x/p.svg"}) {
    Result r = tjc(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("tjc: error: cannot write '/proc/tj_x/"), std::string::npos) << args << ": " << r.out;
  }
  // bench compiles in a folder of the user's cache: an unusable one is an error, not ignored.
  Result env = {0, ""};
  std::string cmd = std::string("env TJ_CACHE_DIR=/proc/tj_x ") + TJC_PATH + " bench --model mlp --seconds 0.01 </dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) env.out.append(buf, n);
  int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 1) << env.out;
  EXPECT_NE(env.out.find("cannot create folder '/proc/tj_x/bench_"), std::string::npos) << env.out;
}

TEST(Tjc, OptRunsPassesOnText) {
  std::string path = temp_file("opt.tj",
                               "graph g\ninput %x : i32[3]\ninput %y : i32[3]\n"
                               "%0 = mul(%x, %y) : i32[3]\n%1 = mul(%y, %x) : i32[3]\n%2 = add(%0, %1) : i32[3]\n"
                               "%3 = const {value=1} : i32[]\n%4 = mul(%2, %3) : i32[3]\nreturn %4\n");
  Result r = tjc("opt " + path, "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "graph g\ninput %x : i32[3]\ninput %y : i32[3]\n%0 = mul(%x, %y) : i32[3]\n%1 = add(%0, %0) : i32[3]\nreturn %1\n");
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

TEST(Tjc, KernelsJson) {
  Result r = tjc("kernels --model llama-layer --tokens 16 --json", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["kernels"].size(), 12u);
  for (const auto& k : j["kernels"]) {
    EXPECT_TRUE(k.contains("kind") && k.contains("ops") && k.contains("bytes_read") && k.contains("bytes_written") &&
                k.contains("flops"));
    EXPECT_GT(k["ops"].size(), 0u);
  }
  EXPECT_EQ(nlohmann::json::parse(tjc("kernels --model llama-layer --tokens 16 --json --no-fuse --no-flash", "", true).out)["kernels"].size(), 51u);
  std::string dot = ::testing::TempDir() + "layer.dot";
  ASSERT_EQ(tjc("kernels --model llama-layer --dot " + dot, "", true).code, 0);
  std::ifstream f(dot);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("subgraph cluster_0"), std::string::npos);
  EXPECT_NE(text.find("(attention)"), std::string::npos);
}

// tjc train on a small text: the loss falls, the curve is drawn, a sample
// of the asked length follows the prompt; bad arguments are clear errors.
TEST(Tjc, TrainLearnsAndSamples) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a small text that repeats. ";
  std::string file = temp_file("train.txt", text), svg = ::testing::TempDir() + "loss.svg";
  Result r = tjc("train --text " + file + " --steps 80 --batch 2 --seq 16 --layers 1 --warmup 5 --sample 12 --prompt ab --json --svg " + svg,
                 "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["loss"].size(), 80u);
  EXPECT_GT(j["first_loss"].get<double>(), 4.0);
  EXPECT_LT(j["final_loss"].get<double>(), j["first_loss"].get<double>() / 2);
  EXPECT_EQ(j["sample"].get<std::string>().size(), 14u);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
  std::ifstream f(svg);
  std::string picture((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(picture.find("<polyline"), std::string::npos);
  Result missing = tjc("train --text /nonexistent/text.txt --steps 1");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("cannot read"), std::string::npos) << missing.out;
  Result tiny = tjc("train --text " + temp_file("short.txt", "abc") + " --steps 1");
  EXPECT_EQ(tiny.code, 1);
  EXPECT_NE(tiny.out.find("shorter than a sequence"), std::string::npos) << tiny.out;
  EXPECT_EQ(tjc("train --seq 1").code, 1);
}

// tjc grad: the partitioned forward and backward as IR, and the report.
TEST(Tjc, GradReportsWhatTheForwardSaves) {
  Result r = tjc("grad --model llama-layer --tokens 16 --json", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["saved"].size(), 0u);
  EXPECT_LE(j["saved_bytes"].get<int64_t>() * 10, j["every_forward_value_bytes"].get<int64_t>() * 6);  // at most 60%
  int64_t per_kernel = 0;
  for (const auto& k : j["kernels"]) per_kernel += k["saved_bytes"].get<int64_t>();
  EXPECT_EQ(per_kernel, j["saved_bytes"].get<int64_t>());
  Result ir = tjc("grad --model mlp --tokens 4", "", true);
  ASSERT_EQ(ir.code, 0) << ir.out;
  size_t back = ir.out.find("// backward");
  ASSERT_NE(back, std::string::npos);
  EXPECT_NO_THROW(parse_graph(ir.out.substr(ir.out.find('\n') + 1, back - ir.out.find('\n') - 1)));
  EXPECT_NO_THROW(parse_graph(ir.out.substr(ir.out.find('\n', back) + 1)));
  EXPECT_EQ(tjc("grad --model mlp --wrt nope").code, 1);
}

TEST(Tjc, AnalyzeLlama8B) {
  for (const char* mode : {"--mode prefill --tokens 2048", "--mode decode --kv-len 4096"}) {
    Result r = tjc(std::string("analyze --config llama3-8b --dtype bf16 --hardware h100 --json ") + mode, "", true);
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["variants"].size(), 4u);
    std::vector<std::string> names;
    for (const auto& v : j["variants"]) {
      names.push_back(v["name"]);
      EXPECT_GT(v["time_s"].get<double>(), 0);
      EXPECT_GT(v["bytes"].get<int64_t>(), 0);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"eager", "unfused", "fused", "fused+flash"}));
    // Fusion never costs more than not fusing, on the roofline.
    EXPECT_LT(j["variants"][3]["time_s"].get<double>(), j["variants"][1]["time_s"].get<double>());
    EXPECT_EQ(j["layer"]["weight_bytes"].get<int64_t>(), 436224000);
    EXPECT_GT(j["layer"]["peak_activation_bytes"].get<int64_t>(), 0);
  }
}

TEST(Tjc, MemplanJsonAndSvg) {
  std::string svg = ::testing::TempDir() + "plan.svg";
  Result r = tjc("memplan --model branches --json --svg " + svg, "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["peak_bytes"].get<int64_t>() * 3, j["peak_bytes_original_order"].get<int64_t>());
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), j["lower_bound_bytes"].get<int64_t>());
  for (const auto& b : j["buffers"]) EXPECT_TRUE(b.contains("size") && b.contains("first") && b.contains("last") && b.contains("offset"));
  std::ifstream f(svg);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("<rect"), std::string::npos);
  Result sweep = tjc("memplan --model llama-layer --config llama3-8b --tokens 2048 --dtype bf16 --json", "", true);
  auto s = nlohmann::json::parse(sweep.out);
  ASSERT_EQ(s["sweep"].size(), 7u);  // 512 ... 32768
  EXPECT_GT(s["sweep"][6]["unfused_attention_peak_bytes"].get<int64_t>(), 10 * s["sweep"][6]["flash_peak_bytes"].get<int64_t>());
}

TEST(Tjc, AnalyzeOnThisCpuCalibratesOnceIntoTheCache) {
  std::string dir = ::testing::TempDir() + "tj_cache_calibrate_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);  // so that it really measures
  std::string env = "TJ_CACHE_DIR=" + dir + " ";
  std::string cmd = "env " + env + TJC_PATH + " analyze --hardware cpu --json </dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["hardware"], "cpu");
  auto read = [&] {
    std::ifstream cal(dir + "/calibration.json");
    EXPECT_TRUE(cal.good());
    return nlohmann::json::parse(cal);
  };
  auto c = read();
  EXPECT_GT(c["sgemm_flops"].get<double>(), 1e9);
  EXPECT_GT(c["stream_bandwidth"].get<double>(), 1e8);
  const std::string here = c["machine"].get<std::string>();
  EXPECT_NE(here.find("threads"), std::string::npos) << here;
  // A file measured on another machine is measured again.
  c["machine"] = "another machine";
  c["sgemm_flops"] = 1.0;
  std::ofstream(dir + "/calibration.json") << c.dump();
  ASSERT_EQ(std::system((cmd + " >/dev/null").c_str()), 0);
  auto again = read();
  EXPECT_EQ(again["machine"], here);
  EXPECT_GT(again["sgemm_flops"].get<double>(), 1e9);
  std::filesystem::remove_all(dir);
}

TEST(Tjc, BenchAndCodegen) {
  Result r = tjc("bench --model llama-layer --config tiny --mode decode --kv-len 32 --seconds 0.2 --json --busy 1 --repeat 1", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"interpreter_us", "compiled_us", "compiled_p90_us", "speedup", "gflops", "gbps", "limit_fraction"})
    EXPECT_GT(j[k].get<double>(), 0) << k;
  EXPECT_LT(j["max_rel_diff"].get<double>(), 1e-5);
  // The first call in fresh processes: cold, then warm (no compiler run).
  EXPECT_FALSE(j["first_call_cold"]["cache_hit"].get<bool>());
  EXPECT_TRUE(j["first_call_warm"]["cache_hit"].get<bool>());
  EXPECT_GT(j["first_call_cold"]["first_call_s"].get<double>(), j["first_call_warm"]["first_call_s"].get<double>());
  EXPECT_EQ(j["first_call_cold"]["stages"][0]["stage"], "trace");
  // One quiet and one busy fresh process, each with its per-call figures.
  ASSERT_EQ(j["fresh_processes"]["quiet"].size(), 1u);
  ASSERT_EQ(j["fresh_processes"]["busy"].size(), 1u);
  EXPECT_GT(j["fresh_processes"]["busy"][0]["p90_us"].get<double>(), 0);
  EXPECT_GE(j["fresh_processes"]["busy"][0]["calls"].get<int>(), 10);
  std::string dir = ::testing::TempDir() + "tj_codegen_out";
  Result c = tjc("codegen --model llama-layer --mode prefill -o " + dir, "", true);
  ASSERT_EQ(c.code, 0) << c.out;
  std::ifstream f(dir + "/kernels.cpp");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("_attention_flash_attn(void** t)"), std::string::npos);
  EXPECT_NE(text.find("tj_gemm("), std::string::npos);
}

// Weight formats: the pass in `tjc opt --log`; `tjc bench --weights` with
// each format beside f32, and the whole model's greedy tokens.
TEST(Tjc, WeightFormats) {
  std::string path = temp_file("weights.tj", "graph g\ninput %x : f32[3,64]\nparam %w : f32[64,64]\n%0 = matmul(%x, %w) : f32[3,64]\nreturn %0\n");
  Result logged = tjc("opt " + path + " --freeze --weights int8 --log");
  ASSERT_EQ(logged.code, 0) << logged.out;
  const size_t at = logged.out.find("// pass quantize_weights");
  ASSERT_NE(at, std::string::npos) << logged.out;
  EXPECT_EQ(logged.out.substr(at, logged.out.find('\n', at) - at).find("changed") != std::string::npos, true) << logged.out;
  EXPECT_NE(logged.out.find(": i8[64,64]"), std::string::npos) << logged.out;
  Result bad = tjc("opt " + path + " --weights f16");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--weights"), std::string::npos) << bad.out;

  Result r = tjc("bench --model llama --config tiny --layers 1 --mode decode --kv-len 16 --weights int8 --steps 4 --seconds 0.05 --json", "",
                 true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["max_rel_diff"].get<double>(), 1e-5);  // against the interpreter on the converted weights
  const auto& f = j["weight_formats"]["formats"];
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0]["weights"], "f32");
  EXPECT_EQ(f[1]["weights"], "int8");
  EXPECT_LT(f[1]["weight_mb"].get<double>(), f[0]["weight_mb"].get<double>() * 0.6);
  EXPECT_GT(f[1]["max_rel_err"].get<double>(), 0);
  EXPECT_LT(f[1]["max_rel_err"].get<double>(), 5e-2);
  EXPECT_GT(f[1]["min_cosine"].get<double>(), 0.99);
  EXPECT_LT(f[1]["kernels_vs_reference"].get<double>(), 1e-5);
  EXPECT_GT(f[1]["median_us"].get<double>(), 0);
  EXPECT_GT(j["weight_formats"]["stream_gbps_median"].get<double>(), 0);
  const auto& m = j["model_accuracy"]["formats"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["tokens"].size(), 4u);
  EXPECT_EQ(m[0]["same_tokens"], 4);
  EXPECT_EQ(m[0]["log_likelihood_diff"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(m[1]["log_likelihood"].get<double>()));
}

// What the machine can run code on; none of OpenCL or CUDA is an answer, not an error.
TEST(Tjc, DevicesSaysWhatIsThere) {
  Result r = tjc("devices");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("cpu: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nopencl"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncuda"), std::string::npos) << r.out;
}

TEST(Tjc, AnalysisNeedsConcreteSizes) {
  for (const char* cmd : {"kernels", "analyze", "memplan"}) {
    Result r = tjc(std::string(cmd) + " --model mlp --tokens T");
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.out.find("symbolic sizes (T)"), std::string::npos) << r.out;
  }
}

TEST(Tjc, DynamicDemo) {
  Result r = tjc("dynamic-demo --steps 3 --first-kv 30 --json", "", true);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["decode"].size(), 4u);
  EXPECT_EQ(j["decode"][0]["policy"], "static");
  EXPECT_EQ(j["decode"][0]["compilations"], 3);  // KV 30, 31, 32
  EXPECT_EQ(j["decode"][1]["compilations"], 1);  // bucket 32
  EXPECT_EQ(j["decode"][2]["compilations"], 1);  // symbolic
  EXPECT_EQ(j["decode"][3]["compilations"], 2);  // 30 static, then symbolic
  EXPECT_TRUE(j["symbolic_check"]["identical"].get<bool>()) << r.out;
  EXPECT_EQ(j["symbolic_check"]["compilations"], 1);
  EXPECT_GT(j["decode"][1]["wasted_fraction"].get<double>(), 0);
  EXPECT_LT(j["decode_policies_max_abs_diff"].get<double>(), 1e-4);
  EXPECT_GT(j["loop"]["graph_break_graphs"].get<int64_t>(), 3);
  EXPECT_EQ(j["loop"]["while_loop_graphs"].get<int64_t>(), 1);
  EXPECT_LT(j["loop"]["max_abs_diff"].get<double>(), 1e-6);
  EXPECT_GT(j["guard_check_ns"].get<double>(), 0);
  EXPECT_NE(tjc("dynamic-demo --steps 0").code, 0);
  Result e = tjc("explain --steps 2 --first-kv 30", "", true);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("tensors[2].shape[2] == 30 failed (got 31)"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("tensors[2]: f32[1,2,(16,32],16]"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("graph break at"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("f32[1,2,>=2,16]"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("with tensors[2].shape[2] tensors[3].shape[2] symbolic"), std::string::npos) << e.out;
}

TEST(Tjc, DemoRunsPrefillAndDecode) {
  Result r = tjc("demo");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("prefill: 16 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode: 8 greedy steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("same tokens: yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated tokens:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tj
