// The GPU emitter's working state, internal to src/codegen/gpu: the value
// reading every target shares (codegen/value_reader.h: views, broadcasting,
// generators, gathers and the ops' expressions) with GPU C's spellings, and
// a kernel body of its own per kernel kind (kernels/). Each launch is a
// KernelForm, rendered for the target as it is added. A sibling of the C++
// emitter (codegen/cpp), not a kind of it.
#pragma once

#include <string>
#include <vector>

#include "codegen/gpu/emit.h"
#include "codegen/value_reader.h"

namespace tj::gpu {

// The C-family text every target shares (codegen/c_text.h).
using namespace codegen;

class Emitter final : public codegen::ValueReader {
 public:
  Emitter(const Graph& g, const Schedule& s, Target t, const SymEnv& hint);
  Program run();

 protected:
  std::string read_narrow(DType t, const std::string& e) const override;
  CExprFn expression(const OpDef& d) const override { return d.gpu_expr ? d.gpu_expr : d.c_expr; }

 private:
  static constexpr int kGroup = 64;      // work-items per group of a pointwise launch
  static constexpr int kRowGroup = 128;  // of a rowwise one: one group per row
  static constexpr int kTile = 16;       // matmul output tiles of kTile x kTile

  // `value` stored as v's element (f16/bf16: their bits).
  std::string stored(ValueId v, const std::string& value) const;
  // A launch of `body` over `items`: its buffers are what the body read
  // through ptr() (and `extra`, the scratch or an output's copy).
  void launch(std::vector<Launch>* to, const std::string& what, const std::string& body, const Dim& items, int group = kGroup,
              std::vector<std::string> locals = {}, std::vector<KernelForm::Buffer> extra = {},
              std::vector<std::pair<Dim, int64_t>> tiles = {});
  // The element index of a launch over `space`: declarations of i0.. from tj_gid.
  std::string element(const Sizes& space, const Idx& iv) const;

  // kernels/pointwise.cpp: elementwise ops in launches over the space, stores between
  void pointwise(const Kernel& K, size_t first);
  // Ops of K from `from` until a store, at index `idx` (their own space),
  // as declarations and stores; returns the index after them.
  size_t segment(const Kernel& K, size_t from, const Idx& idx, std::string* code);
  void store(ValueId v);
  void copy_into(ValueId x);  // a view materialized into its temporary (make_temp)

  // kernels/rowwise.cpp
  void rowwise(const Kernel& K);
  std::string group_reduce(const std::string& acc, bool integer, const std::string& op, std::vector<std::string>* locals) const;
  std::string composite(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp, const Dim& D,
                        std::vector<std::string>* locals);
  static std::string update(const Accumulator& A, const std::string& acc, const std::string& x);

  // kernels/reduction.cpp
  void reduction(const Kernel& K);

  // kernels/matmul.cpp
  void matmul(const Kernel& K);
  // The value of K's first op, a product's sum `acc` rounded to its type, at
  // `idx` (stored where it lives in memory), then K's ops after it up to a
  // store (segment); returns the index after them. Matmuls and convs.
  size_t product_value(const Kernel& K, const std::string& acc, const Idx& idx, std::string* code);
  void gemv(const Kernel& K, const std::string& acc_t);  // one row: split over K, no barriers
  std::string element_of(ValueId x, const Sizes& batch, const Idx& bv, const Sizes& last, const Idx& at);

  // kernels/conv.cpp: convolutions as implicit GEMMs in tiles; pools a work-item per element
  void conv(const Kernel& K);
  void pool(const Kernel& K);

  // kernels/attention.cpp: flash_attn, and its backward (attn_lse, attn_dq, attn_dkv)
  void attention(const Kernel& K);
  void attention_grad(const Kernel& K);
  // Operand x as a base pointer and strides per dim ("0" for a dim of 1),
  // its last dim contiguous (copied into its temporary where its view is not).
  Rows strided_rows(ValueId x);
  static std::string row(const Rows& r, const std::string& a, const std::string& b, const std::string& c);  // row (a, b, c)'s address

  std::unique_ptr<Renderer> r_;
  Program prog_;
  int kernel_ = 0;  // the schedule's kernel being emitted
  int launches_ = 0;
};

}  // namespace tj::gpu
