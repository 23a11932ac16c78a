#include "codegen/row_form.h"

#include <cstring>

#include "tensorjit/error.h"

namespace tj::codegen {

std::string row_expr(const char* expr, const RowOperands& o) {
  const std::pair<const char*, const std::string*> names[] = {{"$eps", &o.eps}, {"$x", &o.x}, {"$w", &o.w}, {"$b", &o.b},
                                                               {"$y", &o.y},     {"$D", &o.D}};
  static const std::string t = kRowTerm;
  std::string out;
  for (const char* p = expr; *p;) {
    bool bound = false;
    if (*p == '$') {
      for (const auto& [name, value] : names) {
        const size_t len = std::strlen(name);
        if (std::strncmp(p, name, len) == 0) {  // (stops at the expression's end)
          if (value->empty()) throw Error(std::string("row form: ") + name + " has no value here (" + expr + ")");
          out += "(" + *value + ")";
          p += len;
          bound = true;
          break;
        }
      }
      if (!bound && p[1] == 't') {
        out += t;
        p += 2;
        bound = true;
      }
      if (!bound) throw Error(std::string("row form: unknown placeholder in '") + expr + "'");
      continue;
    }
    out += *p++;
  }
  return out;
}

std::string row_stat(const RowPass& p) {
  return "double " + std::string(p.stat) + " = " + (p.reduce == RowReduce::max ? "-INFINITY" : "0") + ";";
}

std::string row_pass_body(const RowPass& p, const RowOperands& o, const std::string& out, const std::string& type, const char* max) {
  std::string body;
  if (p.stat) {
    const std::string stat = p.stat;
    body += "const double " + std::string(kRowTerm) + " = " + row_expr(p.term, o) + "; ";
    body += p.reduce == RowReduce::max ? stat + " = " + max + "(" + stat + ", " + kRowTerm + "); " : stat + " += " + kRowTerm + "; ";
  }
  if (p.store) body += out + "[j] = (" + type + ")(" + row_expr(p.store, o) + "); ";
  return body;
}

const RowForm& row_form(const Node& n, const char* backend) {
  if (!n.def().row_form)
    throw Unsupported(std::string(backend) + ": no row kernel for " + n.def().name + " (its op row has no row_form; decompose it instead)");
  return *n.def().row_form;
}

}  // namespace tj::codegen
