// Forced into every translation unit of the fuzz build (-include). Debian 12's
// clang 14 lacks __builtin_source_location, so libstdc++ 12's
// <source_location> declares nothing under it, and include/tensorjit/tensor.h
// (Tensor::item) does not compile. This supplies the same interface from the
// older builtins clang 14 has. Only the fuzz build sees it; remove it once the
// fuzzers are built with clang >= 15.
#pragma once
#include <source_location>
#if !defined(__cpp_lib_source_location)
namespace std {
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE(), unsigned column = __builtin_COLUMN()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    s.column_ = column;
    return s;
  }
  constexpr source_location() noexcept = default;
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return column_; }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0, column_ = 0;
};
}  // namespace std
#endif
