// Runs a two-layer MLP, relu(x @ w1 + b1) @ w2 + b2, on weights from a
// safetensors file, with tensorjit's public API only. The file (written by
// tensorjit's test suite, tests/api/compile_test.cpp) also holds an input "x"
// and the "expected" output; the program prints the largest difference and
// exits 1 if it is not within 1e-4.
//
//   mlp FILE.safetensors
#include <cmath>
#include <cstdio>
#include <vector>

#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"
#include "tensorjit/tensor.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors\n", argv[0]);
    return 2;
  }
  try {
    tj::SafetensorsFile file(argv[1]);
    // The layer sizes come from the weights themselves.
    const tj::SafetensorsEntry* w1 = file.find("w1");
    const tj::SafetensorsEntry* w2 = file.find("w2");
    if (!w1 || !w2) throw tj::Error(std::string(argv[1]) + " has no w1/w2");
    int64_t d_in = w1->shape[0], d_hidden = w1->shape[1], d_out = w2->shape[1];

    tj::Program mlp = tj::Program::compile(
        "mlp",
        [&](tj::Tracer& t) {
          tj::Tensor x = t.input("x", tj::DType::f32, {tj::Dim::symbol("T"), d_in});
          tj::Tensor h = tj::relu(tj::matmul(x, t.param("w1", tj::DType::f32, {d_in, d_hidden})) + t.param("b1", tj::DType::f32, {d_hidden}));
          return std::vector<tj::Tensor>{tj::matmul(h, t.param("w2", tj::DType::f32, {d_hidden, d_out})) + t.param("b2", tj::DType::f32, {d_out})};
        },
        file);

    tj::Bindings inputs{{"x", file.read("x")}};
    tj::NDArray y = mlp.run(inputs).at(0);
    tj::NDArray want = file.read("expected");
    if (y.shape() != want.shape()) throw tj::Error("output is " + y.type_str() + ", expected " + want.type_str());
    double worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i) worst = std::fmax(worst, std::fabs(double(y.data<float>()[i]) - want.data<float>()[i]));
    std::printf("mlp: %s -> %s on %zu kernel(s)%s, max |difference| %.3g\n", inputs.at("x").type_str().c_str(), y.type_str().c_str(),
                mlp.kernels(), mlp.compiled() ? "" : " (interpreter: no C++ compiler)", worst);
    return worst <= 1e-4 ? 0 : 1;
  } catch (const tj::Error& e) {
    std::fprintf(stderr, "mlp: %s\n", e.what());
    return 1;
  }
}
