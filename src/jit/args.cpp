// The trace's view of a call's arguments: tensors as proxies (symbolic or
// bucketed dims per the policy), plain values read as guards, weights.
#include "jit/jit_impl.h"
#include "tensorjit/error.h"
#include "tensorjit/nn.h"
#include "tensorjit/safetensors.h"

namespace tj {

using namespace jitimpl;

JitArgs::State::State(const std::string& name, const std::vector<NDArray>& ts, const std::vector<JitValue>& vs, const JitOptions& o, bool symbolic,
                     const std::set<std::pair<size_t, int>>& dynamic)
  : tracer(name), tensors(ts), values(vs), proxies(ts.size()) {
  // The policy of each dim; any symbolic dim makes the bucketed ones
  // symbolic too (a graph for every size needs no padding).
  std::vector<std::vector<DynamicPolicy>> policy(ts.size());
  bool any_symbolic = false;
  for (size_t i = 0; i < ts.size(); ++i)
    for (int a = 0; a < static_cast<int>(ts[i].shape().size()); ++a) {
      DynamicPolicy p = policy_of(o, i, a);
      if (p == DynamicPolicy::automatic) p = dynamic.count({i, a}) ? DynamicPolicy::symbolic : DynamicPolicy::static_shapes;
      if (!symbolic || ts[i].shape()[static_cast<size_t>(a)] < 2) p = DynamicPolicy::static_shapes;  // 0 and 1 are specialized
      any_symbolic |= p == DynamicPolicy::symbolic;
      policy[i].push_back(p);
    }
  std::map<int64_t, std::string> by_size;  // duck sizing: equal sizes share a symbol
  for (size_t i = 0; i < ts.size(); ++i) {
    Shape s;
    for (int a = 0; a < static_cast<int>(ts[i].shape().size()); ++a) {
      int64_t v = ts[i].shape()[static_cast<size_t>(a)];
      DynamicPolicy p = policy[i][static_cast<size_t>(a)];
      if (p == DynamicPolicy::static_shapes) {
        s.push_back(Dim(v));
        continue;
      }
      auto [it, fresh] = by_size.emplace(v, (any_symbolic ? "d" : "s") + std::to_string(by_size.size()));
      if (fresh) {
        symbol_site[it->second] = {i, a};
        if (!any_symbolic) bucket_of[it->second] = o.buckets.of(v);
      }
      s.push_back(Dim::symbol(it->second));
    }
    dims.push_back(std::move(s));
  }
}

Tensor JitArgs::tensor(size_t i) {
  if (i >= s_->tensors.size())
    throw Error("jit: the function reads tensor " + std::to_string(i) + " but the call passed " + std::to_string(s_->tensors.size()));
  auto& p = s_->proxies[i];
  if (!p) {
    p = s_->tracer.input(tensor_name(i), s_->tensors[i].dtype(), s_->dims[i]);
    s_->tensor_inputs.emplace(tensor_name(i), i);
  }
  return *p;
}

namespace {
const JitValue& value_at(const JitArgs::State& s, size_t i) {
  if (i >= s.values.size())
    throw Error("jit: the function reads plain value " + std::to_string(i) + " but the call passed " + std::to_string(s.values.size()));
  return s.values[i];
}
}  // namespace

int64_t JitArgs::integer(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* x = std::get_if<int64_t>(&v)) return *x;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw Error("jit: plain value " + std::to_string(i) + " is a double, read as an integer");
}

double JitArgs::number(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* x = std::get_if<double>(&v)) return *x;
  if (auto* x = std::get_if<int64_t>(&v)) return static_cast<double>(*x);
  return std::get<bool>(v);
}

bool JitArgs::flag(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* x = std::get_if<int64_t>(&v)) return *x != 0;
  return std::get<double>(v) != 0;
}

Tensor JitArgs::real_size(size_t i, int axis) {
  if (i >= s_->tensors.size()) throw Error("jit: real_size of tensor " + std::to_string(i) + ": no such tensor");
  int r = static_cast<int>(s_->dims[i].size());
  if (axis < -r || axis >= r) throw Error("jit: real_size: axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  std::string name = tensor_name(i) + "_size" + std::to_string(axis);
  for (const auto& [n, site] : s_->real_sizes)
    if (n == name) return {&s_->tracer, s_->tracer.graph().find(name)};
  s_->real_sizes.push_back({name, {i, axis}});
  return s_->tracer.input(name, DType::i64, {});
}

Tensor JitArgs::param(const std::string& name, const NDArray& value) {
  if (s_->params.count(name)) return {&s_->tracer, s_->tracer.graph().find(name)};
  s_->params[name] = NDArray::shared(value);  // an owned array copied once: the entry's and the program's copies share it
  Shape s(value.shape().begin(), value.shape().end());
  return s_->tracer.param(name, value.dtype(), s);
}

Tensor JitArgs::param(const std::string& name, const SafetensorsFile& weights) {
  if (s_->params.count(name)) return {&s_->tracer, s_->tracer.graph().find(name)};
  return param(name, weights.read(name));
}

Tracer& JitArgs::tracer() { return s_->tracer; }

namespace {
size_t named(const std::vector<std::string>* names, std::string_view name, const char* what) {
  if (!names) throw Error(std::string("jit: the function reads ") + what + " '" + std::string(name) + "' by name, but was called with positional arguments");
  for (size_t i = 0; i < names->size(); ++i)
    if ((*names)[i] == name) return i;
  std::string known;
  for (const auto& n : *names) known += (known.empty() ? "" : ", ") + n;
  throw Error(std::string("jit: no ") + what + " named '" + std::string(name) + "' (the call passed: " + (known.empty() ? "none" : known) + ")");
}
}  // namespace

Tensor JitArgs::tensor(std::string_view name) { return tensor(named(s_->tensor_names, name, "tensor")); }
int64_t JitArgs::integer(std::string_view name) { return integer(named(s_->value_names, name, "value")); }
double JitArgs::number(std::string_view name) { return number(named(s_->value_names, name, "value")); }
bool JitArgs::flag(std::string_view name) { return flag(named(s_->value_names, name, "value")); }

// ParamTree over a JIT function's arguments (tensorjit/nn.h): the weights
// as JitArgs::param, held by the compiled entry.
ParamTree::ParamTree(JitArgs& a, const SafetensorsFile& w, std::string prefix)
    : ParamTree(
          [&a, &w](const std::string& n) {
            if (!w.find(n)) missing(n);
            return a.param(n, w);
          },
          [&w](const std::string& n) { return w.find(n) != nullptr; }, std::move(prefix)) {}

ParamTree::ParamTree(JitArgs& a, const Bindings& w, std::string prefix)
    : ParamTree(
          [&a, &w](const std::string& n) {
            auto it = w.find(n);
            if (it == w.end()) missing(n);
            return a.param(n, it->second);
          },
          [&w](const std::string& n) { return w.count(n) > 0; }, std::move(prefix)) {}

}  // namespace tj
