#include "runtime/device/opencl/opencl.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <dlfcn.h>

#include <mutex>

#include "tensorjit/error.h"

namespace tj::opencl {

namespace {

// The entry points this file calls, from the loader.
#define TJ_CL_FUNCTIONS(X) \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) \
  X(clReleaseContext) X(clCreateCommandQueueWithProperties) X(clReleaseCommandQueue) \
  X(clCreateProgramWithSource) X(clBuildProgram) X(clGetProgramBuildInfo) X(clReleaseProgram) \
  X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg) X(clCreateBuffer) X(clReleaseMemObject) \
  X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clEnqueueNDRangeKernel) X(clFinish) X(clGetExtensionFunctionAddressForPlatform)

struct Api {
  void* lib = nullptr;
  std::string why;  // when lib is null
#define TJ_CL_FN(name) decltype(&::name) name = nullptr;
  TJ_CL_FUNCTIONS(TJ_CL_FN)
#undef TJ_CL_FN
};

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      a.why = "no OpenCL loader (libOpenCL.so.1; Debian: ocl-icd-libopencl1, with pocl-opencl-icd for this CPU)";
      return;
    }
    bool all = true;
#define TJ_CL_FN(name) all = (a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name))) != nullptr && all;
    TJ_CL_FUNCTIONS(TJ_CL_FN)
#undef TJ_CL_FN
    if (!all) {
      a.why = "the OpenCL loader lacks an OpenCL 2.0 entry point";
      dlclose(lib);
      return;
    }
    a.lib = lib;
  });
  return a;
}

void check(cl_int status, const char* call) {
  if (status != CL_SUCCESS) throw Error(std::string("OpenCL: ") + call + " failed with error " + std::to_string(status));
}

