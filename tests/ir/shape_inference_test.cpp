// Shape and dtype inference for every op in the table: a good case (symbolic
// dims where they matter) and the errors, which must name the op and operands.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

Type ty(const std::string& s) {
  // "f32[2,S]" -> Type; a tiny reader for test tables.
  auto b = s.find('[');
  Type t{*parse_dtype(s.substr(0, b)), {}};
  std::string body = s.substr(b + 1, s.size() - b - 2);
  size_t i = 0;
  while (i < body.size()) {
    size_t j = body.find(',', i);
    if (j == std::string::npos) j = body.size();
    t.shape.push_back(Dim::parse(body.substr(i, j - i)));
    i = j + 1;
  }
  return t;
}

std::string infer(Op op, const std::vector<std::string>& operands, const NamedAttrs& attrs = {}) {
  Graph g;
  std::vector<ValueId> ids;
  for (size_t i = 0; i < operands.size(); ++i) ids.push_back(g.add_input("in" + std::to_string(i), ty(operands[i])));
  return g.type(g.add(op, ids, attrs)).str();
}

// Returns the error message, or "" if inference succeeded.
std::string error_of(Op op, const std::vector<std::string>& operands, const NamedAttrs& attrs = {}) {
  try {
    infer(op, operands, attrs);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

TEST(ShapeInference, TableIsComplete) {
  for (int i = 0; i < static_cast<int>(Op::kNumOps); ++i) {
    const OpDef& d = op_def(static_cast<Op>(i));
    EXPECT_EQ(op_by_name(d.name), d.op);
  }
  EXPECT_FALSE(op_by_name("nonsense"));
}

TEST(ShapeInference, Unary) {
  for (Op op : {Op::neg, Op::exp, Op::log, Op::tanh, Op::sqrt, Op::rsqrt, Op::sin, Op::cos, Op::abs, Op::sigmoid,
                Op::recip, Op::silu, Op::gelu})
    EXPECT_EQ(infer(op, {"f32[2,S]"}), "f32[2,S]") << op_def(op).name;
  EXPECT_EQ(infer(Op::neg, {"i64[3]"}), "i64[3]");
  EXPECT_NE(error_of(Op::exp, {"i64[3]"}).find("exp(i64[3]): operand 0 must be floating point"), std::string::npos);
  EXPECT_NE(error_of(Op::neg, {"bool[3]"}), "");
  EXPECT_EQ(infer(Op::cast, {"f32[2,S]"}, {{"to", DType::bf16}}), "bf16[2,S]");
}

TEST(ShapeInference, BinaryBroadcasting) {
  EXPECT_EQ(infer(Op::add, {"f32[2,3]", "f32[3]"}), "f32[2,3]");
  EXPECT_EQ(infer(Op::mul, {"f32[3,1]", "f32[1,4]"}), "f32[3,4]");
  EXPECT_EQ(infer(Op::sub, {"f32[]", "f32[5,2]"}), "f32[5,2]");
  EXPECT_EQ(infer(Op::div, {"f32[S,1,4]", "f32[7,1]"}), "f32[S,7,4]");
  EXPECT_EQ(infer(Op::max, {"f32[S,T]", "f32[1,T]"}), "f32[S,T]");
  EXPECT_EQ(infer(Op::pow, {"f64[2]", "f64[]"}), "f64[2]");
  EXPECT_EQ(infer(Op::min, {"i64[2]", "i64[2]"}), "i64[2]");
  EXPECT_EQ(error_of(Op::add, {"f32[2,3]", "f32[4]"}), "add(f32[2,3], f32[4]): cannot broadcast dimension 4 against 3");
  EXPECT_EQ(error_of(Op::add, {"f32[S]", "f32[T]"}), "add(f32[S], f32[T]): cannot broadcast dimension T against S");
  EXPECT_EQ(error_of(Op::add, {"f32[2]", "f64[2]"}), "add(f32[2], f64[2]): operand dtypes differ: f32 vs f64");
  EXPECT_NE(error_of(Op::add, {"bool[2]", "bool[2]"}), "");
  EXPECT_NE(error_of(Op::pow, {"i64[2]", "i64[2]"}), "");
}

TEST(ShapeInference, ComparisonsAndWhere) {
  for (Op op : {Op::eq, Op::ne, Op::lt, Op::le, Op::gt, Op::ge}) EXPECT_EQ(infer(op, {"f32[2,S]", "f32[]"}), "bool[2,S]");
  EXPECT_EQ(infer(Op::where, {"bool[S,1]", "f32[1,4]", "f32[]"}), "f32[S,4]");
  EXPECT_NE(error_of(Op::where, {"f32[2]", "f32[2]", "f32[2]"}).find("condition must be bool"), std::string::npos);
  EXPECT_NE(error_of(Op::where, {"bool[2]", "f32[2]", "f64[2]"}).find("branch dtypes differ"), std::string::npos);
}

TEST(ShapeInference, Reductions) {
  std::vector<int64_t> last{-1};
  EXPECT_EQ(infer(Op::sum, {"f32[2,S,4]"}, {{"axes", last}}), "f32[2,S]");
  EXPECT_EQ(infer(Op::amax, {"f32[2,S,4]"}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdim", true}}), "f32[1,S,1]");
  EXPECT_EQ(infer(Op::mean, {"f32[2,S,4]"}, {{"axes", std::vector<int64_t>{1}}}), "f32[2,4]");
  EXPECT_EQ(infer(Op::sum, {"f32[2,3]"}, {{"axes", std::vector<int64_t>{0, 1}}}), "f32[]");
  EXPECT_NE(error_of(Op::sum, {"f32[2,3]"}, {{"axes", std::vector<int64_t>{2}}}).find("axis 2 out of range for rank 2"), std::string::npos);
  EXPECT_NE(error_of(Op::sum, {"f32[2,3]"}, {{"axes", std::vector<int64_t>{1, -1}}}).find("repeated"), std::string::npos);
  EXPECT_NE(error_of(Op::mean, {"i64[2]"}, {{"axes", last}}), "");
  // Axes are canonicalized: negative and unsorted in, sorted non-negative out.
  Graph g;
  ValueId x = g.add_input("x", ty("f32[2,3,4]"));
  ValueId s = g.add(Op::sum, {x}, {{"axes", std::vector<int64_t>{-1, 0}}});
  EXPECT_EQ(g.node(s).attr_ints("axes"), (std::vector<int64_t>{0, 2}));
}

TEST(ShapeInference, Matmul) {
  EXPECT_EQ(infer(Op::matmul, {"f32[2,4,16]", "f32[2,16,S]"}), "f32[2,4,S]");
  EXPECT_EQ(infer(Op::matmul, {"f32[T,128]", "f32[128,64]"}), "f32[T,64]");
  EXPECT_EQ(infer(Op::matmul, {"f32[1,T,128]", "f32[128,64]"}), "f32[1,T,64]");
  EXPECT_EQ(infer(Op::matmul, {"f32[3,1,4,5]", "f32[7,5,6]"}), "f32[3,7,4,6]");
  EXPECT_EQ(error_of(Op::matmul, {"f32[2,4,16]", "f32[2,8,S]"}),
            "matmul(f32[2,4,16], f32[2,8,S]): contracting dimensions differ: 16 vs 8");
  EXPECT_NE(error_of(Op::matmul, {"f32[2,4,5]", "f32[3,5,6]"}).find("cannot broadcast"), std::string::npos);
  EXPECT_NE(error_of(Op::matmul, {"f32[4]", "f32[4,5]"}).find("rank >= 2"), std::string::npos);
}

TEST(ShapeInference, Views) {
  Shape to{Dim::symbol("S"), 4};
  EXPECT_EQ(infer(Op::reshape, {"f32[S,2,2]"}, {{"shape", to}}), "f32[S,4]");
  EXPECT_NE(error_of(Op::reshape, {"f32[S,2,3]"}, {{"shape", to}}).find("element counts differ"), std::string::npos);
  EXPECT_EQ(infer(Op::permute, {"f32[2,S,4]"}, {{"perm", std::vector<int64_t>{2, 0, -2}}}), "f32[4,2,S]");
  EXPECT_NE(error_of(Op::permute, {"f32[2,3]"}, {{"perm", std::vector<int64_t>{0, 0}}}).find("repeats"), std::string::npos);
  EXPECT_NE(error_of(Op::permute, {"f32[2,3]"}, {{"perm", std::vector<int64_t>{0}}}), "");
  EXPECT_EQ(infer(Op::expand, {"f32[S,1]"}, {{"shape", Shape{3, Dim::symbol("S"), 5}}}), "f32[3,S,5]");
  EXPECT_NE(error_of(Op::expand, {"f32[2,3]"}, {{"shape", Shape{2, 4}}}).find("cannot expand"), std::string::npos);
  EXPECT_NE(error_of(Op::expand, {"f32[2,3]"}, {{"shape", Shape{3}}}).find("lower rank"), std::string::npos);
  EXPECT_EQ(infer(Op::slice, {"f32[2,S]"}, {{"axis", int64_t{1}}, {"start", Dim(1)}, {"end", Dim::symbol("S")}}), "f32[2,S-1]");
  EXPECT_EQ(infer(Op::slice, {"f32[10]"}, {{"axis", int64_t{0}}, {"start", Dim(1)}, {"end", Dim(8)}, {"step", int64_t{3}}}), "f32[3]");
  EXPECT_NE(error_of(Op::slice, {"f32[10]"}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(11)}}).find("beyond"), std::string::npos);
  EXPECT_NE(error_of(Op::slice, {"f32[10]"}, {{"axis", int64_t{0}}, {"start", Dim(5)}, {"end", Dim(2)}}).find("before start"), std::string::npos);
  EXPECT_NE(error_of(Op::slice, {"f32[S]"}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim::symbol("S")}, {"step", int64_t{2}}}).find("constant length"), std::string::npos);
  // ceil(4 / step) without overflow, for the largest step too.
  EXPECT_EQ(infer(Op::slice, {"f32[4]"}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(4)}, {"step", INT64_MAX}}), "f32[1]");
  EXPECT_EQ(infer(Op::slice, {"f32[4]"}, {{"axis", int64_t{0}}, {"start", Dim(4)}, {"end", Dim(4)}, {"step", INT64_MAX}}), "f32[0]");
  EXPECT_EQ(infer(Op::squeeze, {"f32[1,S,1]"}, {{"axes", std::vector<int64_t>{0, -1}}}), "f32[S]");
  EXPECT_NE(error_of(Op::squeeze, {"f32[2,S]"}, {{"axes", std::vector<int64_t>{1}}}).find("cannot squeeze axis 1 of size S"), std::string::npos);
  EXPECT_EQ(infer(Op::unsqueeze, {"f32[S,4]"}, {{"axes", std::vector<int64_t>{0, -1}}}), "f32[1,S,4,1]");
}

