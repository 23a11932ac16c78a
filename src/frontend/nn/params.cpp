// Model authoring helpers (tensorjit/nn.h).
#include "tensorjit/nn.h"

#include "ir/graph.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"

namespace tj {

Tensor linear(const Tensor& x, const Tensor& w) { return matmul(x, w); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return matmul(x, w) + b; }

Tensor normalize(const Tensor& x, int64_t axis, double eps) {
  Tensor norm = sqrt(sum(x * x, {axis}, true));
  return x / maximum(norm, eps);
}

namespace {

// The param of that name in t's trace, declared once.
Tensor param_of(Tracer& t, const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (ValueId v = t.graph().find(name); v >= 0) return {&t, v};
  return t.param(name, dtype, Shape(shape.begin(), shape.end()));
}

}  // namespace

ParamTree::ParamTree(Tracer& t, const SafetensorsFile& w, std::string prefix)
    : ParamTree(
          [&t, &w](const std::string& n) {
            const SafetensorsEntry* e = w.find(n);
            if (!e) missing(n);
            return param_of(t, n, e->dtype, e->shape);
          },
          [&w](const std::string& n) { return w.find(n) != nullptr; }, std::move(prefix)) {}

ParamTree::ParamTree(Tracer& t, const Bindings& w, std::string prefix)
    : ParamTree(
          [&t, &w](const std::string& n) {
            auto it = w.find(n);
            if (it == w.end()) missing(n);
            return param_of(t, n, it->second.dtype(), it->second.shape());
          },
          [&w](const std::string& n) { return w.count(n) > 0; }, std::move(prefix)) {}

void ParamTree::missing(const std::string& name) { throw Error("ParamTree: the weights have no tensor '" + name + "'"); }

ParamTree ParamTree::sub(const std::string& name) const { return ParamTree(declare_, has_, prefix_ + name + "."); }
Tensor ParamTree::operator[](const std::string& name) const { return declare_(prefix_ + name); }
bool ParamTree::has(const std::string& name) const { return has_(prefix_ + name); }

}  // namespace tj
