#include "runtime/device/cuda/cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

#include "support/files.h"
#include "support/paths.h"
#include "support/process.h"
#include "tensorjit/error.h"

namespace tj::cuda {

namespace {

// The driver API's types, as its ABI has them (no cuda.h needed to build).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
constexpr int kComputeMajor = 75, kComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
constexpr int kCaptureRelaxed = 2;                     // CU_STREAM_CAPTURE_MODE_RELAXED
constexpr unsigned kNonBlocking = 1;                   // CU_STREAM_NON_BLOCKING

// Each entry point once: its name and type.
#define TJ_CUDA_FUNCTIONS(X)                                                                                                  \
  X(cuInit, CUresult (*)(unsigned))                                                                                           \
  X(cuDeviceGetCount, CUresult (*)(int*))                                                                                     \
  X(cuDeviceGet, CUresult (*)(CUdevice*, int))                                                                                \
  X(cuDeviceGetName, CUresult (*)(char*, int, CUdevice))                                                                      \
  X(cuDeviceTotalMem_v2, CUresult (*)(size_t*, CUdevice))                                                                     \
  X(cuDeviceGetAttribute, CUresult (*)(int*, int, CUdevice))                                                                  \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext*, CUdevice))                                                             \
  X(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice))                                                                     \
  X(cuCtxPushCurrent_v2, CUresult (*)(CUcontext))                                                                             \
  X(cuCtxPopCurrent_v2, CUresult (*)(CUcontext*))                                                                             \
  X(cuModuleLoadData, CUresult (*)(CUmodule*, const void*))                                                                   \
  X(cuModuleUnload, CUresult (*)(CUmodule))                                                                                   \
  X(cuModuleGetFunction, CUresult (*)(CUfunction*, CUmodule, const char*))                                                    \
  X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr*, size_t))                                                                        \
  X(cuMemFree_v2, CUresult (*)(CUdeviceptr))                                                                                  \
  X(cuMemcpyHtoDAsync_v2, CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))                                           \
  X(cuMemcpyDtoHAsync_v2, CUresult (*)(void*, CUdeviceptr, size_t, CUstream))                                                 \
  X(cuStreamCreate, CUresult (*)(CUstream*, unsigned))                                                                        \
  X(cuStreamDestroy_v2, CUresult (*)(CUstream))                                                                               \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                                                              \
  X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
                                 void**, void**))                                                                             \
  X(cuStreamBeginCapture_v2, CUresult (*)(CUstream, int))                                                                     \
  X(cuStreamEndCapture, CUresult (*)(CUstream, CUgraph*))                                                                     \
  X(cuGraphInstantiateWithFlags, CUresult (*)(CUgraphExec*, CUgraph, unsigned long long))                                     \
  X(cuGraphLaunch, CUresult (*)(CUgraphExec, CUstream))                                                                       \
  X(cuGraphExecDestroy, CUresult (*)(CUgraphExec))                                                                            \
  X(cuGraphDestroy, CUresult (*)(CUgraph))                                                                                    \
  X(cuGetErrorName, CUresult (*)(CUresult, const char**))

struct Api {
  void* lib = nullptr;
  std::string why;  // when lib is null
#define TJ_CUDA_FN(name, type) \
  using name##_type = type;    \
  name##_type name = nullptr;
  TJ_CUDA_FUNCTIONS(TJ_CUDA_FN)
#undef TJ_CUDA_FN
};

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      a.why = "no NVIDIA driver (libcuda.so.1 not found)";
      return;
    }
    bool all = true;
#define TJ_CUDA_FN(name, type) all = (a.name = reinterpret_cast<Api::name##_type>(dlsym(lib, #name))) != nullptr && all;
    TJ_CUDA_FUNCTIONS(TJ_CUDA_FN)
#undef TJ_CUDA_FN
    if (!all) {
      a.why = "the NVIDIA driver lacks an entry point (CUDA 12 or later is needed)";
      dlclose(lib);
      return;
    }
    if (CUresult e = a.cuInit(0); e != 0) {
      a.why = "cuInit failed with error " + std::to_string(e) + " (no usable GPU)";
      dlclose(lib);
      return;
    }
    a.lib = lib;
  });
  return a;
}

void check(CUresult e, const char* call) {
  if (e == 0) return;
  const char* name = nullptr;
  if (api().cuGetErrorName) api().cuGetErrorName(e, &name);
  throw Error(std::string("CUDA: ") + call + " failed with error " + std::to_string(e) + (name ? std::string(" (") + name + ")" : ""));
}

