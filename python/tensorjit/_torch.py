"""torch.compile(model, backend="tensorjit"): Dynamo hands over an FX graph;
make_fx (functionalized, with the decompositions below) turns it into aten
ops; each aten op is one row of ATEN, written with tensorjit's proxies; the
whole graph is a tensorjit.jit function of the graph's inputs (parameters
included: Dynamo lifts them), compiled per input shape (backend()), called
with numpy views of the torch tensors (no copy; the jit's fast path) and
returning torch tensors over the results (no copy).

The module's parameters are frozen into the compilation (options
{"freeze_parameters": False} passes them as inputs on every call instead):
for inference, as Inductor's freezing; a parameter changed in place
afterwards is not seen.

An aten op without a row is an error naming it, or with fallback=True
(torch.compile(..., options={"fallback": True})) the graph runs eagerly and
the reason is logged (TJ_LOG=torch)."""

from __future__ import annotations

import operator
import os
import sys

import numpy as np

from . import _core
from ._jit import JitFunction

_DTYPES = {}  # torch dtype -> tensorjit name, filled on first use


def _dtypes():
    import torch
    if not _DTYPES:
        _DTYPES.update({torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
                        torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
                        torch.bool: "bool"})
    return _DTYPES


def _dtype(t):
    if t not in _dtypes():
        raise NotImplementedError(f"tensorjit: torch dtype {t} is not supported")
    return _DTYPES[t]


def _torch_dtype(name):
    """The torch dtype of a tensorjit dtype name."""
    for t, n in _dtypes().items():
        if n == name:
            return t
    raise NotImplementedError(f"tensorjit: no torch dtype for {name}")


def _np_dtype(t):
    return {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32, "i16": np.int16,
            "i8": np.int8, "u8": np.uint8, "bool": np.bool_}[_dtype(t)]


def _log(msg):
    if "torch" in os.environ.get("TJ_LOG", "").split(","):
        print(f"[torch] {msg}", file=sys.stderr)


def _axis(d, x):
    return d + x.ndim if d < 0 else d


def _dims(dims, x):
    if dims is None or dims == []:
        return None
    return tuple(_axis(d, x) for d in (dims if isinstance(dims, (list, tuple)) else [dims]))


def _slices(x, dim, s):
    key = [slice(None)] * x.ndim
    key[_axis(dim, x)] = s
    return x[tuple(key)]


def _constant(values):
    return _core.asarray(np.asarray(values, order="C"))  # (ascontiguousarray makes 0-d arrays 1-d)


def _full(size, value, dtype=None, **_):
    import torch
    dt = _np_dtype(dtype if dtype is not None else (torch.float32 if isinstance(value, float) else torch.int64))
    return _constant(np.full(tuple(size), value, dtype=dt))


def _slice(x, dim=0, start=None, end=None, step=1):
    n = x.shape[_axis(dim, x)]
    if isinstance(n, int) and end is not None and end > n:
        end = n
    return _slices(x, dim, slice(start, end, step))


def _split(x, size, dim=0):
    n = x.shape[_axis(dim, x)]
    return [_slices(x, dim, slice(i, min(i + size, n))) for i in range(0, n, size)]


def _layer_norm(x, shape, w, b, eps):
    if len(shape) != 1:
        raise NotImplementedError("tensorjit: layer_norm over more than the last dim")
    if w is None or b is None:
        m = x.mean(axis=-1, keepdims=True)
        y = (x - m) * _core.rsqrt(((x - m) ** 2.0).mean(axis=-1, keepdims=True) + eps)
        y = y if w is None else y * w
        return (y if b is None else y + b), None, None
    return _core.layer_norm(x, w, b, eps), None, None


def _safe_softmax(x, dim, *_):
    s = _core.softmax(x, dim)
    return _core.where(s != s, 0.0, s)  # a row with no visible element: 0, not NaN


def _tril(x, diagonal=0):
    r, c = x.shape[-2], x.shape[-1]
    return _core.where(_constant(np.tril(np.ones((r, c), dtype=bool), diagonal)), x, 0.0 if x.dtype.startswith("f") else 0)


def _expand(x, size, **_):
    lead = len(size) - x.ndim
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return _core.broadcast_to(x, shape)


def _div(a, b, rounding_mode=None):
    if rounding_mode == "floor":
        return a // b
    q = a / b
    if rounding_mode == "trunc":
        return _core.where(q < 0, _core.ceil(q), _core.floor(q))
    return q


def _gelu(x, approximate="none"):
    return _core.gelu(x, approximate == "tanh")


def _arange(*args, dtype=None, **_):
    import torch
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
    dt = dtype or (torch.float32 if any(isinstance(v, float) for v in (start, end, step)) else torch.int64)
    return _constant(np.arange(start, end, step, dtype=_np_dtype(dt)))


