// The GPU emitter's sources: one kernel form rendered for OpenCL C and CUDA
// C, the same body in both; CUDA sources compiled with nvcc for sm_80 and
// sm_90 (where the CUDA toolkit is installed: no GPU needed); devices that
// are not here are clear errors. Running the kernels is the compiled suites'
// job (OpenCL.Compiled, OpenCL.EdgeSemantics).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "codegen/gpu/emit.h"
#include "compiler/compile.h"
#include "compiler/driver.h"
#include "ir/text.h"
#include "models/llama.h"
#include "reference/random_inputs.h"
#include "runtime/device/cuda/cuda.h"
#include "support/random_graph.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

// The program of `g` for `target`, optimized and scheduled as a compilation would.
gpu::Program program(const Graph& g, gpu::Target target, DType weights = DType::f32) {
  RandomInputOptions ro;
  for (const auto& x : size_symbols(g)) ro.sizes[x] = 5;  // (params have no symbolic sizes)
  Bindings params;
  for (auto& [k, v] : random_inputs(g, ro))
    if (g.node(g.find(k)).op == Op::param) params[k] = v;
  CompileOptions co;
  co.weights = weights;
  co.device = parse_device(gpu::target_name(target));  // the device of the target's name renders it
  Compilation c;
  run_stages(c, &g, params, co, Stage::emit);
  return c.gpu;
}

// What follows the renderer's prologue in each kernel: the body.
std::vector<std::string> bodies(const std::string& source) {
  std::vector<std::string> r;
  const std::string mark = "(void)tj_gid; (void)tj_lid; (void)tj_grp;\n";
  for (size_t at = source.find(mark); at != std::string::npos; at = source.find(mark, at + 1)) {
    size_t from = at + mark.size();
    // OpenCL declares its buffers after the mark (from a memory object and an offset): skip those lines.
    while (source.compare(from, 11, "  __global ") == 0) from = source.find('\n', from) + 1;
    r.push_back(source.substr(from, source.find("\n}\n", from) - from));
  }
  return r;
}

TEST(GpuCode, OneFormTwoTargets) {
  Graph g = models::trace_llama_layer(models::llama_config("tiny"), {1, 8, 8, DType::f32});
  gpu::Program cl = program(g, gpu::Target::opencl), cu = program(g, gpu::Target::cuda);
  ASSERT_EQ(cl.launches.size(), cu.launches.size());
  EXPECT_GE(cl.launches.size(), 8u);
  EXPECT_EQ(bodies(cl.source), bodies(cu.source)) << "the targets differ only in the renderer's hooks";
  EXPECT_NE(cl.source.find("__kernel void"), std::string::npos);
  EXPECT_NE(cl.source.find("get_global_id(0)"), std::string::npos);
  EXPECT_NE(cl.source.find("__local float tj_a[256]"), std::string::npos);  // a matmul tile in work-group memory
  EXPECT_NE(cu.source.find("extern \"C\" __global__ void"), std::string::npos);
  EXPECT_NE(cu.source.find("blockIdx.x"), std::string::npos);
  EXPECT_NE(cu.source.find("__shared__ float tj_a[256]"), std::string::npos);
  EXPECT_EQ(cu.source.find("__kernel"), std::string::npos);
  EXPECT_EQ(cl.source.find("__global__"), std::string::npos);
}

// A small convnet in `dt`: a strided 3x3 conv with a bias and a ReLU, a max
// pool, a depthwise 3x3, a 1x1 and a residual add, channels first; in f32
// an average pool's sum after them.
Graph small_convnet(const std::string& dt) {
  const std::string t = dt + "[";
  return parse_graph("graph convnet\ninput %x : " + t + "2,3,17,16]\nparam %w0 : " + t + "8,3,3,3]\nparam %b0 : " + t +
                     "8]\nparam %w1 : " + t + "8,1,3,3]\nparam %w2 : " + t + "8,8,1,1]\n"
                     "%0 = conv(%x, %w0, %b0) {stride=[2, 2], pad_begin=[1, 1], pad_end=[1, 1]} : " + t + "2,8,9,8]\n"
                     "%1 = relu(%0) : " + t + "2,8,9,8]\n"
                     "%2 = max_pool(%1) {kernel=[3, 3], stride=[2, 2], pad_begin=[1, 1], pad_end=[1, 1]} : " + t + "2,8,5,4]\n"
                     "%3 = conv(%2, %w1) {pad_begin=[1, 1], pad_end=[1, 1], groups=8} : " + t + "2,8,5,4]\n"
                     "%4 = conv(%3, %w2) : " + t + "2,8,5,4]\n"
                     "%5 = add(%4, %2) : " + t + "2,8,5,4]\n" +
                     (dt == "f32" ? "%6 = sum_pool(%5) {kernel=[2, 2], stride=[2, 2], pad_end=[1, 0]} : f32[2,8,3,2]\nreturn %6\n" : "return %5\n"));
}