// A string property of a platform or device, through its getter
// (clGetPlatformInfo, clGetDeviceInfo): "" when there is none.
template <class Get, class Handle, class What>
std::string info_string(Get get, Handle h, What what) {
  size_t n = 0;
  if (get(h, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  get(h, what, n, s.data(), nullptr);
  return s.substr(0, s.find('\0'));
}

// Every device, with its handle.
struct Found {
  Device device;
  cl_device_id id;
  cl_platform_id platform;
};

std::vector<Found> list(const Api& a, std::string* why) {
  std::vector<Found> r;
  if (!a.lib) {
    if (why) *why = a.why;
    return r;
  }
  cl_uint np = 0;
  if (a.clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    if (why) *why = "no OpenCL platform (no ICD registered under /etc/OpenCL/vendors)";
    return r;
  }
  std::vector<cl_platform_id> ps(np);
  a.clGetPlatformIDs(np, ps.data(), nullptr);
  for (cl_platform_id p : ps) {
    cl_uint nd = 0;
    if (a.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ds(nd);
    a.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
    for (cl_device_id d : ds) {
      Device dev;
      dev.platform = info_string(a.clGetPlatformInfo, p, CL_PLATFORM_NAME);
      dev.name = info_string(a.clGetDeviceInfo, d, CL_DEVICE_NAME);
      dev.version = info_string(a.clGetDeviceInfo, d, CL_DEVICE_VERSION);
      cl_device_type type = 0;
      cl_uint units = 0;
      cl_ulong memory = 0;
      a.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
      a.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
      a.clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof memory, &memory, nullptr);
      dev.gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
      dev.compute_units = static_cast<int>(units);
      dev.memory_bytes = memory;
      r.push_back({std::move(dev), d, p});
    }
  }
  if (r.empty() && why) *why = "no OpenCL device on any platform";
  return r;
}

}  // namespace

std::vector<Device> devices(std::string* why) {
  std::vector<Device> r;
  for (auto& f : list(api(), why)) r.push_back(std::move(f.device));
  return r;
}

// cl_khr_command_buffer's entry points, from the platform (null: not there).
struct CommandBuffers {
  clCreateCommandBufferKHR_fn create = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  clCommandNDRangeKernelKHR_fn kernel = nullptr;
  bool ok() const { return create && finalize && release && enqueue && kernel; }
};

struct Context::State {
  const Api& a = api();
  Device device;
  cl_device_id id = nullptr;
  cl_platform_id platform = nullptr;
  CommandBuffers cb;
  cl_command_buffer_khr recording = nullptr;
  cl_sync_point_khr last = 0;
  bool recorded_any = false;
  std::vector<cl_command_buffer_khr> records;
  int pending = -1;  // the record enqueued last, until the queue is waited for
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::vector<cl_program> programs;
  std::vector<cl_kernel> kernels;
  std::vector<cl_mem> buffers;

  ~State() {
    if (recording) cb.release(recording);
    for (cl_command_buffer_khr r : records)
      if (r) cb.release(r);
    for (cl_kernel k : kernels) a.clReleaseKernel(k);
    for (cl_program p : programs) a.clReleaseProgram(p);
    for (cl_mem m : buffers)
      if (m) a.clReleaseMemObject(m);
    if (queue) a.clReleaseCommandQueue(queue);
    if (context) a.clReleaseContext(context);
  }
  cl_kernel kernel(int k) const {
    if (k < 0 || static_cast<size_t>(k) >= kernels.size()) throw Error("OpenCL: no kernel " + std::to_string(k));
    return kernels[static_cast<size_t>(k)];
  }
  cl_mem buffer(int b) const {
    if (b < 0 || static_cast<size_t>(b) >= buffers.size() || !buffers[static_cast<size_t>(b)]) throw Error("OpenCL: no buffer " + std::to_string(b));
    return buffers[static_cast<size_t>(b)];
  }
};

Context::Context(size_t index) : s_(std::make_unique<State>()) {
  std::string why;
  auto all = list(s_->a, &why);
  if (index >= all.size())
    throw Error(all.empty() ? "OpenCL: no device: " + why
                            : "OpenCL: no device " + std::to_string(index) + " (there are " + std::to_string(all.size()) + ")");
  s_->device = all[index].device;
  s_->id = all[index].id;
  s_->platform = all[index].platform;
  cl_int status = CL_SUCCESS;
  s_->context = s_->a.clCreateContext(nullptr, 1, &s_->id, nullptr, nullptr, &status);
  check(status, "clCreateContext");
  s_->queue = s_->a.clCreateCommandQueueWithProperties(s_->context, s_->id, nullptr, &status);
  check(status, "clCreateCommandQueueWithProperties");
  // Command buffers, where the device lists the extension.
  size_t n = 0;
  s_->a.clGetDeviceInfo(s_->id, CL_DEVICE_EXTENSIONS, 0, nullptr, &n);
  std::string ext(n, '\0');
  if (n) s_->a.clGetDeviceInfo(s_->id, CL_DEVICE_EXTENSIONS, n, ext.data(), nullptr);
  if (ext.find("cl_khr_command_buffer") != std::string::npos) {
    auto fn = [&](const char* name) { return s_->a.clGetExtensionFunctionAddressForPlatform(s_->platform, name); };
    CommandBuffers& cb = s_->cb;
    cb.create = reinterpret_cast<clCreateCommandBufferKHR_fn>(fn("clCreateCommandBufferKHR"));
    cb.finalize = reinterpret_cast<clFinalizeCommandBufferKHR_fn>(fn("clFinalizeCommandBufferKHR"));
    cb.release = reinterpret_cast<clReleaseCommandBufferKHR_fn>(fn("clReleaseCommandBufferKHR"));
    cb.enqueue = reinterpret_cast<clEnqueueCommandBufferKHR_fn>(fn("clEnqueueCommandBufferKHR"));
    cb.kernel = reinterpret_cast<clCommandNDRangeKernelKHR_fn>(fn("clCommandNDRangeKernelKHR"));
  }
}

Context::~Context() = default;

const Device& Context::device() const { return s_->device; }

int Context::program(const std::string& source, const std::string& options) {
  const Api& a = s_->a;
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  cl_program p = a.clCreateProgramWithSource(s_->context, 1, &text, &length, &status);
  check(status, "clCreateProgramWithSource");
  s_->programs.push_back(p);
  if (a.clBuildProgram(p, 1, &s_->id, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    size_t n = 0;
    a.clGetProgramBuildInfo(p, s_->id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    if (n) a.clGetProgramBuildInfo(p, s_->id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    throw Error("OpenCL: building a program failed:\n" + log.substr(0, log.find('\0')));
  }
  return static_cast<int>(s_->programs.size() - 1);
}

int Context::kernel(int program, const std::string& name) {
  if (program < 0 || static_cast<size_t>(program) >= s_->programs.size()) throw Error("OpenCL: no program " + std::to_string(program));
  cl_int status = CL_SUCCESS;
  cl_kernel k = s_->a.clCreateKernel(s_->programs[static_cast<size_t>(program)], name.c_str(), &status);
  check(status, ("clCreateKernel '" + name + "'").c_str());
  s_->kernels.push_back(k);
  return static_cast<int>(s_->kernels.size() - 1);
}

int Context::build(const std::string& source, const std::string& name, const std::string& options) {
  return kernel(program(source, options), name);
}

int Context::buffer(size_t bytes) {
  cl_int status = CL_SUCCESS;
  cl_mem m = s_->a.clCreateBuffer(s_->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, nullptr, &status);
  check(status, "clCreateBuffer");
  s_->buffers.push_back(m);
  return static_cast<int>(s_->buffers.size() - 1);
}

void Context::release(int b) {
  check(s_->a.clReleaseMemObject(s_->buffer(b)), "clReleaseMemObject");
  s_->buffers[static_cast<size_t>(b)] = nullptr;
}

void Context::write(int b, const void* data, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  check(s_->a.clEnqueueWriteBuffer(s_->queue, s_->buffer(b), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr), "clEnqueueWriteBuffer");
}

void Context::read(int b, void* data, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  check(s_->a.clEnqueueReadBuffer(s_->queue, s_->buffer(b), CL_TRUE, offset, bytes, data, 0, nullptr, nullptr), "clEnqueueReadBuffer");
  s_->pending = -1;  // a blocking read on an in-order queue: everything before it is done
}

void Context::arg(int k, unsigned index, int b) {
  cl_mem m = s_->buffer(b);
  check(s_->a.clSetKernelArg(s_->kernel(k), index, sizeof m, &m), "clSetKernelArg");
}

void Context::arg(int k, unsigned index, size_t bytes, const void* value) {
  check(s_->a.clSetKernelArg(s_->kernel(k), index, bytes, value), "clSetKernelArg");
}

void Context::launch(int k, const std::vector<size_t>& global, const std::vector<size_t>& local) {
  if (global.empty() || global.size() > 3 || (!local.empty() && local.size() != global.size()))
    throw Error("OpenCL: a launch takes 1 to 3 global sizes, and as many local ones or none");
  if (s_->recording) {  // recorded, in order: each command waits for the one before
    cl_sync_point_khr point = 0;
    check(s_->cb.kernel(s_->recording, nullptr, nullptr, s_->kernel(k), static_cast<cl_uint>(global.size()), nullptr, global.data(),
                        local.empty() ? nullptr : local.data(), s_->recorded_any ? 1 : 0, s_->recorded_any ? &s_->last : nullptr, &point, nullptr),
          "clCommandNDRangeKernelKHR");
    s_->last = point;
    s_->recorded_any = true;
    return;
  }
  check(s_->a.clEnqueueNDRangeKernel(s_->queue, s_->kernel(k), static_cast<cl_uint>(global.size()), nullptr, global.data(),
                                     local.empty() ? nullptr : local.data(), 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel");
}

void Context::finish() {
  check(s_->a.clFinish(s_->queue), "clFinish");
  s_->pending = -1;
}

bool Context::can_record() const { return s_->cb.ok(); }

void Context::begin_record() {
  if (!s_->cb.ok()) throw Error("OpenCL: " + s_->device.name + " has no command buffers (cl_khr_command_buffer)");
  if (s_->recording) throw Error("OpenCL: a command buffer is being recorded already");
  cl_int status = CL_SUCCESS;
  s_->recording = s_->cb.create(1, &s_->queue, nullptr, &status);
  check(status, "clCreateCommandBufferKHR");
  s_->recorded_any = false;
}

void Context::abort_record() {
  if (!s_->recording) return;
  s_->cb.release(s_->recording);
  s_->recording = nullptr;
}

int Context::end_record() {
  cl_command_buffer_khr r = s_->recording;
  if (!r) throw Error("OpenCL: no command buffer is being recorded");
  s_->recording = nullptr;
  if (cl_int e = s_->cb.finalize(r); e != CL_SUCCESS) {
    s_->cb.release(r);
    check(e, "clFinalizeCommandBufferKHR");
  }
  s_->records.push_back(r);
  return static_cast<int>(s_->records.size() - 1);
}

void Context::replay(int record) {
  if (record < 0 || static_cast<size_t>(record) >= s_->records.size() || !s_->records[static_cast<size_t>(record)])
    throw Error("OpenCL: no command buffer " + std::to_string(record));
  // A command buffer may not be enqueued while it is still pending (without
  // simultaneous use, which PoCL does not give): wait for the queue first.
  if (s_->pending == record) finish();
  s_->pending = record;
  check(s_->cb.enqueue(0, nullptr, s_->records[static_cast<size_t>(record)], 0, nullptr, nullptr), "clEnqueueCommandBufferKHR");
}

void Context::drop(int record) {
  if (record < 0 || static_cast<size_t>(record) >= s_->records.size() || !s_->records[static_cast<size_t>(record)]) return;
  finish();
  s_->cb.release(s_->records[static_cast<size_t>(record)]);
  s_->records[static_cast<size_t>(record)] = nullptr;
}

}  // namespace tj::opencl
