"""An aten FX graph as a Python function of tensorjit proxies: each node is
its row of aten.ROWS applied to its arguments. Size arithmetic (sym_size,
operator.mul on SymInts, ...) is done on Syms, tensorjit's symbolic dims.
Each row's result is checked against what torch computed on fake tensors
(node.meta["val"]): a dtype that differs is cast, a static shape that
differs is an error naming the node, never a silently wrong result."""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from .. import _core
from . import aten as rows
from .dims import Sym, shape as dims_of, sym, text

aten = torch.ops.aten


class LoweringError(NotImplementedError):
    """A node tensorjit could not lower: names the node and its op."""

    def __init__(self, node, why):
        self.node = node
        super().__init__(f"tensorjit: {target_name(node)} (node {node.name}): {why}")


def target_name(node):
    t = node.target
    return str(t) if isinstance(t, torch._ops.OpOverload) else getattr(t, "__name__", str(t))


# Size arithmetic (Dynamo and AOTAutograd leave these in graphs with SymInts).
_SYM_OPS = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul, operator.floordiv: operator.floordiv,
    operator.mod: operator.mod, operator.neg: operator.neg, operator.pos: lambda a: a,
    torch.sym_max: lambda a, b: a if not isinstance(a, Sym) and not isinstance(b, Sym) and a >= b else _sym_pick(a, b, max),
    torch.sym_min: lambda a, b: _sym_pick(a, b, min),
    torch.sym_not: operator.not_, math.ceil: lambda a: a if isinstance(a, (int, Sym)) else math.ceil(a),
    math.floor: lambda a: a if isinstance(a, (int, Sym)) else math.floor(a),
}


def _sym_pick(a, b, f):
    if isinstance(a, Sym) or isinstance(b, Sym):
        if a == b:
            return a
        raise rows.Unsupported("max or min of symbolic sizes that may differ")
    return f(a, b)


def _sym_size(x, d):
    return sym(x.shape[rows.axis(d, x)])


def _sym_numel(x):
    n = 1
    for d in dims_of(x):
        n = n * d
    return n


def _sym_stride(x, d):
    """The stride of a contiguous tensor (tensorjit's values are)."""
    s = 1
    for k in range(x.ndim - 1, rows.axis(d, x), -1):
        s = s * sym(x.shape[k])
    return s


_SIZE_OPS = {aten.sym_size: _sym_size, aten.sym_numel: _sym_numel, aten.sym_stride: _sym_stride,
             aten.sym_storage_offset: lambda x: 0}


def find_row(node):
    """The row for a call_function node, or None."""
    t = node.target
    if t is operator.getitem or t in _SYM_OPS:
        return t
    packet = getattr(t, "overloadpacket", None)
    if packet in _SIZE_OPS:
        return _SIZE_OPS[packet]
    if t in rows.ROWS:
        return rows.ROWS[t]
    if packet in rows.EAGER:
        return None
    if packet in rows.ROWS:
        return rows.ROWS[packet]
    # An in-place variant (add_) as its functional row.
    name = getattr(packet, "__name__", "")
    if name.endswith("_") and not name.endswith("__"):
        functional = getattr(aten, name[:-1], None)
        if functional in rows.ROWS:
            return rows.ROWS[functional]
    return None


_DROP_KW = ("layout", "device", "pin_memory", "memory_format", "non_blocking", "requires_grad")


def _check(node, value):
    """value against torch's fake result: cast a dtype that differs, refuse a shape that does."""
    want = node.meta.get("val")
    if isinstance(value, (list, tuple)) and isinstance(want, (list, tuple)):
        return type(value)(_check_one(node, v, w) for v, w in zip(value, want))
    return _check_one(node, value, want)