def _clamp(x, lo=None, hi=None):
    if lo is not None:
        x = _core.maximum(x, lo)
    if hi is not None:
        x = _core.minimum(x, hi)
    return x


def _bool_only(x, y, op):
    if x.dtype != "bool" or getattr(y, "dtype", "bool") != "bool":
        raise NotImplementedError(f"tensorjit: aten.{op} of integers is not supported (of bools it is logical)")
    return x


def _index(x, indices):
    """x[i0, i1, ...] with index tensors (None: the whole axis), numpy's
    advanced indexing: one index tensor is a take along its axis; index
    tensors on the leading axes broadcast together and read x flattened
    over those axes (flat = sum of i_d * stride_d)."""
    given = [d for d, i in enumerate(indices) if i is not None]
    if any(indices[d].dtype == "bool" for d in given):
        raise NotImplementedError("tensorjit: aten.index with a boolean mask (a data-dependent shape) is not supported")
    if len(given) == 1:
        return _core.take(x, indices[given[0]], given[0])
    k = len(given)
    if given != list(range(k)) or not all(isinstance(x.shape[d], int) for d in range(k)):
        raise NotImplementedError("tensorjit: aten.index with index tensors other than on the leading static axes is not supported")
    flat, stride = None, 1
    for d in reversed(range(k)):
        i = indices[d]
        i = _core.where(i < 0, i + x.shape[d], i)
        term = i * stride if stride != 1 else i
        flat = term if flat is None else flat + term
        stride *= x.shape[d]
    rest = list(x.shape[k:])
    return _core.take(x.reshape([stride] + rest), flat, 0)


def _same(x, *_, **__):
    return x


def _table():
    import torch
    a = torch.ops.aten
    t = {
        a.add: lambda x, y, alpha=1: x + (y * alpha if alpha != 1 else y),
        a.sub: lambda x, y, alpha=1: x - (y * alpha if alpha != 1 else y),
        a.rsub: lambda x, y, alpha=1: (y * alpha if alpha != 1 else y) - x if not isinstance(y, (int, float)) else y * alpha - x,
        a.mul: lambda x, y: x * y, a.div: _div,
        a.pow: lambda x, y: x ** y, a.neg: lambda x: -x, a.abs: abs,
        a.rsqrt: _core.rsqrt, a.sqrt: _core.sqrt, a.exp: _core.exp, a.log: _core.log, a.tanh: _core.tanh,
        a.sigmoid: _core.sigmoid, a.relu: _core.relu, a.silu: _core.silu, a.gelu: _gelu, a.erf: _core.erf,
        a.sin: _core.sin, a.cos: _core.cos, a.reciprocal: _core.reciprocal,
        a.maximum: _core.maximum, a.minimum: _core.minimum, a.clamp: _clamp,
        a.eq: lambda x, y: x == y, a.ne: lambda x, y: x != y, a.lt: lambda x, y: x < y, a.le: lambda x, y: x <= y,
        a.gt: lambda x, y: x > y, a.ge: lambda x, y: x >= y,
        a.logical_not: _core.logical_not, a.bitwise_not: _core.logical_not,
        a.logical_and: _core.logical_and, a.logical_or: _core.logical_or,
        a.bitwise_and: lambda x, y: _bool_only(x, y, "bitwise_and") & y, a.bitwise_or: lambda x, y: _bool_only(x, y, "bitwise_or") | y,
        a.index: _index,
        a.where: lambda c, x, y: _core.where(c, x, y),
        a.masked_fill: lambda x, m, v: _core.where(m, v, x),
        a.mean: lambda x, dims=None, keepdim=False, dtype=None: x.mean(axis=_dims(dims, x), keepdims=keepdim),
        a.sum: lambda x, dims=None, keepdim=False, dtype=None: x.sum(axis=_dims(dims, x), keepdims=keepdim),
        a.amax: lambda x, dims=(), keepdim=False: x.max(axis=_dims(dims, x), keepdims=keepdim),
        a.amin: lambda x, dims=(), keepdim=False: x.min(axis=_dims(dims, x), keepdims=keepdim),
        a.argmax: lambda x, dim=None, keepdim=False: x.argmax(axis=dim, keepdims=keepdim),
        a.mm: lambda x, y: x @ y, a.bmm: lambda x, y: x @ y, a.matmul: lambda x, y: x @ y,
        a.addmm: lambda bias, x, y, beta=1, alpha=1: bias * beta + (x @ y) * alpha,
        a.t: lambda x: x.T, a.transpose: lambda x, d0, d1: _core.swapaxes(x, _axis(d0, x), _axis(d1, x)),
        a.permute: lambda x, dims: x.transpose([_axis(d, x) for d in dims]),
        a.view: lambda x, shape: x.reshape(shape), a._unsafe_view: lambda x, shape: x.reshape(shape),
        a.reshape: lambda x, shape: x.reshape(shape),
        a.expand: _expand, a.unsqueeze: lambda x, d: _core.expand_dims(x, [d if d >= 0 else d + x.ndim + 1]),
        a.squeeze: lambda x, dims=None: _core.squeeze(x, [_axis(d, x) for d in ([dims] if isinstance(dims, int) else dims)]),
        a.clone: _same, a.alias: _same, a.detach: _same, a.lift_fresh_copy: _same,
        a._to_copy: lambda x, dtype=None, **_: x if dtype is None else x.astype(_dtype(dtype)),
        a.cat: lambda xs, dim=0: _core.concatenate(list(xs), _axis(dim, xs[0])),
        a.split: _split, a.slice: _slice, a.select: lambda x, dim, i: _slices(x, dim, i),
        a.embedding: lambda w, idx, *_: _core.take(w, idx, 0),
        a.index_select: lambda x, dim, idx: _core.take(x, idx, _axis(dim, x)),
        a.native_layer_norm: _layer_norm, a._softmax: lambda x, dim, *_: _core.softmax(x, dim),
        a._safe_softmax: _safe_softmax, a._log_softmax: lambda x, dim, *_: _core.log_softmax(x, dim),
        a.tril: _tril,
        a.ones: lambda size, dtype=None, **_: _full(size, 1, dtype), a.zeros: lambda size, dtype=None, **_: _full(size, 0, dtype),
        a.full: lambda size, v, dtype=None, **_: _full(size, v, dtype),
        a.scalar_tensor: lambda v, dtype=None, **_: _full((), v, dtype), a.arange: _arange,
        a.new_ones: lambda x, size, dtype=None, **_: _full(size, 1, dtype or _torch_dtype(x.dtype)),
        a.new_zeros: lambda x, size, dtype=None, **_: _full(size, 0, dtype or _torch_dtype(x.dtype)),
        a.new_full: lambda x, size, v, dtype=None, **_: _full(size, v, dtype or _torch_dtype(x.dtype)),
    }
    return t


