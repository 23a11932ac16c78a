// oneDNN's f32 forward convolution on this CPU in three activation layouts,
// side by side: NHWC (what tensorjit's channels-last kernels read), the
// layout oneDNN picks when asked for any (format_tag::any), and NCHW16c
// forced (the blocked layout of its older AVX-512 kernels). Weights in the
// layout each primitive picks. It asks whether a blocked channel layout
// would gain anything over channels last on this machine: a markdown row
// per shape, microseconds, the kernel oneDNN
// chose and the source layout, and NCHW16c's time over NHWC's. The three
// run in turns, 10 calls each, 10 rounds after one of warm-up: medians of
// 100 calls each.
// Build and run: bench/run-onednn-layouts.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct Conv {
  const char* name;
  int C, M, H, K, S, G;  // channels in and out, square input, kernel, stride, groups
};

std::string layout(const memory::desc& d) {
  const auto& b = d.data.format_desc.blocking;
  if (b.inner_nblks) return "nChw" + std::to_string(b.inner_blks[0]) + "c";
  return b.strides[1] == 1 ? "nhwc" : "nchw";
}

// One conv in one layout, ready to run.
struct Ready {
  std::string what;  // the kernel oneDNN chose, and the source layout
  memory src, weights, dst;
  dnnl::convolution_forward conv;
  std::vector<double> us;
};

Ready prepare(dnnl::engine& eng, const Conv& c, tag t) {
  const int P = c.K / 2, OH = (c.H + 2 * P - c.K) / c.S + 1;
  const auto f32 = memory::data_type::f32;
  const memory::dims w = c.G == 1 ? memory::dims{c.M, c.C, c.K, c.K} : memory::dims{c.G, c.M / c.G, c.C / c.G, c.K, c.K};
  const memory::desc src({1, c.C, c.H, c.H}, f32, t), dst({1, c.M, OH, OH}, f32, t), wd(w, f32, tag::any);
  const dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wd, dst, {c.S, c.S}, {P, P},
                                           {P, P});
  const dnnl::convolution_forward::primitive_desc pd(cd, eng);
  Ready r{std::string(pd.impl_info_str()) + ", " + layout(pd.src_desc()), memory(pd.src_desc(), eng), memory(pd.weights_desc(), eng),
          memory(pd.dst_desc(), eng), dnnl::convolution_forward(pd), {}};
  std::fill_n(static_cast<float*>(r.src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
  std::fill_n(static_cast<float*>(r.weights.get_data_handle()), pd.weights_desc().get_size() / 4, 0.01f);
  return r;
}

// Rounds of `calls` calls per layout in turn, so that the machine's load
// falls on all alike; each call's time kept (the first round is warm-up).
void time_in_turns(dnnl::stream& s, std::vector<Ready>& forms, int rounds, int calls) {
  for (int round = 0; round < rounds; ++round)
    for (Ready& f : forms)
      for (int i = 0; i < calls; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f.conv.execute(s, {{DNNL_ARG_SRC, f.src}, {DNNL_ARG_WEIGHTS, f.weights}, {DNNL_ARG_DST, f.dst}});
        s.wait();
        if (round > 0) f.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
      }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const Conv convs[] = {{"resnet18 56x56 64->64 3x3", 64, 64, 56, 3, 1, 1},       {"resnet18 28x28 128->128 3x3", 128, 128, 28, 3, 1, 1},
                        {"resnet18 14x14 256->256 3x3", 256, 256, 14, 3, 1, 1},   {"resnet18 7x7 512->512 3x3", 512, 512, 7, 3, 1, 1},
                        {"resnet50 56x56 64->256 1x1", 64, 256, 56, 1, 1, 1},     {"mobilenet_v2 56x56x144 depthwise", 144, 144, 56, 3, 1, 144},
                        {"mobilenet_v2 112x112x96 depthwise s2", 96, 96, 112, 3, 2, 96}};
  std::printf("| conv | NHWC us | any: us | NCHW16c us | NCHW16c / NHWC |\n|---|---|---|---|---|\n");
  for (const Conv& c : convs) {
    std::vector<Ready> forms;
    for (tag t : {tag::nhwc, tag::any, tag::nChw16c}) forms.push_back(prepare(eng, c, t));
    time_in_turns(s, forms, 11, 10);
    const double nhwc = median(forms[0].us), any = median(forms[1].us), blocked = median(forms[2].us);
    std::printf("| %s | %.0f (%s) | %.0f (%s) | %.0f (%s) | %.2f |\n", c.name, nhwc, forms[0].what.c_str(), any, forms[1].what.c_str(), blocked,
                forms[2].what.c_str(), blocked / nhwc);
  }
}
