"""One aten graph (or one part of one, between ops that run eagerly)
compiled by tensorjit and called with torch tensors.

- Tensors go in as numpy views of their memory (no copy): a tensor that is
  a permutation of a contiguous one (transposed, channels-last) or
  expanded (stride 0) is passed as the contiguous base, and the graph
  re-applies the view; the pattern is part of what a compilation is for.
  Another strided tensor is copied (logged once under TJ_LOG=torch).
- Parameters and buffers of an inference graph (Dynamo's static inputs
  that the graph does not write) are frozen into the compilation, where
  the passes fold them; copied once. A frozen tensor changed afterwards
  (another object, or the same one written in place: its version) is
  frozen again, in a new compilation; after two such changes it is passed
  as an input instead.
- Symbolic sizes (SymInt placeholders, symbolic dims of tensor inputs) are
  one symbolic tensorjit compilation: the dims are marked dynamic for the
  C++ JIT, and a SymInt argument is read from the tensor dim it equals, or
  (where no input tensor has it: a part of a split graph) passed as the
  length of an empty array of shape [n, 0] (no memory), whose dim 0 is
  marked dynamic like the others.
- Outputs are torch tensors over the results (no copy); sizes come back as
  Python ints."""

from __future__ import annotations

import os
import sys
import weakref

import numpy as np
import torch

from .._jit import JitFunction
from . import aten as rows
from .lower import LoweringError, lower


def log(msg):
    if "torch" in os.environ.get("TJ_LOG", "").split(","):
        print(f"[torch] {msg}", file=sys.stderr)


_SUPPORTED = set(rows._TO_TJ)
_GRAPHS = weakref.WeakSet()  # every CompiledGraph alive (stats())


def stats():
    """Over every compiled graph alive: graphs, tensorjit compilations, calls."""
    r = {"graphs": 0, "compilations": 0, "calls": 0}
    for g in list(_GRAPHS):
        r["graphs"] += 1
        for jit, _ in g.by_layout.values():
            s = jit.stats
            r["compilations"] += s.get("compilations", 0)
            r["calls"] += s.get("calls", 0)
    return r


def _layout(t):
    """How a tensor reaches the graph: None (contiguous: as it is), or
    (squeezed, order, copy): the dims whose stride is 0 to be expanded again,
    the permutation that makes the rest contiguous, or copy=True."""
    if t.is_contiguous():
        return None
    strides, shape = t.stride(), t.shape
    expanded = tuple(d for d in range(t.dim()) if strides[d] == 0 and shape[d] != 1)
    rest = [d for d in range(t.dim()) if d not in expanded]
    order = tuple(sorted(rest, key=lambda d: (-strides[d], d)))
    base = t
    for d in expanded:
        base = base.narrow(d, 0, 1)
    if base.permute(list(order) + list(expanded)).is_contiguous():
        return (expanded, order, False)
    return ((), (), True)


def _base(t, layout):
    """The contiguous tensor passed for t under `layout`."""
    if layout is None:
        return t
    expanded, order, copy = layout
    if copy:
        return t.contiguous()
    for d in expanded:
        t = t.narrow(d, 0, 1)
    return t.permute(list(order) + list(expanded))


def _reapply(layout, shape):
    """prep(proxy): the base's proxy as the tensor the graph sees."""
    if layout is None or layout[2]:
        return None
    expanded, order, _ = layout
    perm = list(order) + list(expanded)
    inverse = [0] * len(perm)
    for k, d in enumerate(perm):
        inverse[d] = k
    from .. import _core
    from .dims import texts

    def prep(x):
        y = x.transpose(inverse)
        if expanded:
            y = _core.broadcast_to(y, texts(shape))
        return y
    return prep


def _array(t):
    """A tensor as the JIT takes it: a numpy view (bf16, which numpy lacks: the tensor, through DLPack)."""
    if t.requires_grad:
        t = t.detach()
    return t if t.dtype == torch.bfloat16 else t.numpy()


