// Text for the SVG pictures (memory plans, loss curves): XML's special
// characters escaped.
#pragma once

#include <string>
#include <string_view>

namespace tj {

inline std::string xml_escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '<') r += "&lt;";
    else if (c == '>') r += "&gt;";
    else if (c == '&') r += "&amp;";
    else if (c == '"') r += "&quot;";
    else r += c;
  }
  return r;
}

}  // namespace tj
