// What a node converter (ops.cpp) works with: the tracer building the graph,
// the values by ONNX name (with their contents when known at import: the
// initializers, Constant nodes and what is computed from them only), and the
// node's attributes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>  // defines ONNX_API, includes onnx-ml.pb.h

#include "tensorjit/ndarray.h"
#include "tensorjit/nn.h"  // the composite layers the converters share with the other frontends
#include "tensorjit/tensor.h"

namespace tj::onnx_import {

struct Value {
  Tensor t;
  std::optional<NDArray> known = {};  // contents, when known at import (small constants)
  // An integer scalar or vector whose elements are dims, some symbolic: a
  // shape (or part of one) computed at import (sym_shapes.cpp). `t` holds
  // the same values at run time, for ops that read them as data.
  std::optional<std::vector<Dim>> dims = {};
};

struct Ctx {
  Tracer& tracer;
  std::map<std::string, Value> values;
  int64_t opset = 0;
  const onnx::NodeProto* node = nullptr;
  std::string base_dir;  // of external-data files

  [[noreturn]] void fail(const std::string& msg) const;
  // What the model asks is valid ONNX that tensorjit does not support (yet).
  [[noreturn]] void unsupported(const std::string& msg) const;
  // Operand i (an absent optional operand: nullopt).
  bool has_input(size_t i) const;
  const Value& input(size_t i) const;
  Tensor in(size_t i) const { return input(i).t; }
  // Operand i's contents, which must be known at import (shapes, axes).
  const NDArray& known(size_t i, const char* what) const;
  // The operands `operands` (those present) known at import (or dims
  // computed at import, some symbolic), else one MustBeKnown naming every
  // one that is not.
  void require_known(const std::vector<size_t>& operands, const char* what) const;
  std::vector<int64_t> known_ints(size_t i, const char* what) const;
  // Operand i as dims: known integers, or a shape computed at import with
  // symbolic dims.
  std::vector<Dim> known_dims(size_t i, const char* what) const;

  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t def) const;
  double attr_float(const std::string& name, double def) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def) const;
  Tensor scalar(double v, DType dt) { return tracer.scalar(v, dt); }
};

DType dtype_of_onnx(int32_t elem_type, const std::string& where);
// A TensorProto's contents (raw_data, the typed fields, or external data:
// a file under base_dir, at an offset).
NDArray tensor_value(const onnx::TensorProto& t, const std::string& where, const std::string& base_dir = "");

// The node converters: the op's results, one per node output.
using Converter = std::vector<Value> (*)(Ctx&);
const Converter* find_converter(const std::string& op_type);

// The converters by family, each registering its ops.
using ConverterTable = std::map<std::string, Converter>;
void add_math_ops(ConverterTable& t);   // ops_math.cpp: elementwise, reductions, softmax
void add_shape_ops(ConverterTable& t);  // ops_shape.cpp: shapes, views, data movement
void add_select_ops(ConverterTable& t);  // ops_select.cpp: Compress, Unique (sizes decided by data)
void add_nn_ops(ConverterTable& t);     // ops_nn.cpp: contractions, normalization, conv, pooling
void add_resize_ops(ConverterTable& t);  // ops_resize.cpp: Resize, Upsample
void add_control_ops(ConverterTable& t);  // ops_control.cpp: If, Loop
void add_attention_ops(ConverterTable& t);  // ops_attention.cpp: Attention
void add_quant_ops(ConverterTable& t);      // ops_quant.cpp: (Dynamic)QuantizeLinear, DequantizeLinear
void add_loss_ops(ConverterTable& t);       // ops_loss.cpp: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss

// The nodes of `g` in order, their results into c.values (import.cpp; If
// and Loop convert their subgraphs with it).
void convert_nodes(Ctx& c, const onnx::GraphProto& g);

// Shape arithmetic over symbolic dims (sym_shapes.cpp): the node's results
// when an operand is a symbolic shape and the op computes shapes from it
// (Shape, Gather, Concat, Unsqueeze, Add, Equal, Where, ...); nullopt
// otherwise, and the node is converted as data.
std::optional<std::vector<Value>> eval_symbolic(Ctx& c);
// A value of `dims` (a scalar when `scalar`): known if every dim is static,
// computed at run time from the shapes otherwise.
Value dims_value(Ctx& c, std::vector<Dim> dims, bool scalar);

// Helpers of the converters.
using R = std::vector<Value>;
inline Value v(Tensor t) { return {std::move(t), std::nullopt}; }
// `axis` in [-rank, rank), normalized to [0, rank).
int64_t axis_of(const Ctx& c, int64_t axis, int64_t rank);
// The static size of dim `axis` of `x`, or an Unsupported error saying why it is needed.
int64_t static_dim(const Ctx& c, const Tensor& x, int64_t axis, const char* why);
// Every dim of `x` static (else Unsupported, saying `why`).
std::vector<int64_t> static_shape(const Ctx& c, const Tensor& x, const char* why);
// A constant whose contents are known at import.
Value known_value(Ctx& c, NDArray a);
// x's elements `idx` along `axis`: a gather with constant indices.
Tensor take(Ctx& c, const Tensor& x, int64_t axis, const std::vector<int64_t>& idx);

}  // namespace tj::onnx_import
