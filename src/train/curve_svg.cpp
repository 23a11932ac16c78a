#include "train/curve_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "support/xml.h"

namespace tj {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

std::string loss_curve_svg(const std::vector<double>& loss, const std::string& title) {
  const double W = 720, H = 400, left = 60, right = 20, top = 40, bottom = 50;
  double hi = 0, lo = 0;
  bool any = false;
  for (double v : loss)
    if (std::isfinite(v)) hi = any ? std::max(hi, v) : v, lo = any ? std::min(lo, v) : v, any = true;
  if (!any || hi == lo) hi = lo + 1;
  lo = std::min(0.0, lo);
  const double n = std::max<double>(1, static_cast<double>(loss.size()) - 1);
  auto x = [&](double i) { return left + (W - left - right) * i / n; };
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - (v - lo) / (hi - lo)); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + xml_escape(title) + "</text>\n";
  // Axes, with five ticks each.
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(H - bottom) + "\" x2=\"" + num(W - right) + "\" y2=\"" + num(H - bottom) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" + num(H - bottom) + "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    double v = lo + (hi - lo) * k / 4, i = n * k / 4;
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y(v) + 4) + "\" text-anchor=\"end\">" + num(v) + "</text>\n";
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(y(v)) + "\" x2=\"" + num(W - right) + "\" y2=\"" + num(y(v)) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + num(x(i)) + "\" y=\"" + num(H - bottom + 18) + "\" text-anchor=\"middle\">" + num(std::round(i)) + "</text>\n";
  }
  s += "<text x=\"" + num((left + W - right) / 2) + "\" y=\"" + num(H - 10) + "\" text-anchor=\"middle\">step</text>\n";
  s += "<text x=\"16\" y=\"" + num((top + H - bottom) / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
       num((top + H - bottom) / 2) + ")\">loss</text>\n";
  s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < loss.size(); ++i)
    if (std::isfinite(loss[i])) s += num(x(static_cast<double>(i))) + "," + num(y(loss[i])) + " ";
  s += "\"/>\n</svg>\n";
  return s;
}

}  // namespace tj
