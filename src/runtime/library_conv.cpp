#include "runtime/library_conv.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/gemm.h"

namespace tj {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// One part's primitive and the memory objects it reads and writes (their
// addresses set per call; `args` holds the same handles), with a scratchpad
// of its own: parts run at once on the pool's threads.
struct Part {
  dnnl::convolution_forward prim;
  dnnl::stream stream;
  memory src, bias, dst, residual;
  std::unordered_map<int, memory> args;
  int64_t x_offset = 0, y_offset = 0;  // elements from x and y at the call
  // x not dense channels last (the NCHW image a net starts from): the
  // part's rows are copied into `rows` first, as the library's kernels
  // take only dense layouts.
  int64_t in_rows = 0;
  std::vector<float> rows;
};

struct Plan {
  tj_conv_desc d;
  std::vector<Part> parts;
  std::vector<memory> weights;  // reordered, per format a primitive chose
};

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The part's output rows [r0, r1): its input rows and the padding left of
// them at the image's top and bottom.
struct Rows {
  int64_t in0, in_rows, pad_top, pad_bottom;
};
Rows input_rows(const tj_conv_desc& d, int64_t r0, int64_t r1) {
  const int64_t first = r0 * d.SH - d.PT, end = (r1 - 1) * d.SH - d.PT + (d.KH - 1) * d.DH + 1;
  Rows r;
  r.in0 = std::max<int64_t>(first, 0);
  r.in_rows = std::min(end, d.H) - r.in0;
  r.pad_top = r.in0 - first;
  r.pad_bottom = std::max<int64_t>(0, end - d.H);
  return r;
}

// The weights as the generated kernels store them (abi.h): one group
// [M, C, KH, KW] in blocks of 64 outputs; groups [G, M/G, C/G, KH, KW] taps
// first (g and its outputs innermost: hwigo) or in blocks of w_lanes
// outputs that no group shares (gOhwi<lanes>o).
memory::desc weights_desc(const tj_conv_desc& d) {
  const auto f32 = memory::data_type::f32;
  if (d.groups == 1) return memory::desc({d.M, d.C, d.KH, d.KW}, f32, tag::Ohwi64o);
  const memory::dims dims{d.groups, d.M / d.groups, d.C / d.groups, d.KH, d.KW};
  switch (d.w_lanes) {
    case 0: return memory::desc(dims, f32, tag::hwigo);
    case 16: return memory::desc(dims, f32, tag::gOhwi16o);
    case 32: return memory::desc(dims, f32, tag::gOhwi32o);
    case 48: return memory::desc(dims, f32, tag::gOhwi48o);
    case 64: return memory::desc(dims, f32, tag::gOhwi64o);
  }
  throw std::runtime_error("no oneDNN format for weights in blocks of " + std::to_string(d.w_lanes) + " outputs");
}

bool dense_channels_last(const tj_conv_desc& d) { return d.xs[1] == 1 && d.xs[3] == d.C && d.xs[2] == d.W * d.C; }

std::unique_ptr<Plan> make_plan(const tj_conv_desc& d, const float* w) {
  OneOpenMpThread one;  // the primitives' thread count: one each
  auto plan = std::make_unique<Plan>();
  plan->d = d;
  dnnl::stream stream(engine());
  memory user_w(weights_desc(d), engine(), const_cast<float*>(w));
  const memory::dims wdims = user_w.get_desc().dims();
  const memory::desc any_w(wdims, memory::data_type::f32, tag::any), bias_md({d.M}, memory::data_type::f32, tag::x);
  const int64_t PR = std::max<int64_t>(0, (d.OW - 1) * d.SW + (d.KW - 1) * d.DW + 1 - d.W - d.PL);
  for (int64_t b = 0; b < d.N; ++b) {
    for (int64_t rb = 0; rb < d.row_blocks; ++rb) {
      const int64_t r0 = d.OH * rb / d.row_blocks, r1 = d.OH * (rb + 1) / d.row_blocks;
      const Rows in = input_rows(d, r0, r1);
      const memory::desc src({1, d.C, in.in_rows, d.W}, memory::data_type::f32, tag::nhwc);
      const memory::desc dst({1, d.M, r1 - r0, d.OW}, memory::data_type::f32, tag::nhwc);
      // The epilogue: the residual (a binary post-op reading the part's
      // rows of r, laid out as dst), then the activation.
      dnnl::post_ops po;
      if (d.residual) po.append_binary(dnnl::algorithm::binary_add, dst);
      if (d.act == 1) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      if (d.act == 2) po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, d.lo, d.hi);
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, any_w,
                                               d.bias ? bias_md : memory::desc(), dst, {d.SH, d.SW}, {d.DH - 1, d.DW - 1},
                                               {in.pad_top, d.PL}, {in.pad_bottom, PR});
      const dnnl::convolution_forward::primitive_desc pd(cd, attr, engine());
      // Its reference kernels are for checking (a 1x1 conv took 200 ms):
      // no plan, and the generated form runs instead.
      if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw std::runtime_error("oneDNN offers only its reference convolution");
      Part p;
      p.prim = dnnl::convolution_forward(pd);
      // The weights in the format this primitive chose: reordered once.
      const memory::desc wmd = pd.weights_desc();
      auto it = std::find_if(plan->weights.begin(), plan->weights.end(), [&](const memory& m) { return m.get_desc() == wmd; });
      if (it == plan->weights.end()) {
        memory mine(wmd, engine());  // the library's allocation, aligned as it likes
        dnnl::reorder(user_w, mine).execute(stream, user_w, mine);
        stream.wait();
        plan->weights.push_back(mine);
        it = plan->weights.end() - 1;
      }
      p.stream = dnnl::stream(engine());
      p.src = memory(src, engine(), nullptr);
      p.dst = memory(dst, engine(), nullptr);
      p.args = {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, *it}, {DNNL_ARG_DST, p.dst}, {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine())}};
      if (d.bias) p.bias = memory(bias_md, engine(), nullptr), p.args.emplace(DNNL_ARG_BIAS, p.bias);
      if (d.residual) p.residual = memory(dst, engine(), nullptr), p.args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p.residual);
      p.x_offset = b * d.xs[0] + in.in0 * d.xs[2];
      if (!dense_channels_last(d)) p.in_rows = in.in_rows, p.rows.resize(static_cast<size_t>(in.in_rows * d.W * d.C));
      p.y_offset = (b * d.OH + r0) * d.OW * d.M;
      plan->parts.push_back(std::move(p));
    }
  }
  return plan;
}