// NVRTC, opened at run time: source to cubin in this process.
struct Nvrtc {
  void* lib = nullptr;
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(void*, int, const char* const*) = nullptr;
  int (*log_size)(void*, size_t*) = nullptr;
  int (*log)(void*, char*) = nullptr;
  int (*cubin_size)(void*, size_t*) = nullptr;
  int (*cubin)(void*, char*) = nullptr;
  int (*destroy)(void**) = nullptr;
  int major = 0, minor = 0;  // nvrtcVersion
};

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"})
      if ((n.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!n.lib) return;
    n.create = reinterpret_cast<decltype(n.create)>(dlsym(n.lib, "nvrtcCreateProgram"));
    n.compile = reinterpret_cast<decltype(n.compile)>(dlsym(n.lib, "nvrtcCompileProgram"));
    n.log_size = reinterpret_cast<decltype(n.log_size)>(dlsym(n.lib, "nvrtcGetProgramLogSize"));
    n.log = reinterpret_cast<decltype(n.log)>(dlsym(n.lib, "nvrtcGetProgramLog"));
    n.cubin_size = reinterpret_cast<decltype(n.cubin_size)>(dlsym(n.lib, "nvrtcGetCUBINSize"));
    n.cubin = reinterpret_cast<decltype(n.cubin)>(dlsym(n.lib, "nvrtcGetCUBIN"));
    n.destroy = reinterpret_cast<decltype(n.destroy)>(dlsym(n.lib, "nvrtcDestroyProgram"));
    if (!n.create || !n.compile || !n.log_size || !n.log || !n.cubin_size || !n.cubin || !n.destroy) n.lib = nullptr;
    auto version = reinterpret_cast<int (*)(int*, int*)>(dlsym(n.lib, "nvrtcVersion"));
    if (n.lib && version) version(&n.major, &n.minor);
  });
  return n;
}

std::string with_nvrtc(const Nvrtc& n, const std::string& source, const std::string& arch) {
  void* p = nullptr;
  if (n.create(&p, source.c_str(), "kernels.cu", 0, nullptr, nullptr) != 0) throw Error("CUDA: nvrtcCreateProgram failed");
  const std::string gpu = "--gpu-architecture=" + arch;
  const char* options[] = {gpu.c_str(), "--std=c++17", "--diag-suppress=177"};
  const int status = n.compile(p, 3, options);
  std::string out;
  size_t size = 0;
  if (status != 0) {
    n.log_size(p, &size);
    out.resize(size);
    if (size) n.log(p, out.data());
    n.destroy(&p);
    throw Error("CUDA: NVRTC could not compile the program:\n" + out);
  }
  n.cubin_size(p, &size);
  out.resize(size);
  if (size) n.cubin(p, out.data());
  n.destroy(&p);
  return out;
}

std::string nvcc_path() {
  if (const char* e = std::getenv("TJ_NVCC"); e && *e) return e;
  std::string out;
  if (run_command("command -v nvcc", &out, false) == 0 && !out.empty()) return "nvcc";
  return std::filesystem::exists("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : "";
}

}  // namespace

std::vector<Device> devices(std::string* why) {
  std::vector<Device> r;
  const Api& a = api();
  if (!a.lib) {
    if (why) *why = a.why;
    return r;
  }
  int n = 0;
  if (a.cuDeviceGetCount(&n) != 0 || n == 0) {
    if (why) *why = "the NVIDIA driver reports no device";
    return r;
  }
  for (int i = 0; i < n; ++i) {
    CUdevice d = 0;
    char name[256] = {0};
    Device dev;
    size_t bytes = 0;
    if (a.cuDeviceGet(&d, i) != 0 || a.cuDeviceGetName(name, sizeof name - 1, d) != 0) continue;
    a.cuDeviceTotalMem_v2(&bytes, d);
    a.cuDeviceGetAttribute(&dev.major, kComputeMajor, d);
    a.cuDeviceGetAttribute(&dev.minor, kComputeMinor, d);
    dev.name = name;
    dev.memory_bytes = bytes;
    dev.ordinal = i;
    r.push_back(dev);
  }
  return r;
}

