// A value's type: element dtype plus a (possibly symbolic) shape.
#pragma once

#include <string>

#include "tensorjit/dim.h"
#include "tensorjit/dtype.h"

namespace tj {

struct Type {
  DType dtype = DType::f32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  bool operator==(const Type&) const = default;
  std::string str() const;  // "f32[2,S,16]"
};

}  // namespace tj
