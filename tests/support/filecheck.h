// A tiny FileCheck: checks text against directives, in order.
//   CHECK: pat       the next line (at or after the cursor) containing pat
//   CHECK-NEXT: pat  the line right after the previous match contains pat
//   CHECK-SAME: pat  the line of the previous match contains pat too
//   CHECK-NOT: pat   no line between the previous match and the next match contains pat
// Patterns are plain text (no regular expressions).
// Returns "" on success, else a message saying which directive failed.
#pragma once

#include <string>
#include <vector>

namespace tj::testing {

struct Directive {
  enum Kind { Check, Next, Same, Not } kind;
  std::string pattern;
};

// Directives from lines of the form `# CHECK: ...` (and -NEXT, -SAME, -NOT).
std::vector<Directive> parse_directives(const std::string& text);
std::string filecheck(const std::string& output, const std::vector<Directive>& directives);

}  // namespace tj::testing
