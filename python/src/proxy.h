// Tensor proxies as Python sees them. A proxy holds a tj::Tensor of the
// trace under way; when the traced function returns, every proxy it made is
// emptied (a tj::Tensor must not outlive its Tracer), so a proxy kept past
// its trace is an error when used, never a dangling pointer.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <variant>
#include <vector>

#include "arrays.h"
#include "tensorjit/tensor.h"

namespace tj::py {

struct Proxy {
  std::shared_ptr<Tensor> t;
  const Tensor& get() const;
};

// The proxies made while one Python function runs as a trace (or a region
// of one), and the tracer that function traces into.
class TraceScope {
 public:
  explicit TraceScope(Tracer* tracer);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  static TraceScope* current();
  Tracer* tracer() const { return tracer_; }
  void add(const std::shared_ptr<Tensor>& t) { made_.push_back(t); }

 private:
  Tracer* tracer_;
  TraceScope* outer_;
  std::vector<std::weak_ptr<Tensor>> made_;
};

Proxy wrap(Tensor t);
std::vector<Proxy> wrap_all(const std::vector<Tensor>& ts);
std::vector<Tensor> unwrap_all(const std::vector<Proxy>& ps);

// A binary operand: a proxy, a Python number, or an array (a constant of
// the trace).
using Operand = std::variant<Proxy, double, AnyArray>;
Tensor operand(const Operand& o, const Tensor& like);

void bind_proxy(nb::module_& m);  // the Tensor class: operators, indexing, methods
void bind_ops(nb::module_& m);    // the numpy-style functions

}  // namespace tj::py
