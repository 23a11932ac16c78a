// GPU kernels in one form, rendered for each target. A KernelForm is what
// the GPU emitter (codegen/gpu/emitter.h) writes for one launch: its buffers,
// its work-group arrays, its launch size and its body in GPU C, the C that
// OpenCL C and CUDA C share. A Renderer turns it into a target's source, the
// way tinygrad's C-style renderer is specialized for CUDA and OpenCL by a few
// hooks: the kernel's qualifiers and parameters, the thread indices, the
// work-group memory's qualifier, and a prelude (type names, bit casts, the
// barrier). Everything else, the helpers of codegen/gpu/prelude.cpp
// included, is the same text on both.
//
// What a body may use: tj_gid (int64_t, the work-item), tj_lid (int, its
// index in the work-group), tj_grp (int64_t, the work-group), tj_barrier()
// (work-group memory; tj_barrier_global() for buffers too),
// TJ_GLOBAL before a pointer into a buffer, the buffers as p<value>, the
// size symbols by their C names (sym_name), and tj_status (TJ_GLOBAL int*:
// set nonzero by tj_fail(tj_status, code) on an index out of range, as the
// C++ backend's tj_status; atomically, the first error kept).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace tj::gpu {

// The languages kernels are rendered in (not the devices: those are the
// registry's, runtime/device/backend.h, each naming the Target it runs).
enum class Target : uint8_t { opencl, cuda };
std::string_view target_name(Target t);       // "opencl", "cuda"
std::string_view source_extension(Target t);  // ".cl", ".cu"

struct KernelForm {
  std::string name;
  struct Buffer {
    ValueId value;
    std::string type;  // its element's C type in memory
  };
  std::vector<Buffer> buffers;
  std::vector<std::string> locals;  // work-group arrays: "double tj_red[128]"
  std::string body;
  // Work-items: `items` in all, in work-groups of `group`; the host rounds
  // items up to a multiple of group (a body guards against the extra ones).
  Dim items = 1;
  int group = 64;
};

class Renderer {
 public:
  virtual ~Renderer() = default;
  virtual Target target() const = 0;
  // Everything a program's kernels need before them: the target's prelude,
  // then the shared helpers.
  std::string prelude() const;
  // One kernel: its parameters are its buffers (in order), then every size
  // symbol of `symbols` (int64_t), then tj_status.
  std::string render(const KernelForm& k, const std::vector<std::string>& symbols) const;

 protected:
  virtual std::string target_prelude() const = 0;
  virtual std::string kernel_prefix() const = 0;
  // A buffer's parameters, and what declares p<value> from them.
  virtual std::string buffer_params(const KernelForm::Buffer& b) const = 0;
  virtual std::string buffer_setup(const KernelForm::Buffer& b) const = 0;
  virtual std::string status_param() const = 0;
  virtual std::string local_prefix() const = 0;
  virtual std::string thread_indices() const = 0;
};

std::unique_ptr<Renderer> renderer(Target t);

// The helpers every GPU program has (codegen/gpu/prelude.cpp): integer
// arithmetic that wraps, float max/min as the interpreter's, float to
// integer casts that saturate, bf16 and f16 in 16 bits, index checks.
std::string shared_prelude();

}  // namespace tj::gpu