_ATEN = {}


def lower(gm):
    """The aten FX graph `gm` as a Python function of proxies (for tensorjit.jit)."""
    if not _ATEN:
        _ATEN.update(_table())
    import torch
    import torch.fx as fx
    nodes = list(gm.graph.nodes)
    rows = {}  # node -> (row, in place): an in-place op (add_) is its functional row, and rebinds its first operand
    missing = {}
    for n in nodes:
        if n.op == "call_function" and n.target is not operator.getitem:
            packet = getattr(n.target, "overloadpacket", None)
            name = getattr(packet, "__name__", "")
            functional = getattr(torch.ops.aten, name[:-1], None) if name.endswith("_") else None
            if packet in _ATEN:
                rows[n] = (_ATEN[packet], False)
            elif functional in _ATEN:
                rows[n] = (_ATEN[functional], True)
            else:
                missing.setdefault(str(n.target), n.name)
    if missing:
        ops = ", ".join(f"{op} (node {node})" for op, node in missing.items())
        raise NotImplementedError(f"tensorjit: the aten op{'s' if len(missing) > 1 else ''} {ops} {'are' if len(missing) > 1 else 'is'} not supported")

    def fn(*args):
        env = {}
        it = iter(args)
        for n in nodes:
            if n.op == "placeholder":
                env[n] = next(it)
            elif n.op == "get_attr":
                env[n] = _core.asarray(getattr(gm, n.target).detach().cpu().numpy())
            elif n.op == "call_function":
                a = fx.node.map_arg(n.args, lambda m: env[m])
                kw = fx.node.map_arg(n.kwargs, lambda m: env[m])
                kw = {k: v for k, v in kw.items() if k not in ("layout", "device", "pin_memory", "memory_format", "non_blocking")}
                if n.target is operator.getitem:
                    env[n] = a[0][a[1]]
                else:
                    row, in_place = rows[n]
                    env[n] = row(*a, **kw)
                    if in_place:
                        env[n.args[0]] = env[n]
            elif n.op == "output":
                out = fx.node.map_arg(n.args[0], lambda m: env[m])
                return list(out) if isinstance(out, (list, tuple)) else [out]
        raise RuntimeError("tensorjit: the FX graph has no output")

    return fn


_SHAPE_LIMIT = 8  # compiled shapes per graph before the rest run eagerly (as Dynamo's recompile limit)


