// Fusion rules on small graphs, each rule switched off, the cycle case, and
// the pinned kernel counts of the tiny Llama layer per variant.
#include <gtest/gtest.h>

#include <map>

#include "compiler/analysis.h"
#include "ir/text.h"
#include "models/llama.h"
#include "schedule/fusion.h"

namespace tj {
namespace {

// Kernel contents as "kind: op op | kind: op ..." for compact assertions.
std::string summary(const Graph& g, const Schedule& s) {
  std::string r;
  for (const Kernel& k : s.kernels) {
    if (!r.empty()) r += " | ";
    r += std::string(kernel_kind_name(k.kind)) + ":";
    for (ValueId v : k.ops) r += " " + std::string(g.node(v).def().name);
  }
  return r;
}

std::string fused(const std::string& text, FusionOptions o = {}) {
  Graph g = parse_graph(text);
  return summary(g, fuse(g, o));
}

const char* kMatmulEpilogue =
    "graph g\ninput %x : f32[4,8]\nparam %w : f32[8,16]\nparam %b : f32[16]\n"
    "%0 = matmul(%x, %w) : f32[4,16]\n%1 = add(%0, %b) : f32[4,16]\n%2 = tanh(%1) : f32[4,16]\nreturn %2\n";

TEST(Fusion, MatmulTakesElementwiseEpilogue) {
  EXPECT_EQ(fused(kMatmulEpilogue), "matmul: matmul add tanh");
  FusionOptions o;
  o.epilogue = false;
  EXPECT_EQ(fused(kMatmulEpilogue, o), "matmul: matmul | pointwise: add tanh");
  EXPECT_EQ(fused(kMatmulEpilogue, FusionOptions::none()), "matmul: matmul | pointwise: add | pointwise: tanh");
}

TEST(Fusion, ViewsAndMasksAreNeverKernels) {
  const char* text =
      "graph g\ninput %x : f32[2,3,4]\ninput %pos : i64[]\n"
      "%0 = permute(%x) {perm=[0, 2, 1]} : f32[2,4,3]\n%1 = reshape(%0) {shape=[8, 3]} : f32[8,3]\n"
      "%2 = slice(%1) {axis=0, start=0, end=3} : f32[3,3]\n%3 = causal_mask(%pos) {q=3, k=3} : f32[3,3]\n"
      "%4 = add(%2, %3) : f32[3,3]\nreturn %4\n";
  Graph g = parse_graph(text);
  Schedule s = fuse(g);
  EXPECT_EQ(summary(g, s), "pointwise: add");
  // It reads only the 9 sliced elements of x, and the mask costs nothing.
  EXPECT_EQ(s.kernels[0].bytes_read, 9 * 4);
  EXPECT_EQ(s.kernels[0].bytes_written, 9 * 4);
}

TEST(Fusion, ElementwiseJoinsProducerOfSameSpace) {
  const char* text =
      "graph g\ninput %x : f32[4,8]\ninput %y : f32[8]\n"
      "%0 = exp(%x) : f32[4,8]\n%1 = mul(%0, %y) : f32[4,8]\n%2 = sum(%1) {axes=[0]} : f32[8]\n%3 = neg(%2) : f32[8]\n"
      "return %3\n";
  EXPECT_EQ(fused(text), "pointwise: exp mul | reduction: sum | pointwise: neg");
  FusionOptions o;
  o.pointwise = false;
  EXPECT_EQ(fused(text, o), "pointwise: exp | pointwise: mul | reduction: sum | pointwise: neg");
}

// Each is one rowwise kernel; back to back over the same rows, one kernel.
TEST(Fusion, RmsNormAndSoftmaxAreRowwiseKernels) {
  const char* text =
      "graph g\ninput %x : f64[3,16]\nparam %w : f64[16]\n"
      "%0 = rms_norm(%x, %w) : f64[3,16]\n%1 = softmax(%0) : f64[3,16]\nreturn %1\n";
  Graph g = prepare_variant(parse_graph(text), Variant::fused);  // decomposed
  EXPECT_EQ(summary(g, fuse(g)), "rowwise: mul mean add rsqrt mul mul amax sub exp sum div");
  Graph alone = prepare_variant(parse_graph("graph g\ninput %x : f64[3,16]\n%0 = softmax(%x) : f64[3,16]\nreturn %0\n"), Variant::fused);
  EXPECT_EQ(summary(alone, fuse(alone)), "rowwise: amax sub exp sum div");
  FusionOptions o;
  o.rowwise = false;
  EXPECT_EQ(summary(g, fuse(g, o)),
            "pointwise: mul | rowwise: mean | pointwise: add rsqrt | pointwise: mul mul | rowwise: amax | pointwise: sub exp | "
            "rowwise: sum | pointwise: div");
}

// A reduction's input is not taken as a matmul epilogue: it goes to the
// reduction's kernel, as in RMSNorm right after a residual add.
TEST(Fusion, ReductionInputStaysWithTheReduction) {
  const char* text =
      "graph g\ninput %x : f32[4,8]\nparam %w : f32[8,8]\n"
      "%0 = matmul(%x, %w) : f32[4,8]\n%1 = add(%0, %x) : f32[4,8]\n%2 = mul(%1, %1) : f32[4,8]\n"
      "%3 = mean(%2) {axes=[1], keepdim=true} : f32[4,1]\n%4 = rsqrt(%3) : f32[4,1]\n%5 = mul(%1, %4) : f32[4,8]\nreturn %5\n";
  EXPECT_EQ(fused(text), "matmul: matmul add | rowwise: mul mean rsqrt mul");
}

// With the C++ emitter's rule (conv_reductions), a sum or mean of a
// channels-last conv's value over every position joins the conv's kernel,
// directly or through a reshape that keeps the image and channel dims; an
// op reading that mean waits for the kernel to end. Over some positions
// only, of a channels-first conv, or without the rule: a reduction kernel.
TEST(Fusion, SumsOverAConvsPositionsJoinTheConv) {
  const char* text =
      "graph g\ninput %x : f32[1,6,7,16]\nparam %w : f32[16,1,3,3]\ninput %y : f32[1,16,6,7]\nparam %v : f32[8,16,1,1]\n"
      "%0 = conv(%x, %w) {groups=16, pad_begin=[1, 1], pad_end=[1, 1], channels_last=true} : f32[1,6,7,16]\n"
      "%1 = relu(%0) : f32[1,6,7,16]\n"
      "%2 = mean(%1) {axes=[1, 2], keepdim=true} : f32[1,1,1,16]\n"
      "%3 = reshape(%1) {shape=[1, 42, 16]} : f32[1,42,16]\n"
      "%4 = sum(%3) {axes=[1]} : f32[1,16]\n"
      "%5 = sub(%1, %2) : f32[1,6,7,16]\n"
      "%6 = mean(%1) {axes=[1]} : f32[1,7,16]\n"
      "%7 = conv(%y, %v) : f32[1,8,6,7]\n"
      "%8 = mean(%7) {axes=[2, 3]} : f32[1,8]\n"
      "return %4, %5, %6, %8\n";
  FusionOptions o;
  o.conv_reductions = true;
  EXPECT_EQ(fused(text, o), "conv: conv relu mean sum | pointwise: sub | reduction: mean | conv: conv | reduction: mean");
  EXPECT_EQ(fused(text), "conv: conv relu | reduction: mean | reduction: sum | pointwise: sub | reduction: mean | conv: conv | reduction: mean");
}

// A grouped conv of 24 channels per group (a width no vector form takes:
// the matrix library's) takes only the library's epilogue: a ReLU or a
// clip, or a residual add and one of those after it. A SiLU's ops and the
// sums over its positions get kernels of their own; groups of 8 take them.
TEST(Fusion, ALibraryWidthConvTakesOnlyTheLibrarysEpilogue) {
  auto text = [](int cg, const std::string& tail) {
    const std::string w = std::to_string(cg);
    return "graph g\ninput %x : f32[1,6,7,48]\nparam %w : f32[48," + w + ",3,3]\ninput %r : f32[1,6,7,48]\n"
           "%0 = conv(%x, %w) {groups=" + std::to_string(48 / cg) + ", pad_begin=[1, 1], pad_end=[1, 1], channels_last=true} : f32[1,6,7,48]\n" + tail;
  };
  const std::string silu = "%1 = sigmoid(%0) : f32[1,6,7,48]\n%2 = mul(%0, %1) : f32[1,6,7,48]\n%3 = mean(%2) {axes=[1, 2]} : f32[1,48]\nreturn %2, %3\n";
  const std::string residual = "%1 = add(%0, %r) : f32[1,6,7,48]\n%2 = relu(%1) : f32[1,6,7,48]\n%3 = mean(%2) {axes=[1, 2]} : f32[1,48]\nreturn %2, %3\n";
  FusionOptions o;
  o.conv_reductions = true;
  o.library_vector_floats = 16;
  EXPECT_EQ(fused(text(24, silu), o), "conv: conv | pointwise: sigmoid mul | reduction: mean");
  EXPECT_EQ(fused(text(24, residual), o), "conv: conv add relu | reduction: mean");
  EXPECT_EQ(fused(text(8, silu), o), "conv: conv sigmoid mul mean");
  EXPECT_EQ(fused(text(8, residual), o), "conv: conv add relu mean");
  o.library_vector_floats = 0;  // a GPU's: a conv kernel of its own for every width
  EXPECT_EQ(fused(text(24, silu), o), "conv: conv sigmoid mul mean");
}

// c = a + b where b comes from a kernel that needs a: c may not join a's
// kernel (a cycle), so without the epilogue rule it gets its own.
TEST(Fusion, NeverCreatesACycle) {
  const char* text =
      "graph g\ninput %x : f32[4,4]\nparam %w : f32[4,4]\n"
      "%0 = exp(%x) : f32[4,4]\n%1 = matmul(%0, %w) : f32[4,4]\n%2 = add(%0, %1) : f32[4,4]\nreturn %2\n";
  FusionOptions o;
  o.epilogue = false;
  Graph g = parse_graph(text);
  Schedule s = fuse(g, o);
  EXPECT_EQ(summary(g, s), "pointwise: exp | matmul: matmul | pointwise: add");
  // Every kernel reads only kernels before it.
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (ValueId in : s.kernels[k].inputs) EXPECT_LT(s.kernel_of[static_cast<size_t>(in)], static_cast<int>(k));
  EXPECT_EQ(fused(text), "pointwise: exp | matmul: matmul add");
}

TEST(Fusion, ConcatAndKvWriteAreStoresOfTheirProducer) {
  const char* text =
      "graph g\ninput %x : f32[1,2,3,8]\ninput %cache : f32[1,2,16,8]\ninput %pos : i64[]\n"
      "%0 = slice(%x) {axis=3, start=0, end=4} : f32[1,2,3,4]\n%1 = slice(%x) {axis=3, start=4, end=8} : f32[1,2,3,4]\n"
      "%2 = neg(%1) : f32[1,2,3,4]\n%3 = concat(%2, %0) {axis=3} : f32[1,2,3,8]\n"
      "%4 = kv_write(%cache, %3, %pos) : f32[1,2,16,8]\nreturn %4\n";
  Graph g = parse_graph(text);
  Schedule s = fuse(g);
  EXPECT_EQ(summary(g, s), "pointwise: neg concat kv_write");
  // Reads x once (both halves), writes only the 3 new rows into the cache.
  EXPECT_EQ(s.kernels[0].bytes_read, 2 * 3 * 8 * 4 + 8);
  EXPECT_EQ(s.kernels[0].bytes_written, 2 * 3 * 8 * 4);
}

TEST(Fusion, HorizontalMergesIndependentKernels) {
  const char* text =
      "graph g\ninput %x : f32[4,8]\ninput %y : f32[4,8]\n"
      "%0 = exp(%x) : f32[4,8]\n%1 = sum(%0) {axes=[0]} : f32[8]\n%2 = tanh(%y) : f32[4,8]\nreturn %1, %2\n";
  EXPECT_EQ(fused(text), "pointwise: exp | reduction: sum | pointwise: tanh");
  const char* two = "graph g\ninput %x : f32[4,8]\ninput %y : f32[4,8]\n%0 = exp(%x) : f32[4,8]\n%1 = tanh(%y) : f32[4,8]\nreturn %0, %1\n";
  EXPECT_EQ(fused(two), "pointwise: exp | pointwise: tanh");
  FusionOptions o;
  o.horizontal = true;
  EXPECT_EQ(fused(two, o), "pointwise: exp tanh");
}

TEST(Fusion, ByteAndFlopCounts) {
  Graph g = parse_graph(kMatmulEpilogue);
  Schedule s = fuse(g);
  ASSERT_EQ(s.kernels.size(), 1u);
  const Kernel& k = s.kernels[0];
  EXPECT_EQ(k.bytes_read, (4 * 8 + 8 * 16 + 16) * 4);
  EXPECT_EQ(k.bytes_written, 4 * 16 * 4);
  EXPECT_EQ(k.flops, 2 * 4 * 16 * 8 + 4 * 16 * 2);
}

TEST(Fusion, TinyLlamaLayerKernelCountsPerVariant) {
  const auto& c = models::llama_config("tiny");
  Graph prefill = models::trace_llama_layer(c, {1, 16, 16, DType::f32});
  Graph decode = models::trace_llama_layer(c, {1, 1, 64, DType::f32});
  std::map<std::string, size_t> want_prefill = {{"eager", 34}, {"unfused", 51}, {"fused", 14}, {"fused+flash", 12}};
  for (Variant v : all_variants()) {
    Graph p = prepare_variant(prefill, v), d = prepare_variant(decode, v);
    EXPECT_EQ(fuse(p, variant_fusion(v)).kernels.size(), want_prefill[std::string(variant_name(v))]) << variant_name(v);
    EXPECT_EQ(fuse(d, variant_fusion(v)).kernels.size(), want_prefill[std::string(variant_name(v))]) << variant_name(v);
  }
}

void expect_reads_only_earlier(const Graph& g, const Schedule& s) {
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (ValueId in : s.kernels[k].inputs) EXPECT_LT(s.kernel_of[static_cast<size_t>(in)], static_cast<int>(k)) << summary(g, s);
}

// Found in review: an epilogue reading the matmul through a permute; gather
// indices computed by a kernel; a cache read after kv_write.
TEST(Fusion, ReviewCases) {
  Graph self = parse_graph(
      "graph g\ninput %x : f32[4,4]\nparam %w : f32[4,4]\n%0 = matmul(%x, %w) : f32[4,4]\n"
      "%1 = permute(%0) {perm=[1, 0]} : f32[4,4]\n%2 = add(%0, %1) : f32[4,4]\nreturn %2\n");
  Schedule s1 = fuse(self);
  EXPECT_EQ(summary(self, s1), "matmul: matmul | pointwise: add");
  expect_reads_only_earlier(self, s1);

  Graph gidx = parse_graph(
      "graph g\ninput %t : f32[10,3]\ninput %i : i64[2,4]\n%0 = sum(%i) {axes=[1]} : i64[2]\n"
      "%1 = reshape(%0) {shape=[2, 1]} : i64[2,1]\n%2 = gather(%t, %1) : f32[2,1,3]\n%3 = exp(%2) : f32[2,1,3]\nreturn %3\n");
  Schedule s2 = fuse(gidx);
  expect_reads_only_earlier(gidx, s2);
  EXPECT_EQ(s2.kernels.size(), 2u);  // the sum, then the gather with exp reading its result
  EXPECT_EQ(s2.kernels[0].outputs.size(), 1u);

  Graph kv = parse_graph(
      "graph g\ninput %cache : f32[1,1,4,2]\ninput %rows : f32[1,1,1,2]\ninput %pos : i64[]\n"
      "%0 = kv_write(%cache, %rows, %pos) : f32[1,1,4,2]\n%1 = exp(%0) : f32[1,1,4,2]\n%2 = exp(%cache) : f32[1,1,4,2]\n"
      "%3 = sub(%1, %2) : f32[1,1,4,2]\nreturn %3\n");
  Schedule s3 = fuse(kv);
  EXPECT_EQ(s3.in_place[3], -1);  // the old cache is still read: a copy
  Graph donated = parse_graph(
      "graph g\ninput %cache : f32[1,1,4,2]\ninput %rows : f32[1,1,1,2]\ninput %pos : i64[]\n"
      "%0 = kv_write(%cache, %rows, %pos) : f32[1,1,4,2]\n%1 = exp(%0) : f32[1,1,4,2]\nreturn %1, %0\n");
  EXPECT_EQ(fuse(donated).in_place[3], 0);  // written into input 0's buffer
  expect_reads_only_earlier(kv, s3);
  EXPECT_EQ(s3.kernels[0].bytes_written, 4 * 2 * 4);  // a full copy of the cache
}

// A donated output: written into its input when the kernel reads the input
// only where it writes, after every other kernel reading it; otherwise left
// in its own buffer. The update w - x@x is a product's epilogue placed before
// the other product reading w: that product moves ahead of it.
TEST(Fusion, DonatedOutputsAreWrittenAfterTheInputsOtherReaders) {
  const std::string head = "graph g\ninput %x : f32[4,4]\ninput %w : f32[4,4]\n%0 = matmul(%x, %x) : f32[4,4]\n";
  Graph g = parse_graph(head + "%1 = sub(%w, %0) : f32[4,4]\n%2 = matmul(%x, %w) : f32[4,4]\nreturn %1, %2\n");
  EXPECT_EQ(summary(g, fuse(g)), "matmul: matmul sub | matmul: matmul");
  Schedule s = fuse(g, {}, {{0, "w"}});
  EXPECT_EQ(summary(g, s), "matmul: matmul | matmul: matmul sub");
  EXPECT_EQ(s.in_place[3], 1);  // %1 in input %w's array
  EXPECT_EQ(s.in_place[4], -1);
  auto deps = kernel_dependencies(g, s);
  EXPECT_EQ(deps[1], std::vector<int>{0});  // the reader of w first

  auto in_place = [&](const std::string& body, Donation d) {
    Graph h = parse_graph(head + body);
    return fuse(h, {}, {d}).in_place[static_cast<size_t>(h.outputs()[d.output])] >= 0;
  };
  EXPECT_TRUE(in_place("%1 = exp(%w) : f32[4,4]\n%2 = add(%1, %0) : f32[4,4]\nreturn %2\n", {0, "w"}));
  // Read transposed where it is written.
  EXPECT_FALSE(in_place("%1 = permute(%w) {perm=[1, 0]} : f32[4,4]\n%2 = add(%w, %1) : f32[4,4]\nreturn %2\n", {0, "w"}));
  // A view of the input, and the input itself returned.
  EXPECT_FALSE(in_place("%1 = reshape(%w) {shape=[4, 4]} : f32[4,4]\n%2 = permute(%w) {perm=[1, 0]} : f32[4,4]\nreturn %2\n",
                        {0, "w"}));
  EXPECT_FALSE(in_place("%1 = exp(%w) : f32[4,4]\nreturn %1, %w\n", {0, "w"}));
  // The other reader of w needs the new value first: a cycle.
  EXPECT_FALSE(in_place("%1 = exp(%w) : f32[4,4]\n%2 = matmul(%1, %w) : f32[4,4]\nreturn %1, %2\n", {0, "w"}));
  // The product reads w itself.
  EXPECT_FALSE(in_place("%1 = matmul(%w, %x) : f32[4,4]\nreturn %1\n", {0, "w"}));
  // A second output into the same input.
  Graph two = parse_graph(head + "%1 = exp(%w) : f32[4,4]\n%2 = neg(%w) : f32[4,4]\nreturn %1, %2\n");
  Schedule s2 = fuse(two, {}, {{0, "w"}, {1, "w"}});
  EXPECT_EQ(s2.in_place[3] >= 0, true);
  EXPECT_EQ(s2.in_place[4], -1);

  // A store splits the kernel's loop: w read after it (by %3, joined after
  // the concat) would see the new value. A store before the update is fine.
  EXPECT_EQ(fused(head + "%1 = exp(%w) : f32[4,4]\n%2 = concat(%1, %1) {axis=0} : f32[8,4]\n%3 = add(%w, %1) : f32[4,4]\n"
                         "return %1, %2, %3\n"),
            "matmul: matmul | pointwise: exp concat add");
  EXPECT_FALSE(in_place("%1 = exp(%w) : f32[4,4]\n%2 = concat(%1, %1) {axis=0} : f32[8,4]\n%3 = add(%w, %1) : f32[4,4]\n"
                        "return %1, %2, %3\n", {0, "w"}));
  Graph scatter = parse_graph(
      "graph g\ninput %w : f32[4,4]\ninput %i : i64[3]\ninput %u : f32[3,4]\n%0 = const {value=0.0} : f32[]\n"
      "%1 = expand(%0) {shape=[4, 4]} : f32[4,4]\n%2 = scatter_add(%1, %i, %u) : f32[4,4]\n%3 = sub(%w, %2) : f32[4,4]\nreturn %3\n");
  Schedule ss = fuse(scatter, {}, {{0, "w"}});
  EXPECT_EQ(summary(scatter, ss), "pointwise: scatter_add sub");
  EXPECT_EQ(ss.in_place[static_cast<size_t>(scatter.outputs()[0])], 0);

  // Donations that name nothing, or pair different types, are errors.
  EXPECT_THROW(fuse(g, {}, {{2, "w"}}), Error);
  EXPECT_THROW(fuse(g, {}, {{0, "v"}}), Error);
  Graph other = parse_graph(head + "%1 = sum(%w) {axes=[0]} : f32[4]\nreturn %1\n");
  EXPECT_THROW(fuse(other, {}, {{0, "w"}}), Error);
}

// Every kernel reads only values of earlier kernels (never its own through a
// view, never a later one), for every model, variant and rule setting.
TEST(Fusion, KernelsOnlyReadEarlierKernels) {
  const auto& c = models::llama_config("tiny");
  std::vector<Graph> graphs = {models::trace_llama_layer(c, {1, 16, 16, DType::f32}),
                               models::trace_llama_layer(c, {2, 1, 64, DType::f32}), models::trace_mlp(c, {1, 4, 4, DType::f32}),
                               models::trace_llama(c, {1, 5, 8, DType::f32}, 2)};
  std::vector<FusionOptions> rules(6);
  rules[1].epilogue = false;
  rules[2].pointwise = false;
  rules[3].rowwise = false;
  rules[4].horizontal = true;
  rules[5] = FusionOptions::none();
  for (const Graph& traced : graphs) {
    for (Variant v : all_variants()) {
      Graph g = prepare_variant(traced, v);
      for (const auto& r : rules) {
        Schedule s = fuse(g, r);
        for (size_t k = 0; k < s.kernels.size(); ++k) {
          for (ValueId in : s.kernels[k].inputs) {
            int producer = s.kernel_of[static_cast<size_t>(in)];
            EXPECT_LT(producer, static_cast<int>(k)) << variant_name(v) << ": kernel " << k << " reads %" << in;
          }
          for (ValueId op : s.kernels[k].ops) EXPECT_EQ(s.kernel_of[static_cast<size_t>(op)], static_cast<int>(k));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tj