// Convolutions and pools are kernels of their own on GPUs, as on the CPU:
// no window form (slices and matmuls) is left.
TEST(GpuCode, ConvolutionsAndPoolsAreKernelsOfTheirOwn) {
  for (const char* dt : {"f32", "bf16"}) {
    SCOPED_TRACE(dt);
    Graph g = small_convnet(dt);
    gpu::Program cl = program(g, gpu::Target::opencl), cu = program(g, gpu::Target::cuda);
    EXPECT_EQ(bodies(cl.source), bodies(cu.source));
    size_t convs = 0, pools = 0;
    for (const gpu::Launch& l : cl.launches) {
      convs += l.name.ends_with("_conv");
      pools += l.name.ends_with("_max_pool") || l.name.ends_with("_sum_pool");
      EXPECT_FALSE(l.name.ends_with("_matmul")) << l.name;
    }
    EXPECT_EQ(convs, 3u);
    EXPECT_EQ(pools, std::string(dt) == "f32" ? 2u : 1u);
  }
}

// A row-wise op's kernel is its row's RowForm, printed by each backend: the
// C++ program and the GPU program carry the same statistics and stores.
TEST(GpuCode, RowKernelsPrintTheOpsRowForm) {
  Graph g = parse_graph("graph g\ninput %x : f32[3,40]\ninput %w : f32[40]\ninput %b : f32[40]\n"
                        "%0 = layer_norm(%x, %w, %b) {eps=0.001} : f32[3,40]\nreturn %0\n");
  // The op kept whole (the default pipeline decomposes it where fusion does as well).
  auto source = [&](Device d) {
    CompileOptions co;
    co.device = d;
    co.passes = {"dce"};
    co.program_cache = false;
    Compilation c;
    run_stages(c, &g, {}, co, Stage::emit);
    return d.is_cpu() ? c.program.source : c.gpu.source;
  };
  const std::string cpp = source(Device()), gpu = source(parse_device("opencl"));
  for (const std::string& text : {std::string("mu /= ((double)40LL);"), std::string("const double inv = 1.0 / sqrt(var / ((double)40LL) + ("),
                                  std::string("double var = 0;"), std::string("const double tj_term = ((double)(")}) {
    EXPECT_NE(cpp.find(text), std::string::npos) << text;
    EXPECT_NE(gpu.find(text), std::string::npos) << text;
  }
}

// nvcc from $TJ_NVCC, the PATH, or /usr/local/cuda; "" when there is none.
std::string nvcc() {
  if (const char* e = std::getenv("TJ_NVCC"); e && *e) return e;
  if (std::system("command -v nvcc > /dev/null 2>&1") == 0) return "nvcc";
  return std::filesystem::exists("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : "";
}

TEST(GpuCode, CudaSourcesCompileWithNvcc) {
  const std::string cc = nvcc();
  if (cc.empty()) GTEST_SKIP() << "no nvcc ($TJ_NVCC, the PATH, /usr/local/cuda/bin): the CUDA toolkit is not installed";
  const auto& tiny = models::llama_config("tiny");
  std::vector<std::pair<std::string, gpu::Program>> programs;
  programs.emplace_back("prefill", program(models::trace_llama_layer(tiny, {1, Dim::symbol("T"), 16, DType::f32}), gpu::Target::cuda));
  programs.emplace_back("decode int8", program(models::trace_llama_layer(tiny, {1, 1, 64, DType::f32}), gpu::Target::cuda, DType::i8));
  programs.emplace_back("bf16", program(models::trace_llama_layer(tiny, {2, 5, 12, DType::bf16}), gpu::Target::cuda));
  programs.emplace_back("f64 model", program(models::trace_llama(tiny, {1, 6, 9, DType::f64}, 2), gpu::Target::cuda));
  programs.emplace_back("attention backward",
                        program(parse_graph("graph g\ninput %q : f32[2,4,7,16]\ninput %k : f32[2,2,9,16]\ninput %v : f32[2,2,9,8]\n"
                                            "input %dout : f32[2,4,7,8]\ninput %delta : f32[2,4,7]\ninput %pos : i64[]\ninput %bias : f32[2,1,7,9]\n"
                                            "%0 = attn_lse(%q, %k, %pos, %bias) {scale=0.25, causal=true, bias=true} : f32[2,4,7]\n"
                                            "%1 = attn_dq(%q, %k, %v, %dout, %0, %delta, %pos, %bias) {scale=0.25, causal=true, bias=true} : f32[2,4,7,16]\n"
                                            "%2 = attn_dkv(%q, %k, %v, %dout, %0, %delta, %pos, %bias) {scale=0.25, causal=true, bias=true} : f32[2,2,9,24]\n"
                                            "return %0, %1, %2\n"),
                                gpu::Target::cuda));
  programs.emplace_back("convnet", program(small_convnet("f32"), gpu::Target::cuda));
  programs.emplace_back("convnet bf16", program(small_convnet("bf16"), gpu::Target::cuda));
  for (uint64_t seed = 0; seed < 4; ++seed)
    programs.emplace_back("random " + std::to_string(seed), program(testing::random_graph(seed, DType::f64, 16), gpu::Target::cuda));
  const std::string dir = std::string(::testing::TempDir()) + "tj_nvcc_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  for (const auto& [name, p] : programs) {
    const std::string cu = dir + "/kernels.cu";
    std::ofstream(cu) << p.source;
    for (const char* arch : {"sm_80", "sm_90"}) {
      // -diag-suppress 177: generated code declares index variables and
      // has helpers that a program may not use.
      const std::string cmd = cc + " -arch=" + arch + " -cubin -diag-suppress 177 -o " + dir + "/kernels.cubin " + cu + " > " + dir + "/log 2>&1";
      const int rc = std::system(cmd.c_str());
      std::ifstream log(dir + "/log");
      const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      EXPECT_EQ(rc, 0) << name << " for " << arch << ":\n" << text;
      EXPECT_EQ(text.find("warning"), std::string::npos) << name << " for " << arch << ":\n" << text;
    }
  }
  std::filesystem::remove_all(dir);
}

