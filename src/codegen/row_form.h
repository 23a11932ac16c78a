// What the C++ and GPU row kernels share of a RowForm (ir/op.h): its
// expressions with their placeholders bound. Each renderer prints the passes
// in its own loops (a sequential loop; a work-group's strided loop and a
// reduction through work-group memory).
#pragma once

#include <string>

#include "ir/graph.h"

namespace tj::codegen {

// The C for the placeholders of one element of the row.
struct RowOperands {
  std::string x, w, b;  // operands 0-2 at the element (as double)
  std::string y;        // the output element as stored (as double)
  std::string D, eps;   // the row's length and the eps attribute (as double)
};

// The name this pass's term has in generated code ($t).
constexpr const char* kRowTerm = "tj_term";

// `expr` with $x, $w, $b, $y, $t, $D and $eps replaced.
std::string row_expr(const char* expr, const RowOperands& o);

// "double m = -INFINITY;": a pass's statistic at its reduction's identity.
std::string row_stat(const RowPass& p);
// A pass's statements for element j of the row `out` (of C type `type`):
// its term, the statistic's update (`max` names the max of two doubles in
// the target's C), the output element's store.
std::string row_pass_body(const RowPass& p, const RowOperands& o, const std::string& out, const std::string& type, const char* max);

// The op's row form; a tj::Unsupported naming the op when it has none
// (`backend` says whose kernel is missing).
const RowForm& row_form(const Node& n, const char* backend);

}  // namespace tj::codegen