class CompiledGraph:
    """An aten graph compiled by tensorjit, called with torch values."""

    def __init__(self, gm, example_inputs, name="graph", freeze=(), weights="f32", compile=True):
        self.gm = gm
        self.compile = compile
        self.name = name
        self.weights = weights
        self.kinds = []  # per placeholder: "tensor", "size" (a SymInt), "value" (a Python number), "none"
        self.size_of = {}  # placeholder -> (tensor placeholder, axis) of a SymInt
        self.dynamic = {}  # tensor placeholder -> axes that are symbolic
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        fakes = [n.meta.get("val", e) for n, e in zip(placeholders, example_inputs)] if example_inputs is not None else \
            [n.meta.get("val") for n in placeholders]
        exprs = {}
        for i, v in enumerate(fakes):
            if isinstance(v, torch.Tensor):
                if v.dtype not in _SUPPORTED:
                    raise LoweringError(placeholders[i], f"an input of dtype {v.dtype}")
                self.kinds.append("tensor")
                for a, s in enumerate(v.shape):
                    if isinstance(s, torch.SymInt) and s.node.maybe_as_int() is None:
                        self.dynamic.setdefault(i, []).append(a)
                        exprs.setdefault(str(s.node.expr), (i, a))
            elif isinstance(v, torch.SymInt) and v.node.maybe_as_int() is None:
                self.kinds.append("size")
            elif v is None:
                self.kinds.append("none")
            else:
                self.kinds.append("value")
        for i, v in enumerate(fakes):
            if self.kinds[i] == "size":
                src = exprs.get(str(v.node.expr))
                if src:
                    self.size_of[i] = src
                else:  # a size no input tensor has: carried by an empty array [n, 0]
                    self.kinds[i] = "carried"
        self.freeze = set(i for i in freeze if self.kinds[i] == "tensor")
        self.refreezes = {}
        out = next(n for n in gm.graph.nodes if n.op == "output")
        outs = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        # Per output: ("none",), ("input", placeholder) for an input given
        # back (AOTAutograd saves parameters so: passed through, not
        # copied), ("same", k) for output k again, or what the JIT computes:
        # ("tensor",), ("bf16",) (computed as f32: numpy has no bf16),
        # ("int",), ("bool",), ("float",).
        self.out_kinds = []
        index = {n: i for i, n in enumerate(placeholders)}
        first = {}
        for k, o in enumerate(outs):
            v = o.meta.get("val") if hasattr(o, "meta") else o
            if o is None:
                kind = ("none",)
            elif o in index:
                kind = ("input", index[o])
            elif o in first:
                kind = ("same", first[o])
            else:
                first[o] = k
                kind = (("bf16",) if v.dtype == torch.bfloat16 else ("tensor",)) if isinstance(v, torch.Tensor) else ("bool",) if isinstance(v, bool) else \
                    ("int",) if isinstance(v, (int, torch.SymInt)) else ("float",) if isinstance(v, (float, torch.SymFloat)) else ("tensor",)
            self.out_kinds.append(kind)
        self.by_layout = {}  # layouts -> (JitFunction, positions it takes)
        self.frozen = {}  # placeholder -> (tensor, version, array)
        # The last call's plan, for calls that change nothing but their
        # plain tensor inputs (every call of a frozen model): (jit, the
        # arrays with the frozen ones in place, ((placeholder, tensor,
        # version) per frozen input), ((slot, placeholder, layout) per other
        # input)). efficientnet_b0 has 311 frozen parameters: the Python
        # around its JIT call took 35 us this way, 169 through
        # _frozen_array (both with CI sharing the cores).
        self.hot = None
        _GRAPHS.add(self)

    def _jit_for(self, layouts, args):
        key = layouts
        entry = self.by_layout.get(key)
        if entry is not None:
            return entry
        sources, take, dims = [], [], []
        for i, kind in enumerate(self.kinds):
            if kind == "tensor":
                shape = args[i].shape
                sources.append(("arg", len(take), _reapply(layouts[i], [int(s) for s in shape])))
                for a in self.dynamic.get(i, []):
                    # the base's axis for the graph's axis a (layouts permute)
                    lay = layouts[i]
                    base_axis = a if lay is None or lay[2] else (list(lay[1]) + list(lay[0])).index(a)
                    dims.append([len(take), base_axis, 2])
                take.append(i)
            elif kind == "size":
                sources.append(("size",) + self.size_of[i])
            elif kind == "carried":
                sources.append(("carried", len(take)))
                dims.append([len(take), 0, 2])
                take.append(i)
            elif kind == "none":
                sources.append(("const", None))
            else:
                sources.append(("arg", len(take), None))
                take.append(i)
        fn = lower(self.gm, sources)
        computed = [k for k, kind in enumerate(self.out_kinds) if kind[0] in ("tensor", "bf16", "int", "bool", "float")]

        def traced(*xs):
            outs = fn(*xs)
            return [outs[k] for k in computed]

        frozen = tuple(k for k, i in enumerate(take) if i in self.freeze)
        # Frozen tensors are read in place: _frozen_array passes another array when one changes.
        jit = JitFunction(traced, dynamic=False, name=self.name, freeze=frozen, weights=self.weights, dims=dims, compile=self.compile,
                          borrow=True)
        entry = (jit, take)
        self.by_layout[key] = entry
        log(f"{self.name}: compiling for layouts {layouts} ({len(take)} inputs, {len(frozen)} frozen, dynamic dims {dims})")
        return entry

    def _frozen_array(self, i, t):
        """The array passed for frozen input i: the same object while t is the same tensor, unchanged."""
        have = self.frozen.get(i)
        if have is not None and have[0] is t and have[1] == t._version:
            return have[2]
        if have is not None:
            n = self.refreezes[i] = self.refreezes.get(i, 0) + 1
            log(f"{self.name}: frozen input {i} changed ({'another tensor' if have[0] is not t else 'written in place'}); "
                f"{'frozen again' if n <= 2 else 'passed as an input from now on'}")
            if n > 2:
                self.freeze.discard(i)
                self.by_layout.clear()
                self.frozen.pop(i, None)
                return None
        a = _array(t.detach().contiguous()) if not t.is_contiguous() else _array(t)
        if not t.is_contiguous() and t.dtype != torch.bfloat16:
            a = np.ascontiguousarray(a)
        self.frozen[i] = (t, t._version, a)
        return a

    def __call__(self, *args):
        hot = self.hot
        if hot is not None:
            jit, fixed, frozen, loose = hot
            if all(args[i] is t and t._version == v for i, t, v in frozen):
                arrays = list(fixed)
                for slot, i, layout in loose:
                    a = args[i]
                    if not isinstance(a, torch.Tensor) or _layout(a) != layout:
                        break
                    arrays[slot] = _array(_base(a, layout))
                else:
                    return self._outputs(jit(*arrays), args)
        layouts = tuple(_layout(a) if k == "tensor" and i not in self.freeze else None
                        for i, (k, a) in enumerate(zip(self.kinds, args)))
        jit, take = self._jit_for(layouts, args)
        arrays = []
        for i in take:
            a = args[i]
            if i in self.freeze:
                f = self._frozen_array(i, a)
                if f is None:
                    return self(*args)
                arrays.append(f)
            elif isinstance(a, torch.Tensor):
                arrays.append(_array(_base(a, layouts[i])))
            elif self.kinds[i] == "carried":
                arrays.append(np.empty((int(a), 0), np.int8))
            else:
                arrays.append(a)
        self.hot = None
        if all(self.kinds[i] == "tensor" for i in take):
            frozen = tuple((i, args[i], args[i]._version) for i in take if i in self.freeze)
            loose = tuple((slot, i, layouts[i]) for slot, i in enumerate(take) if i not in self.freeze)
            self.hot = (jit, [None if i not in self.freeze else a for i, a in zip(take, arrays)], frozen, loose)
        outs = jit(*arrays)
        return self._outputs(outs, args)

    def _outputs(self, outs, args):
        r, it = [], iter(outs)
        for kind in self.out_kinds:
            k = kind[0]
            if k == "none":
                r.append(None)
            elif k == "input":
                r.append(args[kind[1]])
            elif k == "same":
                r.append(r[kind[1]])
            else:
                o = next(it)
                t = torch.from_numpy(o) if isinstance(o, np.ndarray) else torch.from_dlpack(o)
                r.append(int(t) if k == "int" else bool(t) if k == "bool" else float(t) if k == "float" else
                         t.to(torch.bfloat16) if k == "bf16" else t)
        return r