TEST(ShapeInference, DataMovement) {
  EXPECT_EQ(infer(Op::concat, {"f32[2,S]", "f32[2,3]", "f32[2,T]"}, {{"axis", int64_t{-1}}}), "f32[2,S+T+3]");
  EXPECT_NE(error_of(Op::concat, {"f32[2,3]", "f32[3,3]"}, {{"axis", int64_t{1}}}).find("differ in dimension 0"), std::string::npos);
  EXPECT_EQ(infer(Op::gather, {"f32[V,128]", "i64[B,T]"}), "f32[B,T,128]");
  EXPECT_EQ(infer(Op::gather, {"f32[4,V,8]", "i32[5]"}, {{"axis", int64_t{1}}}), "f32[4,5,8]");
  EXPECT_NE(error_of(Op::gather, {"f32[4,8]", "f32[5]"}).find("indices must be integers"), std::string::npos);
  EXPECT_EQ(infer(Op::iota, {}, {{"n", Dim::symbol("T")}}), "i64[T]");
}

TEST(ShapeInference, Composites) {
  EXPECT_EQ(infer(Op::softmax, {"f32[2,S]"}), "f32[2,S]");
  EXPECT_EQ(infer(Op::rms_norm, {"f32[T,128]", "f32[128]"}), "f32[T,128]");
  EXPECT_EQ(infer(Op::layer_norm, {"f32[T,64]", "f32[64]", "f32[64]"}), "f32[T,64]");
  EXPECT_NE(error_of(Op::rms_norm, {"f32[T,128]", "f32[64]"}).find("does not match the last dimension"), std::string::npos);
  EXPECT_NE(error_of(Op::softmax, {"i32[3]"}), "");
}