std::string compile(const std::string& source, const std::string& arch, std::string* how) {
  namespace fs = std::filesystem;
  // The key: the source, the architecture, and the compiler that would make
  // the entry (a cubin of a newer toolkit may not load on an older driver).
  const Nvrtc& n = nvrtc();
  const std::string compiler = n.lib ? "nvrtc " + std::to_string(n.major) + "." + std::to_string(n.minor) : "nvcc";
  const std::string keyed = compiler + '\n' + arch + '\n' + source;
  const std::string key = hash_hex(keyed.data(), keyed.size());
  const fs::path entry = fs::path(cache_dir()) / "cuda" / (key + ".cubin");
  bool ok = false;
  if (std::string cached = read_file(entry, &ok); ok && !cached.empty()) {
    if (how) *how = "cache";
    return cached;
  }
  std::string cubin;
  if (n.lib) {
    cubin = with_nvrtc(n, source, arch);
    if (how) *how = "NVRTC";
  } else if (const std::string cc = nvcc_path(); !cc.empty()) {
    const fs::path dir = fs::path(cache_dir()) / "cuda" / ("tmp-" + key);
    fs::create_directories(dir);
    write_atomic(dir / "kernels.cu", source);
    std::string log;
    const int rc = run_command(shell_quote(cc) + " -arch=" + arch + " -cubin -diag-suppress 177 -o " + shell_quote((dir / "kernels.cubin").string()) + " " +
                                   shell_quote((dir / "kernels.cu").string()),
                               &log);
    cubin = read_file(dir / "kernels.cubin", &ok);
    fs::remove_all(dir);
    if (rc != 0 || !ok) throw Error("CUDA: nvcc could not compile the program (status " + std::to_string(rc) + "):\n" + log);
    if (how) *how = "nvcc";
  } else {
    throw Error("CUDA: no compiler for the program (neither NVRTC, libnvrtc.so, nor nvcc; $TJ_NVCC) and no cache entry for it");
  }
  fs::create_directories(entry.parent_path());
  write_atomic(entry, cubin);
  return cubin;
}

struct Context::State {
  const Api& a = api();
  Device device;
  CUdevice id = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  bool capturing = false;
  std::vector<CUmodule> modules;
  std::vector<CUfunction> kernels;
  std::vector<CUgraphExec> graphs;
  std::set<CUdeviceptr> allocations;  // freed with the context, if not before

  ~State() {
    if (!context) return;
    a.cuCtxPushCurrent_v2(context);
    if (capturing) {
      CUgraph g = nullptr;
      if (a.cuStreamEndCapture(stream, &g) == 0 && g) a.cuGraphDestroy(g);
    }
    if (stream) a.cuStreamSynchronize(stream);
    for (CUgraphExec g : graphs)
      if (g) a.cuGraphExecDestroy(g);
    for (CUdeviceptr p : allocations) a.cuMemFree_v2(p);
    for (CUmodule m : modules) a.cuModuleUnload(m);
    if (stream) a.cuStreamDestroy_v2(stream);
    CUcontext popped = nullptr;
    a.cuCtxPopCurrent_v2(&popped);
    a.cuDevicePrimaryCtxRelease_v2(id);
  }
};

namespace {

// The context current on this thread for one call, the caller's (PyTorch's,
// say) current again after it.
class Current {
 public:
  explicit Current(const Context::State& s) : a_(s.a) { check(a_.cuCtxPushCurrent_v2(s.context), "cuCtxPushCurrent"); }
  ~Current() {
    CUcontext popped = nullptr;
    a_.cuCtxPopCurrent_v2(&popped);
  }
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;

 private:
  const Api& a_;
};

}  // namespace

Context::Context(size_t index) : s_(std::make_unique<State>()) {
  std::string why;
  auto all = devices(&why);
  if (index >= all.size())
    throw Error(all.empty() ? "CUDA: no device: " + why : "CUDA: no device " + std::to_string(index) + " (there are " + std::to_string(all.size()) + ")");
  State& s = *s_;
  s.device = all[index];
  check(s.a.cuDeviceGet(&s.id, s.device.ordinal), "cuDeviceGet");
  check(s.a.cuDevicePrimaryCtxRetain(&s.context, s.id), "cuDevicePrimaryCtxRetain");
  Current in(s);
  check(s.a.cuStreamCreate(&s.stream, kNonBlocking), "cuStreamCreate");
}

Context::~Context() = default;

const Device& Context::device() const { return s_->device; }

std::string Context::arch() const { return "sm_" + std::to_string(s_->device.major) + std::to_string(s_->device.minor); }

int Context::module(const std::string& source) {
  const std::string cubin = compile(source, arch());
  Current in(*s_);
  CUmodule m = nullptr;
  check(s_->a.cuModuleLoadData(&m, cubin.data()), "cuModuleLoadData");
  s_->modules.push_back(m);
  return static_cast<int>(s_->modules.size() - 1);
}

