// Inference rules that several op rows share.
#include "ir/ops/infer.h"

#include <algorithm>

namespace tj::infer {

void require_float(const InferCtx& c, size_t i) {
  if (!is_float(c.in[i].dtype))
    c.fail("operand " + std::to_string(i) + " must be floating point, got " + std::string(dtype_name(c.in[i].dtype)));
}

void require_int_scalar(const InferCtx& c, size_t i, const char* what) {
  if (!is_int(c.in[i].dtype) || c.in[i].rank() != 0)
    c.fail(std::string(what) + " must be an integer scalar, got " + c.in[i].str());
}

void require_same_dtype(const InferCtx& c) {
  for (size_t i = 1; i < c.in.size(); ++i)
    if (c.in[i].dtype != c.in[0].dtype)
      c.fail("operand dtypes differ: " + std::string(dtype_name(c.in[0].dtype)) + " vs " +
             std::string(dtype_name(c.in[i].dtype)));
}

void check_dims_nonnegative(const InferCtx& c, const Shape& s) {
  for (const auto& d : s)
    if (auto v = d.as_const(); v && *v < 0) c.fail("negative dimension " + std::to_string(*v) + " in " + shape_str(s));
}

Shape broadcast(const InferCtx& c, const std::vector<const Shape*>& shapes) {
  size_t r = 0;
  for (auto* s : shapes) r = std::max(r, s->size());
  Shape out(r, Dim(1));
  for (auto* s : shapes) {
    size_t off = r - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const Dim& d = (*s)[i];
      Dim& o = out[off + i];
      if (d == Dim(1) || d == o) continue;
      if (o == Dim(1)) {
        o = d;
        continue;
      }
      c.fail("cannot broadcast dimension " + d.str() + " against " + o.str());
    }
  }
  return out;
}

namespace {
Shape broadcast_all(const InferCtx& c) {
  std::vector<const Shape*> shapes;
  for (const Type& t : c.in) shapes.push_back(&t.shape);
  return broadcast(c, shapes);
}
}  // namespace

Type float_unary(InferCtx& c) {
  require_float(c, 0);
  return c.in[0];
}

Type numeric_unary(InferCtx& c) {
  if (c.in[0].dtype == DType::boolean) c.fail("operand must be numeric, got bool");
  return c.in[0];
}

Type binary(InferCtx& c) {
  require_same_dtype(c);
  if (c.in[0].dtype == DType::boolean) c.fail("arithmetic on bool operands");
  return {c.in[0].dtype, broadcast_all(c)};
}

Type float_binary(InferCtx& c) {
  require_float(c, 0);
  return binary(c);
}

Type compare(InferCtx& c) {
  require_same_dtype(c);
  return {DType::boolean, broadcast_all(c)};
}

Type logical(InferCtx& c) {
  for (size_t i = 0; i < c.in.size(); ++i)
    if (c.in[i].dtype != DType::boolean) c.fail("operand " + std::to_string(i) + " must be bool, got " + c.in[i].str());
  return {DType::boolean, broadcast_all(c)};
}

Type integer_unary(InferCtx& c) {
  if (!is_int(c.in[0].dtype)) c.fail("operand must be an integer, got " + c.in[0].str());
  return c.in[0];
}

Type integer_binary(InferCtx& c) {
  require_same_dtype(c);
  if (!is_int(c.in[0].dtype)) c.fail("operands must be integers, got " + c.in[0].str());
  return {c.in[0].dtype, broadcast_all(c)};
}

Shape reduced_shape(InferCtx& c, std::vector<int64_t>& axes, bool keep) {
  int r = c.rank(0);
  for (auto& a : axes) a = c.axis(a, r);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("repeated reduction axis");
  Shape out;
  for (int i = 0; i < r; ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced) out.push_back(c.in[0].shape[static_cast<size_t>(i)]);
    else if (keep) out.push_back(Dim(1));
  }
  return out;
}

}  // namespace tj::infer
