// The GPU emitter: the program (prelude, one launch list over the
// schedule's kernels, the outputs' copies, the index checks), launches, and
// the dispatch by kernel kind.
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

Emitter::Emitter(const Graph& g, const Schedule& s, Target t, const SymEnv& hint)
    : ValueReader(g, s, hint), r_(renderer(t)) {
  for (const Node& n : g.nodes())
    if (is_minifloat(n.type.dtype) || is_subbyte_int(n.type.dtype))
      throw Unsupported("GPU code generation does not support " + std::string(dtype_name(n.type.dtype)) + " yet");
  prog_.target = t;
}

std::string Emitter::read_narrow(DType t, const std::string& e) const {
  return (t == DType::bf16 ? "tj_bf16_value(" : "tj_f16_value(") + e + ")";
}

std::string Emitter::stored(ValueId v, const std::string& value) const {
  DType t = g_.type(v).dtype;
  if (t == DType::bf16) return "tj_bf16_bits(" + value + ")";
  if (t == DType::f16) return "tj_f16_bits(" + value + ")";
  return value;
}

std::string Emitter::element(const Sizes& space, const Idx& iv) const {
  Idx at = unflat("tj_gid", space);
  std::string c = "  if (tj_gid >= " + C(count(space)) + ") return;\n";
  for (size_t d = 0; d < iv.size(); ++d) c += "  const int64_t " + iv[d] + " = " + at[d] + ";\n";
  return c;
}

void Emitter::launch(std::vector<Launch>* to, const std::string& what, const std::string& body, const Dim& items, int group,
                     std::vector<std::string> locals, std::vector<KernelForm::Buffer> extra, std::vector<std::pair<Dim, int64_t>> tiles) {
  KernelForm f;
  f.name = (kernel_ >= 0 ? "k" + std::to_string(kernel_) : std::string("t")) + "_" + std::to_string(launches_++) + "_" + what;
  for (ValueId v : used_) f.buffers.push_back({v, T(v)});
  used_.clear();
  for (auto& b : extra) f.buffers.push_back(std::move(b));
  f.locals = std::move(locals);
  f.body = body;
  f.items = items;
  f.group = group;
  prog_.source += "// " + what + "\n" + r_->render(f, out_.symbols);
  Launch l{f.name, {}, items, std::move(tiles), group, kernel_};
  for (const auto& b : f.buffers) l.buffers.push_back(b.value);
  to->push_back(std::move(l));
}

// A launch of its own in the middle of another's body: the buffers that
// body has read so far stay its own.
void Emitter::copy_into(ValueId x) {
  const std::set<ValueId> outer = std::move(used_);
  used_.clear();
  make_temp(x);
  auto sx = shape(x);
  Idx iv = loop_vars(sx.size(), "m");
  temp_.erase(x);  // read through the view while copying
  std::string value = load(x, iv);
  temp_.insert(x);
  launch(&prog_.launches, "copy", element(sx, iv) + "  " + ptr(x) + "[" + flat(iv, sx) + "] = " + stored(x, value) + ";\n",
         count(sx));
  used_ = outer;
}

Program Emitter::run() {
  for (size_t k = 0; k < s_.kernels.size(); ++k) {
    const Kernel& K = s_.kernels[k];
    kernel_ = static_cast<int>(k);
    launches_ = 0;
    temp_.clear();
    plan_temporaries(K, kernel_);
    local_.clear();
    local_row_.clear();
    switch (K.kind) {
      case KernelKind::pointwise: pointwise(K, 0); break;
      case KernelKind::rowwise: rowwise(K); break;
      case KernelKind::reduction: reduction(K); break;
      case KernelKind::matmul: matmul(K); break;
      case KernelKind::attention: attention(K); break;
      case KernelKind::conv: conv(K); break;
      case KernelKind::pool: pool(K); break;
    }
    temp_.clear();
  }
  // Each output copied into a buffer of its own, whatever it reads through.
  kernel_ = -1;
  const size_t n = g_.size();
  for (size_t i = 0; i < g_.outputs().size(); ++i) {
    ValueId o = g_.outputs()[i];
    auto so = shape(o);
    Idx iv = loop_vars(so.size(), "o");
    local_.clear();
    const std::string dst = "p" + std::to_string(n + 1 + i);
    std::string body = element(so, iv) + "  " + dst + "[" + flat(iv, so) + "] = " + stored(o, load(o, iv)) + ";\n";
    launch(&prog_.outputs, "output" + std::to_string(i), body, count(so), kGroup, {},
           {{static_cast<ValueId>(n + 1 + i), T(o)}});
  }
  // Free gathers' indices, each checked once per call before any kernel (as
  // the C++ backend's tj_check_indices).
  for (size_t v = 0; v < n; ++v) {
    const Node& nd = g_.nodes()[v];
    if (nd.op != Op::gather || s_.kernel_of[v] >= 0 || count(shape(static_cast<ValueId>(v))) == Dim(0)) continue;
    ValueId ind = nd.inputs[1];
    auto si = shape(ind);
    Idx iv = loop_vars(si.size(), "q");
    Dim len = shape(nd.inputs[0])[static_cast<size_t>(nd.attr_int("axis"))];
    launch(&prog_.checks, "check", element(si, iv) + "  (void)tj_index((int64_t)(" + load(ind, iv) + "), " + C(len) + ");\n",
           count(si));
  }
  prog_.source = r_->prelude() + prog_.source;
  prog_.layout = std::move(out_);
  return std::move(prog_);
}

Program emit(const Graph& g, const Schedule& s, Target target, const SymEnv& hint) { return Emitter(g, s, target, hint).run(); }

}  // namespace tj::gpu