// NVRTC (where the toolkit has it) compiles what nvcc does, into the cache
// a machine without the toolkit reads.
TEST(GpuCode, NvrtcCompilesIntoTheCache) {
  const std::string dir = std::string(::testing::TempDir()) + "tj_nvrtc_" + std::to_string(::getpid());
  setenv("TJ_CACHE_DIR", dir.c_str(), 1);
  const gpu::Program p = program(models::trace_llama_layer(models::llama_config("tiny"), {1, 1, 16, DType::f32}), gpu::Target::cuda);
  std::string how;
  std::string cubin;
  try {
    cubin = cuda::compile(p.source, "sm_90", &how);
  } catch (const Error& e) {
    unsetenv("TJ_CACHE_DIR");
    std::filesystem::remove_all(dir);
    if (std::string(e.what()).find("no compiler") != std::string::npos) GTEST_SKIP() << e.what();
    FAIL() << e.what();
  }
  EXPECT_GT(cubin.size(), 1000u);
  EXPECT_TRUE(how == "NVRTC" || how == "nvcc") << how;
  EXPECT_EQ(cuda::compile(p.source, "sm_90", &how), cubin);
  EXPECT_EQ(how, "cache");
  EXPECT_THROW(cuda::compile("extern \"C\" __global__ void k() { undeclared(); }\n", "sm_90"), Error);
  unsetenv("TJ_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

// The list of places code runs: the CPU, then the registry's rows, each
// found by its name and named once.
TEST(GpuCode, EveryDeviceIsFoundByItsName) {
  const std::vector<std::string_view> names = device_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "cpu");
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  for (size_t i = 1; i < names.size(); ++i) {
    const Device d = parse_device(names[i]);
    EXPECT_FALSE(d.is_cpu()) << names[i];
    EXPECT_EQ(device_name(d), names[i]);
    EXPECT_EQ(device::find_kind(names[i]), &d.kind());
    EXPECT_NE(d.kind().open, nullptr) << names[i];
    EXPECT_NE(d.kind().list, nullptr) << names[i];
    EXPECT_EQ(std::count(names.begin(), names.end(), names[i]), 1) << names[i];
  }
  for (std::string_view n : names) EXPECT_NE(device_list().find(n), std::string::npos) << n;
  try {
    (void)parse_device("gpu");
    FAIL() << "parsed 'gpu'";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown device 'gpu' (" + device_list() + ")");
  }
}

TEST(GpuCode, DevicesThatAreNotHereAreClearErrors) {
  Graph g = parse_graph("graph g\ninput %x : f32[4]\n%0 = exp(%x) : f32[4]\nreturn %0\n");
  CompileOptions co;
  co.device = parse_device("cuda");
  if (cuda::devices().empty()) {  // (where there is one, scripts/gpu-check runs on it)
    try {
      (void)tj::compile(g, {}, co);
      FAIL() << "compiled for CUDA without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA: no device"), std::string::npos) << e.what();
    }
  }
  setenv("TJ_DEVICE", "tpu", 1);
  EXPECT_THROW((void)tj::compile(g, {}), Error);
  unsetenv("TJ_DEVICE");
  EXPECT_THROW((void)parse_device("gpu"), Error);
  // Float8 is not generated for GPUs: an error that names it, not a wrong result.
  Graph f8 = parse_graph("graph g\ninput %x : f32[4]\n%0 = cast(%x) {to=f8e4m3fn} : f8e4m3fn[4]\n%1 = cast(%0) {to=f32} : f32[4]\nreturn %1\n");
  try {
    (void)program(f8, gpu::Target::opencl);
    FAIL() << "float8 on a GPU";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("f8e4m3fn"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tj
