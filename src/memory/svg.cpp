#include "memory/svg.h"

#include <algorithm>
#include <cstdio>

#include "support/xml.h"

namespace tj {

namespace {

std::string human(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (int64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}


}  // namespace

std::string memory_plan_svg(const Graph& g, const ActivationPlan& p, const std::string& title) {
  const double W = 960, H = 540, left = 80, bottom = 40, top = 40, right = 20;
  int steps = 1;
  for (const auto& b : p.buffers) steps = std::max(steps, b.last + 1);
  double peak = static_cast<double>(std::max<int64_t>(p.plan.peak_bytes, 1));
  double xs = (W - left - right) / steps, ys = (H - top - bottom) / peak;
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"10\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  s += buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s: peak %s, lower bound %s, no reuse %s</text>\n", left,
                xml_escape(title).c_str(), human(p.plan.peak_bytes).c_str(), human(p.plan.lower_bound_bytes).c_str(),
                human(p.plan.no_reuse_bytes).c_str());
  s += buf;
  // Axes.
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\">kernel</text><text x=\"5\" y=\"%.1f\">%s</text><text x=\"5\" y=\"%.1f\">0</text>\n",
                left, H - bottom, W - right, H - bottom, left, top, left, H - bottom, (W + left) / 2, H - 10, top + 10,
                human(p.plan.peak_bytes).c_str(), H - bottom);
  s += buf;
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const PlannedBuffer& b = p.buffers[i];
    double off = static_cast<double>(p.plan.offsets[static_cast<size_t>(b.slot)]);
    double x = left + b.first * xs, w = (b.last - b.first + 1) * xs;
    double h = std::max(static_cast<double>(b.size) * ys, 0.5), y = H - bottom - off * ys - h;
    std::string label = "%" + std::to_string(b.value) + " " + g.type(b.value).str() + " " + human(b.size) + ", kernels " +
                        std::to_string(b.first) + "-" + std::to_string(b.last);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.75\" stroke=\"black\" "
                  "stroke-width=\"0.3\"><title>%s</title></rect>\n",
                  x, y, w, h, colors[static_cast<size_t>(b.slot) % 8], xml_escape(label).c_str());
    s += buf;
  }
  return s + "</svg>\n";
}

}  // namespace tj