TEST(ShapeInference, Special) {
  Dim T = Dim::symbol("T"), S = Dim::symbol("S");
  EXPECT_EQ(infer(Op::causal_mask, {"i64[]"}, {{"q", T}, {"k", S}}), "f32[T,S]");
  EXPECT_NE(error_of(Op::causal_mask, {"i64[2]"}, {{"q", T}, {"k", S}}).find("integer scalar"), std::string::npos);
  EXPECT_EQ(infer(Op::kv_write, {"f32[1,2,S,16]", "f32[1,2,T,16]", "i64[]"}), "f32[1,2,S,16]");
  EXPECT_NE(error_of(Op::kv_write, {"f32[1,2,S,16]", "f32[1,4,T,16]", "i64[]"}).find("do not match"), std::string::npos);
  EXPECT_EQ(infer(Op::flash_attn, {"f32[B,8,T,16]", "f32[B,2,S,16]", "f32[B,2,S,16]"}, {{"scale", 0.25}}), "f32[B,8,T,16]");
  EXPECT_EQ(infer(Op::flash_attn, {"f32[1,8,T,16]", "f32[1,2,S,16]", "f32[1,2,S,16]", "i64[]"}, {{"scale", 0.25}, {"causal", true}}),
            "f32[1,8,T,16]");
  EXPECT_NE(error_of(Op::flash_attn, {"f32[1,6,T,16]", "f32[1,4,S,16]", "f32[1,4,S,16]"}, {{"scale", 0.25}}).find("not a multiple"),
            std::string::npos);
  EXPECT_NE(error_of(Op::flash_attn, {"f32[1,8,T,16]", "f32[1,2,S,16]", "f32[1,2,S,16]"}, {{"scale", 0.25}, {"causal", true}})
                .find("offset operand exactly when causal"),
            std::string::npos);
  // flash_attn's backward: flash_attn's checks, then dout, lse and delta.
  const std::vector<std::string> qkv = {"f32[B,8,T,16]", "f32[B,2,S,16]", "f32[B,2,S,8]"};
  EXPECT_EQ(infer(Op::attn_lse, {qkv[0], qkv[1], "i64[]"}, {{"scale", 0.25}, {"causal", true}}), "f32[B,8,T]");
  std::vector<std::string> grad = {qkv[0], qkv[1], qkv[2], "f32[B,8,T,8]", "f32[B,8,T]", "f32[B,8,T]"};
  EXPECT_EQ(infer(Op::attn_dq, grad, {{"scale", 0.25}}), "f32[B,8,T,16]");
  EXPECT_EQ(infer(Op::attn_dkv, grad, {{"scale", 0.25}}), "f32[B,2,S,24]");
  grad[4] = "f32[B,8,S]";
  EXPECT_NE(error_of(Op::attn_dq, grad, {{"scale", 0.25}}).find("lse must be f32[B,8,T]"), std::string::npos);
  grad[4] = "f32[B,8,T]", grad[3] = "f32[B,8,T,16]";
  EXPECT_NE(error_of(Op::attn_dkv, grad, {{"scale", 0.25}}).find("dout must be"), std::string::npos);
  EXPECT_NE(error_of(Op::attn_lse, {"f32[1,6,T,16]", "f32[1,4,S,16]"}, {{"scale", 0.25}}).find("not a multiple"), std::string::npos);
}

TEST(ShapeInference, ArityAndAttributes) {
  EXPECT_NE(error_of(Op::add, {"f32[2]"}).find("wrong number of operands"), std::string::npos);
  Graph g;
  ValueId x = g.add_input("x", ty("f32[2]"));
  EXPECT_THROW(g.add(Op::softmax, {x}, {{"dim", int64_t{0}}}), Error);
  EXPECT_THROW(g.add(Op::reshape, {x}), Error);                                   // missing attribute
  EXPECT_THROW(g.add(Op::softmax, {x}, {{"axis", 1.5}}), Error);                  // wrong kind
  EXPECT_THROW(g.add(Op::neg, {7}), Error);                                       // undefined operand
  EXPECT_THROW(g.add_input("x", ty("f32[3]")), Error);                            // duplicate name
  EXPECT_THROW(g.add_const(ty("f32[3]"), std::vector<double>{1, 2}), Error);      // wrong size
}

}  // namespace
}  // namespace tj
