// Meshes and shardings: how a graph's values are laid out over devices.
//
// A mesh is the devices as a grid with named axes, major first:
// `mesh {dp=2, tp=2}` is 4 devices, rank = dp_index * 2 + tp_index. A value's
// sharding says, per dimension, which mesh axes split it (major first: the
// dim's blocks go to the axes' indices in row-major order), and which axes
// hold it as partial values still to be reduced (a matmul whose contracted
// dim was split: each device holds its sum over its block). Axes that
// neither split nor are partial replicate the value. A value without a
// sharding is unannotated: propagation chooses one.
//
// Text form, JAX style, on the type: `f32[2048@tp,256]`, several axes on one
// dim `f32[2048@(dp,tp),256]`, partial axes after the dims with their
// reduction (sum when not given): `f32[8,256] partial(tp)`,
// `f32[8] partial(tp:max)`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorjit/type.h"

namespace tj {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

struct Mesh {
  std::vector<MeshAxis> axes;  // major first

  bool empty() const { return axes.empty(); }
  int64_t devices() const;                       // the product of the axes' sizes (1 without axes)
  int axis(std::string_view name) const;         // its index, or -1
  std::string str() const;                       // "{dp=2, tp=2}"
  bool operator==(const Mesh&) const = default;
};

// How partial values combine: what the all-reduce that completes them does.
enum class Reduction { sum, max, min };
const char* reduction_name(Reduction r);
std::optional<Reduction> parse_reduction(std::string_view name);

struct Sharding {
  std::vector<std::vector<std::string>> dims;               // per dim of the value, the axes splitting it, major first
  std::vector<std::pair<std::string, Reduction>> partial;  // axes over which the value is a partial result

  // Every axis of the mesh replicates it (no dims split, nothing partial).
  bool replicated() const;
  // The axes it names, dims first then partial, in order.
  std::vector<std::string> axes() const;
  bool operator==(const Sharding&) const = default;
};

// Mesh axes as a sharding names them: "tp", or "(dp,tp)" for several.
std::string axes_str(const std::vector<std::string>& axes);

// `t` with s's decorations: "f32[2048@tp,256] partial(tp:max)". Without a
// sharding (s null or s->dims empty and nothing partial) exactly t.str().
std::string sharded_type_str(const Type& t, const Sharding* s);

// The devices along a dim split by `axes` of mesh m: the product of their sizes.
int64_t split_count(const Mesh& m, const std::vector<std::string>& axes);

// Checks s against value type t and mesh m; throws tj::Error naming what is
// wrong: a rank that differs from t's, an axis the mesh lacks, an axis used
// twice, a dim that the devices along it do not divide, a symbolic dim split
// (not supported: its size is known only at run time, and a guard that it
// divides is not implemented yet).
void check_sharding(const Mesh& m, const Type& t, const Sharding& s);

}  // namespace tj
