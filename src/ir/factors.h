// How an op's dims correspond, for sharding (Shardy's factor rules): the
// op's iteration space as factors, and for each operand dim and result dim
// the factor it is. matmul [i,k] x [k,j] -> [i,j] has factors i, k, j; k is
// a reduction factor, so operands split along k leave the result a partial
// sum. Propagation (passes/propagate_shardings.cpp) moves a split from one
// dim to every other dim of its factor; the partitioner reads the same rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/sharding.h"

namespace tj {

struct FactorRule {
  enum class Kind : uint8_t {
    pass,       // in the result too: a split carries through
    reduce,     // summed (or maxed) away: operands split along it leave the result partial
    replicate,  // must not be split: softmax's and a norm's axis, a mean's (its sums need the count), an op with no rule
  };
  struct Factor {
    Kind kind = Kind::pass;
    Reduction reduction = Reduction::sum;  // reduce factors: what completes the partial result
    Dim size;
  };
  std::vector<Factor> factors;
  std::vector<std::vector<int>> operands;  // per operand, per dim: its factor, or -1 (broadcast, or not a factor of the op)
  std::vector<int> result;                 // per result dim: its factor, or -1

  int add(Kind kind, const Dim& size, Reduction r = Reduction::sum);
  std::string str() const;  // "(i,k),(k,j)->(i,j) k:sum", for reports and tests
};

// The rule of value v's op: its row's (OpDef::factors), else its fusion
// class's (pointwise ops: numpy broadcasting, right-aligned), else one
// replicate factor per dim of every operand and the result (nothing of a
// split carries through the op: it is computed on whole values).
FactorRule factor_rule(const Graph& g, ValueId v);

// The rows' rules (ir/ops/).
FactorRule pointwise_factors(const Node& n, const std::vector<Type>& in);
FactorRule reduce_factors(const Node& n, const std::vector<Type>& in);
FactorRule matmul_factors(const Node& n, const std::vector<Type>& in);
FactorRule permute_factors(const Node& n, const std::vector<Type>& in);
FactorRule reshape_factors(const Node& n, const std::vector<Type>& in);
FactorRule unsqueeze_factors(const Node& n, const std::vector<Type>& in);
FactorRule squeeze_factors(const Node& n, const std::vector<Type>& in);
FactorRule expand_factors(const Node& n, const std::vector<Type>& in);
FactorRule last_axis_factors(const Node& n, const std::vector<Type>& in);  // rms_norm, layer_norm: the normalized axis whole
FactorRule axis_factors(const Node& n, const std::vector<Type>& in);       // softmax, slice, concat, kv_write: the `axis` attribute whole

}  // namespace tj