def backend(gm, example_inputs, options=None):
    """The torch.compile backend (the torch_dynamo_backends entry point "tensorjit").

    A graph is compiled per input shape: make_fx traces it on concrete
    inputs (every size an int), so a graph Dynamo made dynamic (its sizes
    SymInts, passed as arguments) is compiled for each new shape it meets,
    from the call's own arguments, up to _SHAPE_LIMIT shapes; later shapes
    run eagerly, with a warning. A 0-d tensor input whose value the graph
    reads (Dynamo lifts a module's float attributes so, under dynamic=True)
    is a constant of the compilation, its value part of the shape key."""
    import torch

    options = dict(options or {})
    fallback = options.pop("fallback", False)
    freeze_parameters = options.pop("freeze_parameters", True) is not False
    # The module's parameters (Dynamo passes them as inputs) are frozen into
    # the compilation, where the passes fold them; they are passed as the same
    # detached tensors on every call, since the freeze guard is identity.
    params = {i: (a, a.detach()) for i, a in enumerate(example_inputs) if isinstance(a, torch.nn.Parameter)}
    if not freeze_parameters:
        params = {}
    by_shape = {}  # the arguments' shapes, ints and read values -> (tensorjit function, inputs it takes), or None (eager)
    read = []  # the 0-d inputs whose values the graph reads, once a trace has found them

    def key(args):
        shapes = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        return shapes + tuple(args[i].item() for i in read)

    def array(a):
        """A tensor as a numpy array over its memory (the jit's fast path
        takes those), or through DLPack for a dtype numpy lacks (bf16)."""
        a = a.detach().contiguous()
        return a if a.dtype == torch.bfloat16 else a.numpy()

    def compile_for(args):
        if len(by_shape) >= _SHAPE_LIMIT:
            if len(by_shape) == _SHAPE_LIMIT:
                print(f"tensorjit: a graph met {_SHAPE_LIMIT} input shapes; later ones run eagerly (TJ_LOG=torch names them)",
                      file=sys.stderr)
            _log(f"shape {key(args)}: runs eagerly (the limit of {_SHAPE_LIMIT} shapes)")
            return None
        r = _compile(gm, args, params, fallback, read)
        if r is not None:
            _log(f"graph of {len(gm.graph.nodes)} nodes compiled by tensorjit for shapes {key(args)}")
        return r

    def run(*args):
        entry = by_shape.get(key(args), run)
        if entry is run:  # not seen
            entry = compile_for(args)
            by_shape[key(args)] = entry  # keyed after the trace, which may have found read inputs
        if entry is None:
            return gm.forward(*args)
        jitted, keep = entry
        arrays = [params[i][1] if i in params and args[i] is params[i][0] else array(args[i]) if isinstance(args[i], torch.Tensor)
                  else args[i] for i in keep]
        return [torch.from_numpy(o) for o in jitted(*arrays)]

    # Concrete example inputs (a static graph): compiled now, so that an
    # unsupported op fails torch.compile's first call with its name.
    if not any(isinstance(a, torch.SymInt) for a in example_inputs):
        entry = compile_for(example_inputs)
        by_shape[key(example_inputs)] = entry  # keyed after the trace, as in run
    return run


def _compile(gm, args, params, fallback, read):
    """The tensorjit function of `gm` traced on `args` (concrete) and the
    inputs it takes, or None when an op has no row and `fallback` says to
    run it eagerly. A trace that reads a 0-d input's value is made again
    with those inputs as constants; `read` gets their positions."""
    import torch
    from torch._decomp import get_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    decomps = get_decompositions([torch.ops.aten._scaled_dot_product_flash_attention_for_cpu,
                                  torch.ops.aten.scaled_dot_product_attention, torch.ops.aten.linear,
                                  torch.ops.aten.rms_norm, torch.ops.aten.silu_backward])

    def trace():
        keep = [i for i in range(len(args)) if i not in read]

        def f(*xs):
            full = list(args)
            for i, x in zip(keep, xs):
                full[i] = x
            return gm(*full)

        with torch.no_grad():
            return make_fx(torch.func.functionalize(f, remove="mutations"), decomposition_table=decomps)(*[args[i] for i in keep]), keep

    try:
        try:
            aten_gm, keep = trace()
        except RuntimeError as e:
            scalars = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim() == 0 and i not in params]
            if "_local_scalar_dense" not in str(e) or read or not scalars:
                raise
            read.extend(scalars)
            aten_gm, keep = trace()
        fn = lower(aten_gm)
    except NotImplementedError as e:
        if not fallback:
            raise
        _log(f"graph of {len(gm.graph.nodes)} nodes runs eagerly: {e}")
        return None
    frozen = tuple(k for k, i in enumerate(keep) if i in params)
    return JitFunction(fn, dynamic=False, name="torch_graph", freeze=frozen), keep
