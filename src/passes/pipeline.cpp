#include "passes/pipeline.h"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "ir/text.h"
#include "ir/verifier.h"
#include "reference/random_inputs.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> r = {
      {"freeze", freeze, "params become constants, so weight-only work can be done now"},
      {"cse", cse, "merge duplicate work early, so patterns see one value"},
      {"simplify", simplify, "remove algebraic no-ops (bit-exact rules)"},
      {"constant_fold", constant_fold, "compute what depends only on constants"},
      {"match_attention", match_attention, "attention as one flash_attn, before softmax is decomposed"},
      {"match_pools", match_pools, "max pooling's window form (padding, strided slices, max) as one max_pool"},
      {"fold_conv_affine", fold_conv_affine, "per-channel scales and shifts after a convolution (batch-norm) move into its weights and bias"},
      {"fold_norm_weights", fold_norm_weights, "norm scales move into the following weights"},
      {"merge_matmuls", merge_matmuls, "products of one operand by constant weights become one product"},
      {"quantize_weights", quantize_weights, "products' constant weights in bf16 or int8 (--weights), read converted"},
      {"assign_layouts", assign_layouts, "convolutions with a channels-last kernel, and the values between them, channels last"},
      {"winograd_weights", winograd_weights, "3x3 stride-1 convolutions get their weights in the Winograd F(2x2,3x3) domain, for the CPU kernel"},
      {"pack_conv_weights", pack_conv_weights, "convolutions' constant weights stored 16 output channels side by side, for the conv kernel"},
      {"fold_conv_pads", fold_conv_pads, "a convolution of a zero-padded input reads the input, the pads added to its own"},
      {"trim_conv_taps", trim_conv_taps, "a convolution's kernel offsets that read only padding, for every output position, dropped"},
      {"stride_matmul_weights", stride_matmul_weights, "products' constant weights whose rows lie a multiple of 4 KB apart stored transposed"},
      {"fold_input_scale", fold_input_scale, "a per-channel scale of a convolution's input (squeeze-excitation's gate) moves onto its packed weights, per call"},
      {"decompose", decompose, "composites into primitives for fusion"},
      {"sink_gathers", sink_gathers, "pointwise ops on values gathered alike computed on the tables, gathered once after, where the gather enlarges"},
      {"lower_convs", lower_convs, "convolutions into windows and matmuls, for targets without a conv kernel"},
      {"lower", lower, "ops without kernels into primitives (after every pipeline)"},
      {"dce", dce, "drop what no output needs"},
  };
  return r;
}

