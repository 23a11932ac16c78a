// oneDNN's f32 forward convolution on this CPU in three activation layouts,
// side by side: NHWC (what tensorjit's channels-last kernels read), the
// layout oneDNN picks when asked for any (format_tag::any), and NCHW16c
// forced (the blocked layout of its older AVX-512 kernels). Weights in the
// layout each primitive picks. It asks whether a blocked channel layout
// would gain anything over channels last on this machine: a markdown row
// per shape, microseconds (median of 50 calls after 10), the kernel oneDNN
// chose and the source layout, and NCHW16c's time over NHWC's.
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

double median_us(dnnl::engine& eng, dnnl::stream& s, const Conv& c, tag t, std::string& what) {
  const int P = c.K / 2, OH = (c.H + 2 * P - c.K) / c.S + 1;
  const auto f32 = memory::data_type::f32;
  const memory::dims w = c.G == 1 ? memory::dims{c.M, c.C, c.K, c.K} : memory::dims{c.G, c.M / c.G, c.C / c.G, c.K, c.K};
  const memory::desc src({1, c.C, c.H, c.H}, f32, t), dst({1, c.M, OH, OH}, f32, t), wd(w, f32, tag::any);
  const dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wd, dst, {c.S, c.S}, {P, P},
                                           {P, P});
  const dnnl::convolution_forward::primitive_desc pd(cd, eng);
  what = std::string(pd.impl_info_str()) + ", " + layout(pd.src_desc());
  memory sm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), dm(pd.dst_desc(), eng);
  std::fill_n(static_cast<float*>(sm.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
  std::fill_n(static_cast<float*>(wm.get_data_handle()), pd.weights_desc().get_size() / 4, 0.01f);
  dnnl::convolution_forward conv(pd);
  std::vector<double> t_us;
  for (int i = 0; i < 60; ++i) {
    const auto a = std::chrono::steady_clock::now();
    conv.execute(s, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
    s.wait();
    t_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t_us.begin() + 10, t_us.end());
  return t_us[35];
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
    std::string a, b, d;
    const double nhwc = median_us(eng, s, c, tag::nhwc, a), any = median_us(eng, s, c, tag::any, b), blocked = median_us(eng, s, c, tag::nChw16c, d);
    std::printf("| %s | %.0f (%s) | %.0f (%s) | %.0f (%s) | %.2f |\n", c.name, nhwc, a.c_str(), any, b.c_str(), blocked, d.c_str(), blocked / nhwc);
  }
}