int Context::kernel(int module, const std::string& name) {
  if (module < 0 || static_cast<size_t>(module) >= s_->modules.size()) throw Error("CUDA: no module " + std::to_string(module));
  CUfunction f = nullptr;
  check(s_->a.cuModuleGetFunction(&f, s_->modules[static_cast<size_t>(module)], name.c_str()), ("cuModuleGetFunction '" + name + "'").c_str());
  s_->kernels.push_back(f);
  return static_cast<int>(s_->kernels.size() - 1);
}

uint64_t Context::alloc(size_t bytes) {
  Current in(*s_);
  CUdeviceptr p = 0;
  check(s_->a.cuMemAlloc_v2(&p, bytes ? bytes : 1), "cuMemAlloc");
  s_->allocations.insert(p);
  return p;
}

void Context::free(uint64_t address) {
  Current in(*s_);
  check(s_->a.cuStreamSynchronize(s_->stream), "cuStreamSynchronize");
  check(s_->a.cuMemFree_v2(address), "cuMemFree");
  s_->allocations.erase(address);
}

void Context::write(uint64_t address, const void* data, size_t bytes) {
  Current in(*s_);
  if (bytes) check(s_->a.cuMemcpyHtoDAsync_v2(address, data, bytes, s_->stream), "cuMemcpyHtoDAsync");
}

void Context::read(uint64_t address, void* data, size_t bytes) {
  Current in(*s_);
  if (bytes) check(s_->a.cuMemcpyDtoHAsync_v2(data, address, bytes, s_->stream), "cuMemcpyDtoHAsync");
  sync();
}

void Context::launch(int k, size_t groups, size_t group, void** args) {
  if (k < 0 || static_cast<size_t>(k) >= s_->kernels.size()) throw Error("CUDA: no kernel " + std::to_string(k));
  if (groups > 0x7fffffffu) throw Error("CUDA: a launch of " + std::to_string(groups) + " blocks is more than a grid holds");
  Current in(*s_);
  check(s_->a.cuLaunchKernel(s_->kernels[static_cast<size_t>(k)], static_cast<unsigned>(groups), 1, 1, static_cast<unsigned>(group), 1, 1, 0,
                             s_->stream, args, nullptr),
        "cuLaunchKernel");
}

void Context::begin_record() {
  Current in(*s_);
  check(s_->a.cuStreamBeginCapture_v2(s_->stream, kCaptureRelaxed), "cuStreamBeginCapture");
  s_->capturing = true;
}

void Context::abort_record() {
  if (!s_->capturing) return;
  Current in(*s_);
  s_->capturing = false;
  CUgraph g = nullptr;
  if (s_->a.cuStreamEndCapture(s_->stream, &g) == 0 && g) s_->a.cuGraphDestroy(g);  // its error is not the one to report
}

int Context::end_record() {
  Current in(*s_);
  s_->capturing = false;
  CUgraph g = nullptr;
  check(s_->a.cuStreamEndCapture(s_->stream, &g), "cuStreamEndCapture");
  CUgraphExec e = nullptr;
  const CUresult r = s_->a.cuGraphInstantiateWithFlags(&e, g, 0);
  s_->a.cuGraphDestroy(g);
  check(r, "cuGraphInstantiateWithFlags");
  s_->graphs.push_back(e);
  return static_cast<int>(s_->graphs.size() - 1);
}

void Context::replay(int graph) {
  if (graph < 0 || static_cast<size_t>(graph) >= s_->graphs.size() || !s_->graphs[static_cast<size_t>(graph)])
    throw Error("CUDA: no graph " + std::to_string(graph));
  Current in(*s_);
  check(s_->a.cuGraphLaunch(s_->graphs[static_cast<size_t>(graph)], s_->stream), "cuGraphLaunch");
}

void Context::drop(int graph) {
  if (graph < 0 || static_cast<size_t>(graph) >= s_->graphs.size() || !s_->graphs[static_cast<size_t>(graph)]) return;
  sync();
  s_->a.cuGraphExecDestroy(s_->graphs[static_cast<size_t>(graph)]);
  s_->graphs[static_cast<size_t>(graph)] = nullptr;
}

void Context::sync() {
  Current in(*s_);
  check(s_->a.cuStreamSynchronize(s_->stream), "cuStreamSynchronize");
}

}  // namespace tj::cuda