std::string plan_key(const tj_conv_desc& d, const float* w) {
  std::string k(reinterpret_cast<const char*>(&w), sizeof w);
  return k + std::string(reinterpret_cast<const char*>(&d), sizeof d);
}

}  // namespace

struct LibraryState::Impl {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Plan>> plans;
};

LibraryState::LibraryState() : impl_(std::make_unique<Impl>()) {}
LibraryState::~LibraryState() = default;

void* library_conv_plan(void* state, const tj_conv_desc* d, const float* w) {
  if (!state) return nullptr;
  auto* s = static_cast<LibraryState*>(state)->impl();
  std::lock_guard<std::mutex> lock(s->mutex);
  const std::string key = plan_key(*d, w);
  auto it = s->plans.find(key);
  if (it == s->plans.end()) {  // made once; a failure is kept too, as a null plan
    std::unique_ptr<Plan> p;
    const char* off = std::getenv("TJ_LIBRARY_CONV");  // "off": no plans (the generated forms run)
    try {
      if (!off || std::string(off) != "off") p = make_plan(*d, w);
    } catch (const std::exception&) {  // dnnl::error, std::bad_alloc, a reference kernel
      p.reset();
    }
    it = s->plans.emplace(key, std::move(p)).first;
  }
  return it->second.get();
}

int library_conv_part(void* plan, const float* x, const float* b, const float* r, float* y, int64_t part) {
  auto* pl = static_cast<Plan*>(plan);
  if (!pl || part < 0 || part >= static_cast<int64_t>(pl->parts.size())) return 1;
  Part& p = pl->parts[static_cast<size_t>(part)];
  // The residual read where the part writes would be a race between parts
  // (the memory planner gives a conv's output a buffer of its own).
  const tj_conv_desc& d = pl->d;
  const int64_t outputs = d.N * d.OH * d.OW * d.M;
  if (d.residual && (!r || (r < y + outputs && y < r + outputs))) return 1;
  try {
    OneOpenMpThread one;
    const float* xp = x + p.x_offset;
    if (p.in_rows) {
      for (int64_t h = 0; h < p.in_rows; ++h)
        for (int64_t w = 0; w < d.W; ++w)
          for (int64_t c = 0; c < d.C; ++c) p.rows[static_cast<size_t>((h * d.W + w) * d.C + c)] = xp[h * d.xs[2] + w * d.xs[3] + c * d.xs[1]];
      xp = p.rows.data();
    }
    p.src.set_data_handle(const_cast<float*>(xp));
    p.dst.set_data_handle(y + p.y_offset);
    if (d.bias) p.bias.set_data_handle(const_cast<float*>(b));
    if (d.residual) p.residual.set_data_handle(const_cast<float*>(r + p.y_offset));
    p.prim.execute(p.stream, p.args);
    p.stream.wait();
  } catch (const std::exception&) {  // nothing thrown reaches the generated code
    return 1;
  }
  return 0;
}

}  // namespace tj