const PassInfo& find_pass(const std::string& name) {
  std::string known;
  for (const auto& p : pass_registry()) {
    if (name == p.name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw Error("unknown pass '" + name + "' (known: " + known + ")");
}

std::vector<std::string> default_pipeline(bool freeze) {
  std::vector<std::string> p;
  if (freeze) p.push_back("freeze");     // weights are known: fold them
  p.push_back("cse");                     // one value per computation
  p.push_back("simplify");                // x*1, permute∘permute, reshape∘reshape, ...
  p.push_back("constant_fold");           // transposed/scaled weights, with freeze
  p.push_back("match_attention");         // needs softmax whole: before decompose
  p.push_back("match_pools");             // the pads folded to splats: after constant_fold
  p.push_back("fold_conv_pads");          // likewise: an ONNX Pad before a Conv into its pads
  p.push_back("dce");                     // drop the attention and the windows they replaced
  p.push_back("fold_conv_affine");        // inference batch-norm into the convolution before it
  p.push_back("fold_norm_weights");       // rms_norm scale into Wq/Wk/Wv, W_gate/W_up
  p.push_back("constant_fold");           // the scaled weights, with freeze
  if (freeze) p.push_back("merge_matmuls");  // x@Wq, x@Wk, x@Wv -> one x@[Wq|Wk|Wv]
  if (freeze) p.push_back("quantize_weights");  // the merged weights in their format (f32: nothing)
  if (freeze) p.push_back("trim_conv_taps");  // the weights final (folded); channels first, before assign_layouts
  if (freeze) p.push_back("assign_layouts");  // convs channels last where their kernels read them so (needs their weights known)
  if (freeze) p.push_back("winograd_weights");  // after the passes that change conv weights
  if (freeze) p.push_back("pack_conv_weights");  // after the last constant_fold, which would unpack them
  if (freeze) p.push_back("fold_input_scale");   // rewrites the packed view: after pack_conv_weights
  if (freeze) p.push_back("stride_matmul_weights");  // after the last constant_fold, which would transpose them back
  p.push_back("decompose");               // primitives for the fusion stage
  p.push_back("sink_gathers");            // on the primitives: blends of upsampled values before the upsample
  p.push_back("cse");                     // decompositions share subexpressions
  p.push_back("simplify");                // and expose new no-ops
  p.push_back("dce");                     // drop the leftovers
  return p;
}

NodeCounts count_nodes(const Graph& g) {
  NodeCounts c;
  for (const Node& n : g.nodes()) {
    switch (n.def().category) {
      case OpCategory::source:
        if (n.op == Op::constant) ++c.constant;
        continue;
      case OpCategory::elementwise: ++c.elementwise; break;
      case OpCategory::reduction: ++c.reduction; break;
      case OpCategory::matmul: ++c.matmul; break;
      case OpCategory::view: ++c.view; break;
      case OpCategory::movement: ++c.movement; break;
      case OpCategory::composite: ++c.composite; break;
      case OpCategory::special:
      case OpCategory::control: ++c.special; break;
    }
    if (n.op == Op::flash_attn) ++c.flash_attn;
    ++c.total_ops;
  }
  return c;
}

Difference compare_outputs(const std::vector<NDArray>& got, const std::vector<NDArray>& want) {
  Difference d;
  if (got.size() != want.size()) throw Error("compare_outputs: output counts differ");
  double scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape() != want[i].shape()) throw Error("compare_outputs: output " + std::to_string(i) + " changed shape");
    for (int64_t k = 0; k < got[i].numel(); ++k) {
      double a = got[i].get(k), b = want[i].get(k);
      if (std::bit_cast<uint64_t>(a) != std::bit_cast<uint64_t>(b) && !(std::isnan(a) && std::isnan(b))) d.bit_identical = false;
      if (std::isnan(a) != std::isnan(b)) d.max_abs = INFINITY;
      else if (!std::isnan(a) && a != b) d.max_abs = std::max(d.max_abs, std::fabs(a - b));
      if (std::isfinite(b)) scale = std::max(scale, std::fabs(b));
    }
  }
  d.max_rel = d.max_abs == 0 ? 0 : d.max_abs / std::max(scale, 1e-300);
  return d;
}

std::vector<PassRecord> run_pipeline(Graph& g, const std::vector<std::string>& passes, const PipelineOptions& o) {
  const bool log = o.log || log_enabled("passes");
  std::vector<NDArray> reference;
  Bindings inputs;
  if (o.differential) {
    if (o.inputs) {
      inputs = *o.inputs;
    } else {
      RandomInputOptions ro;
      ro.seed = o.seed;
      ro.sizes = o.sizes;
      ro.fixed = o.fixed_inputs;
      inputs = random_inputs(g, ro);
    }
    reference = interpret(g, inputs, {o.differential_dtype});
  }
  std::vector<PassRecord> records;
  std::vector<std::string> all = passes;
  if (o.lower && needs_lowering(g) && (all.empty() || all.back() != "lower")) all.push_back("lower");
  for (const auto& name : all) {
    const PassInfo& p = find_pass(name);
    auto t0 = std::chrono::steady_clock::now();
    PassRecord r;
    r.pass = name;
    r.changed = p.run(g, o.pass);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.verify) {
      try {
        verify(g);
      } catch (const Error& e) {
        throw Error("after pass " + name + ": " + e.what());
      }
    }
    r.counts = count_nodes(g);
    if (o.differential) {
      Difference d = compare_outputs(interpret(g, inputs, {o.differential_dtype}), reference);
      r.max_abs_diff = d.max_abs;
      r.max_rel_diff = d.max_rel;
      r.bit_identical = d.bit_identical;
    }
    if (log) {
      std::fprintf(stderr, "// pass %-18s %8.3f ms  %s\n", name.c_str(), r.seconds * 1e3, r.changed ? "changed" : "(unchanged)");
      if (r.changed) {
        std::string text = print_graph(g, log_print_options());  // frozen weights summarized, never dumped
        std::fwrite(text.data(), 1, text.size(), stderr);
      }
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace tj
