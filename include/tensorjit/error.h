// Errors thrown by tensorjit. Every user-facing failure (bad IR text, shape
// mismatch while tracing, wrong inputs at run time) is one of these, with a
// message that says what was wrong and where.
#pragma once

#include <stdexcept>
#include <string>

namespace tj {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A shape or dtype error found by inference: names the op and its operands.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// What inference throws for valid operands an op does not take (u64 where
// its unsigned meaning differs from the int64 bits the interpreter holds):
// an importer reports it as unsupported, not as a malformed model.
class UnsupportedOperand : public ShapeError {
 public:
  using ShapeError::ShapeError;
};

// Valid input that uses what tensorjit does not support (yet): an ONNX op,
// opset, element type or attribute value. The message names it.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// Malformed IR text: carries the 1-based line and column of the offending token.
class ParseError : public Error {
 public:
  ParseError(int line, int col, const std::string& msg)
      : Error(std::to_string(line) + ":" + std::to_string(col) + ": error: " + msg),
        line_(line), col_(col) {}
  int line() const { return line_; }
  int col() const { return col_; }

 private:
  int line_, col_;
};

}  // namespace tj