def _check_one(node, v, want):
    if not isinstance(v, _core.Tensor) or not isinstance(want, torch.Tensor):
        return v
    if len(want.shape) != v.ndim:
        raise LoweringError(node, f"tensorjit made {v} where torch has {tuple(want.shape)} (a rank that differs)")
    for have, w in zip(v.shape, want.shape):
        if isinstance(have, int) and isinstance(w, int) and have != w:
            raise LoweringError(node, f"tensorjit made {v} where torch has {tuple(want.shape)}")
    dt = rows.tj_dtype(want.dtype)
    return v if v.dtype == dt else v.astype(dt)


def lower(gm, sources):
    """gm (an aten graph) as fn(*jit_args) over proxies. sources[i] says
    where placeholder i comes from: ("arg", k, prep) the JIT's k-th
    argument (prep(proxy) -> the tensor as the graph sees it, or None),
    ("size", p, axis) a SymInt that is dim `axis` of placeholder p,
    ("carried", k) a SymInt that is dim 0 of the JIT's k-th argument, ("const",
    value) a value fixed at compile time."""
    nodes = list(gm.graph.nodes)
    found = {n: find_row(n) for n in nodes if n.op == "call_function"}
    missing = [n for n, r in found.items() if r is None]
    if missing:
        n = missing[0]
        why = rows.EAGER.get(getattr(n.target, "overloadpacket", None), "it has no row")
        raise LoweringError(n, f"not supported ({why})")

    placeholders = [n for n in nodes if n.op == "placeholder"]

    def fn(*args):
        env = {}
        try:
            # Tensors and values first, then the sizes read from them.
            for n, src in zip(placeholders, sources):
                if src[0] == "arg":
                    v = args[src[1]]
                    env[n] = src[2](v) if src[2] is not None else v
                elif src[0] == "const":
                    env[n] = src[1]
            for n, src in zip(placeholders, sources):
                if src[0] == "size":
                    env[n] = _sym_size(env[placeholders[src[1]]], src[2])
                elif src[0] == "carried":
                    env[n] = _sym_size(args[src[1]], 0)
            for n in nodes:
                rows.current = n
                if n.op == "placeholder":
                    continue
                if n.op == "get_attr":
                    env[n] = _constant(getattr(gm, n.target))
                elif n.op == "call_function":
                    a = fx.node.map_arg(n.args, lambda m: env[m])
                    kw = {k: v for k, v in fx.node.map_arg(n.kwargs, lambda m: env[m]).items() if k not in _DROP_KW}
                    r = found[n]
                    if r is operator.getitem:
                        env[n] = a[0][a[1]]
                        continue
                    try:
                        v = r(*a, **kw)
                    except LoweringError:
                        raise
                    except (NotImplementedError, _core.Error, TypeError, ValueError, IndexError, KeyError) as e:
                        raise LoweringError(n, str(e)) from e
                    env[n] = _check(n, v)
                elif n.op == "output":
                    outs = fx.node.map_arg(n.args[0], lambda m: env[m])
                    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                    return [_as_output(o) for o in outs]
        finally:
            rows.current = None
        raise RuntimeError("tensorjit: the FX graph has no output")

    return fn


def _constant(t):
    """A tensor the graph holds (get_attr) as a constant of the trace: its
    values, contiguous (a strided view is copied once, at compile time)."""
    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return _core.asarray(t.contiguous())
    return _core.asarray(t.contiguous().cpu().numpy())


def _as_output(o):
    """A graph output as a tensor: a size (a SymInt saved for the backward) as an i64 scalar."""
    if isinstance(o, _core.Tensor):
        return o.astype("f32") if o.dtype == "bf16" else o  # numpy has no bf16: back to bf16 in torch (exactly)
    if isinstance(o, Sym):
        return _core.dim_value(o.text, "i64")
    if isinstance(o, bool):
        return _core.full([], float(o), "bool")
    if isinstance(o, int):
        return _core.full([], float(o), "i64")
    if isinstance(o, float):
        return _core.full([], o, "f64")
    if o is None:
        return None
    raise rows.Unsupported(f"a graph output of type {type(o).__name__}")
