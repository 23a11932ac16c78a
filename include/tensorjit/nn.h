// Model authoring on top of tensorjit/tensor.h: the layers PyTorch code
// reads as one call, and weights looked up by name in a tree of prefixes.
//
//   tj::SafetensorsFile weights("model.safetensors");
//   tj::ParamTree p(tracer, weights);
//   for (int l = 0; l < 6; ++l) {
//     tj::ParamTree layer = p.sub("encoder.layer." + std::to_string(l));
//     x = tj::linear(x, layer["attention.output.dense.weight"], layer["attention.output.dense.bias"]);
//   }
#pragma once

#include <functional>
#include <string>

#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj {

class JitArgs;          // tensorjit/jit.h
class SafetensorsFile;  // tensorjit/safetensors.h

// x @ w (+ b), w as [in, out] (torch.nn.Linear's weight transposed).
Tensor linear(const Tensor& x, const Tensor& w);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// x / max(||x||_2 along `axis`, eps) (torch.nn.functional.normalize).
Tensor normalize(const Tensor& x, int64_t axis = -1, double eps = 1e-12);

// A model's weights as a tree of names. p["wq"] is the param prefix + "wq",
// declared on first use with the dtype and shape the weights have (and the
// same tensor after that); p.sub("layers.0") is the subtree "layers.0.". The
// weights (a file or a map) must outlive the tracing. From JitArgs the params
// are held by the compiled entry, as JitArgs::param.
class ParamTree {
 public:
  ParamTree(Tracer& t, const SafetensorsFile& weights, std::string prefix = "");
  ParamTree(Tracer& t, const Bindings& weights, std::string prefix = "");
  ParamTree(JitArgs& a, const SafetensorsFile& weights, std::string prefix = "");
  ParamTree(JitArgs& a, const Bindings& weights, std::string prefix = "");

  ParamTree sub(const std::string& name) const;
  // Throws tj::Error naming the full name when the weights have no such tensor.
  Tensor operator[](const std::string& name) const;
  bool has(const std::string& name) const;
  const std::string& prefix() const { return prefix_; }

 private:
  using Declare = std::function<Tensor(const std::string& full_name)>;
  using Has = std::function<bool(const std::string& full_name)>;
  ParamTree(Declare d, Has h, std::string prefix) : declare_(std::move(d)), has_(std::move(h)), prefix_(std::move(prefix)) {}
  Declare declare_;
  Has has_;
  std::string prefix_;
};

}  // namespace tj
