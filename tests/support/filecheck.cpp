#include "filecheck.h"

#include <sstream>

namespace tj::testing {

std::vector<Directive> parse_directives(const std::string& text) {
  std::vector<Directive> d;
  std::istringstream in(text);
  std::string line;
  auto strip = [](std::string s) {
    size_t b = s.find_first_not_of(' ');
    size_t e = s.find_last_not_of(' ');
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  while (std::getline(in, line)) {
    for (auto [prefix, kind] : {std::pair{"# CHECK-NEXT:", Directive::Next}, std::pair{"# CHECK-SAME:", Directive::Same},
                                std::pair{"# CHECK-NOT:", Directive::Not}, std::pair{"# CHECK:", Directive::Check}}) {
      if (line.rfind(prefix, 0) == 0) {
        d.push_back({kind, strip(line.substr(std::string(prefix).size()))});
        break;
      }
    }
  }
  return d;
}

std::string filecheck(const std::string& output, const std::vector<Directive>& directives) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  size_t cursor = 0;     // first line a CHECK may match
  size_t last = 0;       // line of the previous match + 1
  std::vector<const Directive*> pending_not;
  auto check_nots = [&](size_t from, size_t to) -> std::string {
    for (const Directive* n : pending_not)
      for (size_t i = from; i < to && i < lines.size(); ++i)
        if (lines[i].find(n->pattern) != std::string::npos)
          return "CHECK-NOT: '" + n->pattern + "' found on line " + std::to_string(i + 1) + ": " + lines[i];
    pending_not.clear();
    return "";
  };
  for (const Directive& d : directives) {
    if (d.kind == Directive::Not) {
      pending_not.push_back(&d);
      continue;
    }
    if (d.kind == Directive::Same) {
      if (last == 0 || lines[last - 1].find(d.pattern) == std::string::npos)
        return "CHECK-SAME: '" + d.pattern + "' not on line " + std::to_string(last);
      continue;
    }
    size_t found = lines.size();
    if (d.kind == Directive::Next) {
      if (last < lines.size() && lines[last].find(d.pattern) != std::string::npos) found = last;
      else return "CHECK-NEXT: '" + d.pattern + "' not on line " + std::to_string(last + 1);
    } else {
      for (size_t i = cursor; i < lines.size(); ++i)
        if (lines[i].find(d.pattern) != std::string::npos) {
          found = i;
          break;
        }
      if (found == lines.size()) return "CHECK: '" + d.pattern + "' not found";
    }
    if (auto e = check_nots(cursor, found); !e.empty()) return e;
    cursor = last = found + 1;
  }
  return check_nots(cursor, lines.size());
}

}  // namespace tj::testing
