#include "models/branches.h"

namespace tj::models {

Graph trace_branches(int branches, int64_t rows, int64_t cols, int64_t inner) {
  Tracer t("branches");
  std::vector<Tensor> big;
  for (int i = 0; i < branches; ++i) {
    Tensor a = t.input("a" + std::to_string(i), DType::f32, {rows, inner});
    Tensor b = t.param("b" + std::to_string(i), DType::f32, {inner, cols});
    big.push_back(matmul(a, b));
  }
  Tensor total;
  for (int i = 0; i < branches; ++i) {
    Tensor s = sum(big[static_cast<size_t>(i)], {-1});
    total = i == 0 ? s : total + s;
  }
  return t.finish({total});
}

}  // namespace tj::models
