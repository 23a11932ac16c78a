"""The aten ops as tensorjit: one row per op (an OpOverloadPacket, or an
OpOverload where overloads differ), written over tensorjit's proxies and
the composite builders of tensorjit/nn.h (_core.conv, _core.max_pool, ...:
the same C++ the ONNX importer calls). Core ATen is the target
(torch._decomp.core_aten_decompositions() leaves about 190 ops), plus the
few non-core ops that decomposition keeps and tensorjit does better whole
(silu, hardswish, reflection and replication pads, roll).

A row takes the node's arguments: proxies for tensors, Python numbers,
Syms for symbolic sizes, lists, None, torch dtypes. It may read the node's
output as torch computed it on fake tensors (out(): dtype and shape) to
apply torch's type promotion. What a row cannot lower raises Unsupported
naming the op; the lowering adds the node."""

from __future__ import annotations

import math
import operator

import numpy as np
import torch

from .. import _core
from .dims import Sym, shape as dims_of, sym, text, texts

aten = torch.ops.aten

# ---- dtypes ------------------------------------------------------------------

_TO_TJ = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
          torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}
_FROM_TJ = {v: k for k, v in _TO_TJ.items()}


class Unsupported(NotImplementedError):
    """An op (or an argument of it) tensorjit does not lower."""


def tj_dtype(t):
    if t not in _TO_TJ:
        raise Unsupported(f"the dtype {t} (tensorjit has {', '.join(str(k).replace('torch.', '') for k in _TO_TJ)})")
    return _TO_TJ[t]


def torch_dtype(name):
    return _FROM_TJ[name]


def is_tensor(x):
    return isinstance(x, _core.Tensor)


# The node being lowered (set by lower.py): its fake output.
current = None


def out():
    """The node's output as torch computed it (a FakeTensor, or a tuple of them)."""
    return current.meta.get("val") if current is not None else None


def out_dtype(i=None):
    v = out()
    if i is not None:
        v = v[i]
    if not isinstance(v, torch.Tensor):
        raise Unsupported("an op whose output torch did not describe")
    return tj_dtype(v.dtype)


def _dummy(x):
    """x as torch's type promotion sees it: a tensor of its dtype (0-d
    tensors rank below others, as torch's do), or the Python number."""
    if is_tensor(x):
        return torch.empty((0,) if x.ndim else (), dtype=torch_dtype(x.dtype))
    return x


def result_dtype(*xs):
    """torch.result_type over the operands, as a tensorjit dtype."""
    ts = [_dummy(x) for x in xs if x is not None]
    if len(ts) == 1:
        t = ts[0]
        return tj_dtype(t.dtype) if isinstance(t, torch.Tensor) else tj_dtype(torch.tensor(t).dtype)
    r = ts[0] if isinstance(ts[0], torch.Tensor) else torch.tensor(ts[0])
    dt = torch.result_type(ts[0], ts[1])
    for t in ts[2:]:
        dt = torch.result_type(torch.empty((), dtype=dt) if not r.ndim else torch.empty((0,), dtype=dt), t)
    return tj_dtype(dt)


def to(x, dtype):
    """A proxy cast to `dtype` (a tensorjit name); numbers stay numbers."""
    if is_tensor(x):
        return x if x.dtype == dtype else x.astype(dtype)
    if isinstance(x, bool) and dtype != "bool":
        return int(x)
    return x


def scalar(v, dtype):
    return _core.full([], float(v), dtype)


def axis(d, x):
    n = x.ndim if is_tensor(x) else int(x)
    if n == 0 and d in (0, -1):
        return 0
    return d + n if d < 0 else d


def axes(ds, x):
    if ds is None or (isinstance(ds, (list, tuple)) and len(ds) == 0):
        return list(range(x.ndim))
    return sorted({axis(d, x) for d in (ds if isinstance(ds, (list, tuple)) else [ds])})


def is_float(dtype):
    return dtype in ("f32", "f64", "f16", "bf16")


# ---- the table -----------------------------------------------------------------

ROWS = {}


def row(*ops):
    def add(f):
        for op in ops:
            ROWS[op] = f
        return f
    return add


# ---- pointwise -----------------------------------------------------------------

def _float_unary(f):
    """A float function: integer and bool inputs are computed in the output's float dtype."""
    def r(x, *_, **__):
        return f(to(x, out_dtype()))
    return r


for _op, _f in [(aten.exp, _core.exp), (aten.log, _core.log), (aten.tanh, _core.tanh), (aten.sqrt, _core.sqrt), (aten.rsqrt, _core.rsqrt),
                (aten.sin, _core.sin), (aten.cos, _core.cos), (aten.tan, _core.tan), (aten.asin, _core.asin), (aten.acos, _core.acos),
                (aten.atan, _core.atan), (aten.sinh, _core.sinh), (aten.cosh, _core.cosh), (aten.asinh, _core.asinh),
                (aten.acosh, _core.acosh), (aten.atanh, _core.atanh), (aten.sigmoid, _core.sigmoid), (aten.erf, _core.erf),
                (aten.log1p, _core.log1p), (aten.expm1, _core.expm1), (aten.reciprocal, _core.reciprocal), (aten.silu, _core.silu),
                (aten.hardswish, _core.hardswish)]:
    ROWS[_op] = _float_unary(_f)

ROWS[aten.log2] = _float_unary(lambda x: _core.log(x) * (1 / math.log(2)))
ROWS[aten.log10] = _float_unary(lambda x: _core.log(x) * (1 / math.log(10)))
ROWS[aten.exp2] = _float_unary(lambda x: _core.exp(x * math.log(2)))
ROWS[aten.hardsigmoid] = _float_unary(lambda x: _core.clip(x / 6.0 + 0.5, 0.0, 1.0))
ROWS[aten.mish] = _float_unary(lambda x: x * _core.tanh(_core.softplus(x)))



def _i0e(x):
    """The exponentially scaled modified Bessel function of order 0,
    I0(x) exp(-|x|), in f64: its power series sum_k (x^2/4)^k / (k!)^2 up to
    |x| = 15 (45 terms: the last is below 1e-30 of the sum), and above it the
    asymptotic series (1 + 1/(8x) + 9/(2 (8x)^2) + ...) / sqrt(2 pi x) (12
    terms: below 1e-9 at |x| = 15, smaller further out). Within 6e-8 of
    the f64 result over [-90, 90] (torch's f32 kernel: 2.7e-7), and i0 stays
    finite up to |x| = 91, where torch's overflows from 88.7."""
    a = abs(x.astype("f64"))
    q = a * a * 0.25
    term = s = _core.full([], 1.0, "f64")
    for k in range(1, 46):
        term = term * q * (1.0 / (k * k))
        s = s + term
    small = s * _core.exp(-a)
    big = _core.maximum(a, 15.0)
    t = acc = _core.full([], 1.0, "f64")
    for k in range(1, 13):
        t = t * ((2 * k - 1) ** 2 / (8.0 * k)) / big
        acc = acc + t
    large = acc * _core.rsqrt(big * (2 * math.pi))
    return _core.where(a <= 15.0, small, large)


ROWS[aten.special_i0e] = _float_unary(lambda x: _i0e(x).astype(x.dtype))
ROWS[aten.i0] = _float_unary(lambda x: (_i0e(x) * _core.exp(abs(x.astype("f64")))).astype(x.dtype))

def _rounding(f):
    """floor, ceil, round, trunc: integers are their own."""
    def r(x, decimals=0):
        if not is_float(x.dtype):
            return x
        if decimals:
            s = 10.0 ** decimals
            return f(x * s) / s
        return f(x)
    return r


ROWS[aten.floor] = _rounding(_core.floor)
ROWS[aten.ceil] = _rounding(_core.ceil)
ROWS[aten.round] = _rounding(_core.round)
ROWS[aten.trunc] = _rounding(_core.trunc)
ROWS[aten.fix] = ROWS[aten.trunc]


@row(aten.neg)
def _neg(x):
    return -x


@row(aten.abs)
def _abs(x):
    return x if x.dtype == "bool" else abs(x)


@row(aten.sign, aten.sgn)
def _sign(x):
    return x if x.dtype == "bool" else _core.sign(x)


@row(aten.relu)
def _relu(x):
    return _core.relu(x)


@row(aten.gelu)
def _gelu(x, approximate="none"):
    return _core.gelu(x, approximate == "tanh")


@row(aten.leaky_relu)
def _leaky_relu(x, negative_slope=0.01):
    return _core.leaky_relu(x, float(negative_slope))


@row(aten.elu)
def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    xs = x * float(input_scale) if input_scale != 1 else x
    neg = _core.expm1(xs) * float(alpha)
    r = _core.where(x > 0.0, x, neg)
    return r * float(scale) if scale != 1 else r


@row(aten.hardtanh)
def _hardtanh(x, lo=-1.0, hi=1.0):
    return _core.clip(x, float(lo), float(hi))


@row(aten.softplus)
def _softplus(x, beta=1.0, threshold=20.0):
    bx = x * float(beta) if beta != 1 else x
    soft = _core.softplus(bx) / float(beta) if beta != 1 else _core.softplus(bx)
    return _core.where(bx > float(threshold), x, soft)


@row(aten.isnan)
def _isnan(x):
    return x != x if is_float(x.dtype) else _core.full(texts(dims_of(x)), 0, "bool")


@row(aten.isinf)
def _isinf(x):
    return abs(x) == math.inf if is_float(x.dtype) else _core.full(texts(dims_of(x)), 0, "bool")


@row(aten.isfinite)
def _isfinite(x):
    return abs(x) < math.inf if is_float(x.dtype) else _core.full(texts(dims_of(x)), 1, "bool")


@row(aten.isneginf)
def _isneginf(x):
    return x == -math.inf if is_float(x.dtype) else _core.full(texts(dims_of(x)), 0, "bool")


@row(aten.isposinf)
def _isposinf(x):
    return x == math.inf if is_float(x.dtype) else _core.full(texts(dims_of(x)), 0, "bool")


def _scaled(b, alpha):
    return b if alpha is None or alpha == 1 else b * alpha


def _binary(name, f, bool_f=None):
    """An arithmetic op computed in the output's dtype (torch's promotion)."""
    def r(a, b, alpha=None):
        dt = out_dtype()
        a, b = to(a, dt), to(b, dt)
        if alpha is not None and alpha != 1:
            b = b * (to(alpha, dt) if is_tensor(alpha) else alpha)
        if dt == "bool":
            if bool_f is None:
                raise Unsupported(f"aten.{name} of bool tensors")
            return bool_f(a, b)
        if not is_tensor(a) and not is_tensor(b):
            return scalar(f(a, b), dt)
        return f(a, b)
    return r


ROWS[aten.add] = _binary("add", operator.add, lambda a, b: _logical(a, b, _core.logical_or))
ROWS[aten.sub] = _binary("sub", operator.sub)
ROWS[aten.mul] = _binary("mul", operator.mul, lambda a, b: _logical(a, b, _core.logical_and))
ROWS[aten.maximum] = _binary("maximum", lambda a, b: _core.maximum(a, b), lambda a, b: _logical(a, b, _core.logical_or))
ROWS[aten.minimum] = _binary("minimum", lambda a, b: _core.minimum(a, b), lambda a, b: _logical(a, b, _core.logical_and))
ROWS[aten.remainder] = _binary("remainder", lambda a, b: _core.mod(a, b))
ROWS[aten.fmod] = _binary("fmod", lambda a, b: _core.fmod(a, b))
ROWS[aten.atan2] = _binary("atan2", lambda a, b: _core.arctan2(a, b))


def _hypot(a, b):
    """C's hypot: scaled by the larger magnitude (no overflow); infinite if either is."""
    a, b = (a if is_tensor(a) else scalar(a, b.dtype)), (b if is_tensor(b) else scalar(b, a.dtype))
    m = _core.maximum(abs(a), abs(b))
    s = _core.where(m == 0, scalar(1, m.dtype), m)
    h = m * _core.sqrt((a / s) * (a / s) + (b / s) * (b / s))
    return _core.where((abs(a) == math.inf) | (abs(b) == math.inf), scalar(math.inf, m.dtype), h)


ROWS[aten.hypot] = _binary("hypot", _hypot)
ROWS[aten.copysign] = _binary("copysign", lambda a, b: _core.where(_signbit(b), -abs(a), abs(a)))
ROWS[aten.fmax] = _binary("fmax", lambda a, b: _core.where(a != a, b, _core.where(b != b, a, _core.maximum(a, b))))
ROWS[aten.fmin] = _binary("fmin", lambda a, b: _core.where(a != a, b, _core.where(b != b, a, _core.minimum(a, b))))
ROWS[aten.ldexp] = _binary("ldexp", lambda a, b: a * _core.exp(b * math.log(2)) if is_tensor(b) else a * (2.0 ** b))


def _signbit(b):
    """b < 0, -0 included (1 / -0 is -inf)."""
    if not is_tensor(b):
        return scalar(math.copysign(1, b) < 0, "bool")
    return (b < 0) | ((b == 0) & (_core.reciprocal(b) < 0))


@row(aten.rsub)
def _rsub(a, b, alpha=1):
    dt = out_dtype()
    return to(b, dt) - _scaled(to(a, dt), alpha)


def _logical(a, b, f):
    a = a if is_tensor(a) else scalar(bool(a), "bool")
    return f(a, b if is_tensor(b) else scalar(bool(b), "bool"))


@row(aten.div)
def _div(a, b, rounding_mode=None):
    dt = out_dtype()
    if rounding_mode is None:  # true division: in the (float) output dtype
        a, b = to(a, dt), to(b, dt)
        return a / b if is_tensor(a) or is_tensor(b) else scalar(a / b, dt)
    a, b = to(a, dt), to(b, dt)
    if is_float(dt):
        q = a / b
        return _core.floor(q) if rounding_mode == "floor" else _core.trunc(q)
    if rounding_mode == "trunc":
        return a / b  # integer division truncates
    return a // b  # floor


@row(aten.floor_divide)
def _floor_divide(a, b):
    return _div(a, b, "floor")


@row(aten.pow)
def _pow(a, b):
    dt = out_dtype()
    if is_float(dt):
        a, b = to(a, dt), to(b, dt)
        if not is_tensor(a):
            a = scalar(a, dt)
        # A number b: tj::pow(Tensor, double) multiplies out the exponents ATen's kernel does (2, 3, roots).
        return a ** b
    # Integers: exact in f64 up to 2^53, then back.
    af, bf = to(a, "f64"), to(b, "f64")
    if not is_tensor(af):
        af = scalar(af, "f64")
    return _core.round(af ** bf).astype(dt)


@row(aten.clamp)
def _clamp(x, lo=None, hi=None):
    dt = out_dtype()
    x = to(x, dt)
    if lo is not None:
        x = _core.maximum(x, to(lo, dt)) if is_tensor(lo) or dt != "bool" else x
    if hi is not None:
        x = _core.minimum(x, to(hi, dt))
    return x


ROWS[aten.clamp_min] = lambda x, lo: _clamp(x, lo, None)
ROWS[aten.clamp_max] = lambda x, hi: _clamp(x, None, hi)


def _compare(f):
    def r(a, b):
        dt = result_dtype(a, b)
        a, b = to(a, dt), to(b, dt)
        if not is_tensor(a):
            a = scalar(a, dt)
        return f(a, b)
    return r


ROWS[aten.eq] = _compare(lambda a, b: a == b)
ROWS[aten.ne] = _compare(lambda a, b: a != b)
ROWS[aten.lt] = _compare(lambda a, b: a < b)
ROWS[aten.le] = _compare(lambda a, b: a <= b)
ROWS[aten.gt] = _compare(lambda a, b: a > b)
ROWS[aten.ge] = _compare(lambda a, b: a >= b)


def _as_bool(x):
    return x if x.dtype == "bool" else x != 0


@row(aten.logical_not)
def _logical_not(x):
    return _core.logical_not(_as_bool(x))


ROWS[aten.logical_and] = lambda a, b: _core.logical_and(_as_bool(a), _as_bool(b))
ROWS[aten.logical_or] = lambda a, b: _core.logical_or(_as_bool(a), _as_bool(b))
ROWS[aten.logical_xor] = lambda a, b: _as_bool(a) != _as_bool(b)


def _bitwise(name, int_f, bool_f):
    def r(a, b):
        dt = out_dtype()
        a, b = to(a, dt), to(b, dt)
        if not is_tensor(a):
            a = scalar(a, dt)
        if not is_tensor(b):
            b = scalar(b, dt)
        return bool_f(a, b) if dt == "bool" else int_f(a, b)
    return r


ROWS[aten.bitwise_and] = _bitwise("bitwise_and", _core.bitwise_and, _core.logical_and)
ROWS[aten.bitwise_or] = _bitwise("bitwise_or", _core.bitwise_or, _core.logical_or)
ROWS[aten.bitwise_xor] = _bitwise("bitwise_xor", _core.bitwise_xor, lambda a, b: a != b)


@row(aten.bitwise_not)
def _bitwise_not(x):
    return _core.logical_not(x) if x.dtype == "bool" else _core.bitwise_not(x)


@row(aten.where)
def _where(c, a=None, b=None):
    if a is None:
        raise Unsupported("aten.where with one operand (the indices of nonzero elements: a data-dependent shape)")
    dt = out_dtype()
    a, b = to(a, dt), to(b, dt)
    if not is_tensor(a) and not is_tensor(b):
        a = scalar(a, dt)
    return _core.where(_as_bool(c), a, b)


@row(aten.masked_fill)
def _masked_fill(x, mask, value):
    v = to(value, x.dtype)
    if is_tensor(v) and v.ndim:
        v = v.reshape([])
    return _core.where(_as_bool(mask), v, x) if is_tensor(v) else _core.where(_as_bool(mask), scalar(v, x.dtype), x)


@row(aten.lerp)
def _lerp(a, b, w):
    dt = out_dtype()
    a, b, w = to(a, dt), to(b, dt), to(w, dt)
    return a + (b - a) * w


# ---- casts and copies -------------------------------------------------------------

@row(aten._to_copy, aten.to)
def _to_copy(x, dtype=None, **_):
    return x if dtype is None else to(x, tj_dtype(dtype))


@row(aten.clone, aten.alias, aten.lift_fresh_copy, aten.detach, aten.contiguous, aten._assert_tensor_metadata)
def _same(x, *_, **__):
    return x


@row(aten.copy)
def _copy(dst, src, non_blocking=False):
    s = to(src, dst.dtype)
    return _core.broadcast_to(s, texts(dims_of(dst))) if is_tensor(s) else _core.full(texts(dims_of(dst)), float(s), dst.dtype)


# ---- creation ----------------------------------------------------------------------

def _size(size):
    return texts(size)


def _fill(size, value, dtype):
    if isinstance(value, Sym):
        v = _core.dim_value(value.text, dtype)
        return _core.broadcast_to(v, _size(size))
    if isinstance(value, complex):
        raise Unsupported("complex values")
    return _core.full(_size(size), float(value), dtype)


def _creation_dtype(dtype, value=None, like=None):
    if dtype is not None:
        return tj_dtype(dtype)
    try:
        return out_dtype()
    except Unsupported:
        if like is not None:
            return like.dtype
        return "f32" if isinstance(value, float) else "bool" if isinstance(value, bool) else "i64"


@row(aten.full)
def _full(size, value, dtype=None, **_):
    return _fill(size, value, _creation_dtype(dtype, value))


@row(aten.zeros)
def _zeros(size, dtype=None, **_):
    return _fill(size, 0, _creation_dtype(dtype, 0.0))


@row(aten.ones)
def _ones(size, dtype=None, **_):
    return _fill(size, 1, _creation_dtype(dtype, 1.0))


@row(aten.empty, aten.empty_strided, aten.empty_permuted)
def _empty(size, *_, dtype=None, **__):
    return _fill(size, 0, _creation_dtype(dtype, 0.0))  # unspecified values: zeros


@row(aten.full_like)
def _full_like(x, value, dtype=None, **_):
    return _fill(dims_of(x), value, _creation_dtype(dtype, value, x))


@row(aten.zeros_like, aten.empty_like)
def _zeros_like(x, dtype=None, **_):
    return _fill(dims_of(x), 0, _creation_dtype(dtype, 0, x))


@row(aten.ones_like)
def _ones_like(x, dtype=None, **_):
    return _fill(dims_of(x), 1, _creation_dtype(dtype, 1, x))


@row(aten.new_full)
def _new_full(x, size, value, dtype=None, **_):
    return _fill(size, value, _creation_dtype(dtype, value, x))


@row(aten.new_zeros, aten.new_empty, aten.new_empty_strided)
def _new_zeros(x, size, *_, dtype=None, **__):
    return _fill(size, 0, _creation_dtype(dtype, 0, x))


@row(aten.new_ones)
def _new_ones(x, size, dtype=None, **_):
    return _fill(size, 1, _creation_dtype(dtype, 1, x))


@row(aten.fill)
def _fill_like(x, value):
    if is_tensor(value):
        return _core.broadcast_to(to(value, x.dtype).reshape([]), texts(dims_of(x)))
    return _fill(dims_of(x), value, x.dtype)


@row(aten.scalar_tensor)
def _scalar_tensor(value, dtype=None, **_):
    return _fill([], value, _creation_dtype(dtype, value))


@row(aten.arange)
def _arange(*args, dtype=None, **_):
    nums = [a for a in args if not isinstance(a, (torch.dtype,))]
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (list(nums) + [1])[:3]
    dt = _creation_dtype(dtype, next((v for v in (start, end, step) if isinstance(v, float)), 0))
    if any(isinstance(v, Sym) for v in (start, end, step)):
        if start == 0 and step == 1 and isinstance(end, Sym):
            return _core.arange(end.text, dt) if dt == "i64" else _core.arange(end.text, "i64").astype(dt)
        n = (end - start) // step if step > 0 else None
        if n is None:
            raise Unsupported("aten.arange with a symbolic bound and a negative step")
        return _core.arange(text(n), "i64") * step + (start if isinstance(start, int) else _core.dim_value(start.text))
    n = max(0, math.ceil((end - start) / step))
    if is_float(dt):  # start + i * step in double, rounded once (torch's)
        vals = start + np.arange(n, dtype=np.float64) * step
    else:
        vals = np.arange(start, start + n * step, step, dtype=np.int64)[:n]
    return to(_core.asarray(np.ascontiguousarray(vals)), dt)


# ---- reductions ------------------------------------------------------------------

def _reduce(f):
    def r(x, dims=None, keepdim=False, dtype=None, **_):
        dt = out_dtype()
        x = to(x, dt)
        if x.ndim == 0:
            return x
        return f(x, axes(dims, x), keepdim)
    return r


ROWS[aten.sum] = _reduce(lambda x, a, k: x.sum(axis=a, keepdims=k))
ROWS[aten.mean] = _reduce(lambda x, a, k: x.mean(axis=a, keepdims=k))


@row(aten.prod)
def _prod(x, dim=None, keepdim=False, dtype=None):
    dt = out_dtype()
    x = to(x, dt)
    if x.ndim == 0:
        return x
    return x.prod(axis=axes(None if isinstance(dim, torch.dtype) else dim, x), keepdims=keepdim)


def _extreme(largest):
    def r(x, dims=(), keepdim=False):
        if x.ndim == 0:
            return x
        a = axes(dims, x)
        if x.dtype == "bool":
            y = x.astype("u8")
            return (y.max(axis=a, keepdims=keepdim) if largest else y.min(axis=a, keepdims=keepdim)).astype("bool")
        return x.max(axis=a, keepdims=keepdim) if largest else x.min(axis=a, keepdims=keepdim)
    return r


ROWS[aten.amax] = _extreme(True)
ROWS[aten.amin] = _extreme(False)


def _arg(largest):
    def r(x, dim=None, keepdim=False):
        if x.dtype == "bool":
            x = x.astype("u8")
        key = x if largest else (-x if is_float(x.dtype) else -1 - x.astype("i64"))
        if dim is None:
            flat = key.reshape([-1])
            i = flat.argmax(axis=0)
            return i.reshape([1] * x.ndim) if keepdim else i
        if x.ndim == 0:
            return _core.full([], 0, "i64")
        return key.argmax(axis=axis(dim, x), keepdims=keepdim)
    return r


ROWS[aten.argmax] = _arg(True)
ROWS[aten.argmin] = _arg(False)


def _max_min_dim(largest):
    def r(x, dim=None, keepdim=False):
        if dim is None:  # max.default: the whole tensor
            return _extreme(largest)(x)
        if x.ndim == 0:
            return x, _core.full([], 0, "i64")
        d = axis(dim, x)
        return _extreme(largest)(x, [d], keepdim), _arg(largest)(x, d, keepdim)
    return r


ROWS[aten.max] = _max_min_dim(True)
ROWS[aten.min] = _max_min_dim(False)


def _any_all(is_any):
    def r(x, dims=None, keepdim=False):
        b = _as_bool(x)
        if b.ndim == 0:
            return b
        y = b.astype("u8")
        a = axes(dims, b)
        m = y.max(axis=a, keepdims=keepdim) if is_any else y.min(axis=a, keepdims=keepdim)
        return m != 0
    return r


ROWS[aten.any] = _any_all(True)
ROWS[aten.all] = _any_all(False)


def _count(x, a):
    """The number of elements over axes a, as a float (a scalar tensor when symbolic)."""
    n = 1
    for d in a:
        n = n * sym(x.shape[d])
    return n


@row(aten.var)
def _var(x, dims=None, unbiased=None, keepdim=False, correction=None, dt=None):
    if isinstance(unbiased, bool) or unbiased is None:
        corr = 1 if correction is None and unbiased is not False else (0 if unbiased is False else correction)
    else:  # var.dim passed dims positionally, var.correction: (x, dims, correction=..., keepdim=...)
        corr = unbiased
    if correction is not None:
        corr = correction
    dt = dt or out_dtype()
    x = to(x, dt)
    a = axes(dims, x) if x.ndim else []
    if not a:
        d = x - x
        n = 1
        s = d * d
    else:
        m = x.mean(axis=a, keepdims=True)
        d = x - m
        s = (d * d).sum(axis=a, keepdims=keepdim)
        n = _count(x, a)
    if isinstance(n, Sym):
        return s / (_core.dim_value(n.text, dt) - float(corr))
    return s / float(max(n - corr, 0)) if n - corr != 0 else s / 0.0


@row(aten.var_mean)
def _var_mean(x, dims=None, unbiased=None, keepdim=False, correction=None):
    v = _var(x, dims, unbiased, keepdim, correction, dt=out_dtype(0))
    dt = out_dtype(1)
    xx = to(x, dt)
    m = xx if xx.ndim == 0 else xx.mean(axis=axes(dims, xx), keepdims=keepdim)
    return v, m


@row(aten.std)
def _std(*args, **kwargs):
    return _core.sqrt(_var(*args, **kwargs))


# ---- products -------------------------------------------------------------------------

@row(aten.mm, aten.bmm, aten.matmul)
def _mm(a, b):
    dt = out_dtype()
    return to(a, dt) @ to(b, dt)


@row(aten.addmm, aten.baddbmm, aten.addbmm)
def _addmm(bias, a, b, beta=1, alpha=1):
    p = a @ b
    if current is not None and current.target == aten.addbmm.default:  # the batch's products summed
        p = p.sum(axis=[0])
    if alpha != 1:
        p = p * alpha
    if beta == 0:
        return p
    return p + (bias * beta if beta != 1 else bias)


@row(aten.dot, aten.vdot)
def _dot(a, b):
    return (a * b).sum(axis=0)


@row(aten.mv)
def _mv(a, b):
    return (a @ b.reshape([-1, 1])).reshape([-1])


# ---- views ----------------------------------------------------------------------------

@row(aten.view, aten._unsafe_view, aten.reshape, aten.view_copy)
def _view(x, size):
    return x.reshape(texts(size))


@row(aten.permute)
def _permute(x, dims):
    return x.transpose([axis(d, x) for d in dims])


@row(aten.t)
def _t(x):
    return x if x.ndim < 2 else _core.swapaxes(x, 0, 1)


@row(aten.transpose)
def _transpose(x, d0, d1):
    if x.ndim < 2:
        return x
    return _core.swapaxes(x, axis(d0, x), axis(d1, x))


@row(aten.expand)
def _expand(x, size, implicit=False):
    lead = len(size) - x.ndim
    have = dims_of(x)
    full = [have[i - lead] if (i >= lead and not isinstance(s, Sym) and s == -1) else s for i, s in enumerate(size)]
    return _core.broadcast_to(x, texts(full))


@row(aten.unsqueeze)
def _unsqueeze(x, d):
    return _core.expand_dims(x, [d if d >= 0 else d + x.ndim + 1])


@row(aten.squeeze)
def _squeeze(x, dims=None):
    if x.ndim == 0:
        return x
    ds = range(x.ndim) if dims is None else ([dims] if isinstance(dims, int) else dims)
    drop = sorted({axis(d, x) for d in ds if x.shape[axis(d, x)] == 1})
    return _core.squeeze(x, drop) if drop else x


def _clamp_index(v, n):
    """A slice bound as Python reads one: negative from the end, clamped to [0, n]."""
    if v is None:
        return None
    if isinstance(v, Sym) or isinstance(n, Sym):
        if isinstance(v, int) and v < 0:
            return n + v
        if isinstance(v, int) and isinstance(n, Sym) and v > 2 ** 40:  # "to the end"
            return n
        return v
    if v < 0:
        v += n
    return min(max(v, 0), n)


@row(aten.slice)
def _slice(x, dim=0, start=None, end=None, step=1):
    d = axis(dim, x)
    n = sym(x.shape[d])
    s = _clamp_index(start, n)
    e = _clamp_index(end, n)
    s = 0 if s is None else s
    e = n if e is None else e
    if isinstance(s, int) and isinstance(e, int) and e < s:
        e = s
    if s == 0 and e == n and step == 1:
        return x
    return _core.slice_axis(x, d, text(s), text(e), int(step))


@row(aten.narrow)
def _narrow(x, dim, start, length):
    return _slice(x, dim, start, start + length)


@row(aten.select)
def _select(x, dim, index):
    d = axis(dim, x)
    n = sym(x.shape[d])
    i = index + n if isinstance(index, int) and index < 0 else index
    return _core.squeeze(_core.slice_axis(x, d, text(i), text(i + 1), 1), [d])


@row(aten.unbind)
def _unbind(x, dim=0):
    d = axis(dim, x)
    n = x.shape[d]
    if not isinstance(n, int):
        raise Unsupported("aten.unbind over a symbolic dim")
    return [_select(x, d, i) for i in range(n)]


@row(aten.split_with_sizes, aten.split_with_sizes_copy)
def _split_with_sizes(x, sizes, dim=0):
    d = axis(dim, x)
    parts, at = [], 0
    for s in sizes:
        parts.append(_core.slice_axis(x, d, text(at), text(at + s), 1))
        at = at + s
    return parts


@row(aten.split)
def _split(x, size, dim=0):
    d = axis(dim, x)
    if isinstance(size, (list, tuple)):
        return _split_with_sizes(x, size, d)
    n = x.shape[d]
    if not isinstance(n, int):
        raise Unsupported("aten.split of a symbolic dim into pieces of a fixed size")
    return [_core.slice_axis(x, d, i, min(i + size, n), 1) for i in range(0, max(n, 1), size)] if n else [x]


@row(aten.diagonal)
def _diagonal(x, offset=0, dim1=0, dim2=1):
    a, b = axis(dim1, x), axis(dim2, x)
    n, m = x.shape[a], x.shape[b]
    if not isinstance(n, int) or not isinstance(m, int):
        raise Unsupported("aten.diagonal over symbolic dims")
    rest = [d for d in range(x.ndim) if d not in (a, b)]
    y = x.transpose(rest + [a, b])
    k = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    flat = y.reshape(texts([sym(y.shape[d]) for d in range(len(rest))]) + [n * m])
    idx = [(i - min(offset, 0)) * m + i + max(offset, 0) for i in range(k)]
    return _core.take(flat, _core.asarray(np.asarray(idx, dtype=np.int64)), len(rest))


@row(aten.as_strided, aten.as_strided_copy)
def _as_strided(x, size, stride, storage_offset=0):
    """Of x's elements as they lie in a contiguous buffer: a gather."""
    if not all(isinstance(v, int) for v in list(size) + list(stride)) or not all(isinstance(d, int) for d in x.shape) or not isinstance(storage_offset, int):
        raise Unsupported("aten.as_strided with symbolic sizes")
    offset = storage_offset or 0
    idx = np.full(tuple(size), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    total = int(np.prod(x.shape)) if x.ndim else 1
    if idx.size and (idx.min() < 0 or idx.max() >= total):
        raise Unsupported("aten.as_strided reaching outside the tensor's elements")
    flat = x.reshape([total])
    return _core.take(flat, _core.asarray(np.ascontiguousarray(idx.reshape(-1))), 0).reshape(list(size))


# ---- data movement ----------------------------------------------------------------------

@row(aten.cat, aten.concat)
def _cat(xs, dim=0):
    dt = out_dtype()
    keep = [x for x in xs if not (x.ndim == 1 and x.shape[0] == 0)] or list(xs)[:1]
    keep = [to(x, dt) for x in keep]
    if len(keep) == 1:
        return keep[0]
    return _core.concatenate(keep, axis(dim, keep[0]))


@row(aten.stack)
def _stack(xs, dim=0):
    dt = out_dtype()
    return _core.stack([to(x, dt) for x in xs], dim if dim >= 0 else dim + xs[0].ndim + 1)


@row(aten.gather)
def _gather(x, dim, index, sparse_grad=False):
    if x.ndim == 0:  # index 0 (or -1) of a scalar, in the index's shape
        return _core.broadcast_to(x, texts(dims_of(index)))
    if any(s == 0 for s in index.shape):  # nothing read: any index shape
        return _core.full(texts(dims_of(index)), 0, x.dtype)
    return _core.take_along(x, index, axis(dim, x))


@row(aten.index_select)
def _index_select(x, dim, index):
    if x.ndim == 0:
        return x
    idx = index.reshape([-1]) if index.ndim == 0 else index
    return _core.take(x, idx, axis(dim, x))


@row(aten.embedding)
def _embedding(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return _core.take(w, idx, 0)


@row(aten.embedding_renorm)
def _embedding_renorm(w, idx, max_norm, norm_type):
    """embedding(max_norm=...)'s functional form of embedding_renorm_: the
    rows the indices name whose norm_type-norm exceeds max_norm are scaled
    by max_norm / (norm + 1e-7), as ATen's kernel does; other rows as they are."""
    if w.ndim != 2:
        raise Unsupported("aten.embedding_renorm of a weight that is not 2-D")
    flat = idx_of(idx).reshape([-1])
    rows = _core.arange(text(w.shape[0]), "i64")
    named = (flat.reshape([1, -1]) == rows.reshape([-1, 1])).astype("i64").max(axis=[1], keepdims=True) > 0
    p = float(norm_type)
    a = abs(w)
    if p == 1:
        norm = a.sum(axis=[1], keepdims=True)
    elif p == 2:
        norm = _core.sqrt((w * w).sum(axis=[1], keepdims=True))
    elif p == math.inf:
        norm = a.max(axis=[1], keepdims=True)
    else:
        norm = (a ** p).sum(axis=[1], keepdims=True) ** (1.0 / p)
    scale = float(max_norm) / (norm + 1e-7)
    return _core.where(named & (norm > float(max_norm)), w * scale, w)


def _flat_index(x, given):
    """The index tensors on axes `given` (of x) as one flat index over those
    axes (broadcast together; negative counted from the end)."""
    flat, stride = None, 1
    for d in reversed(given):
        i = idx_of(given[d])
        n = x.shape[d]
        if isinstance(n, str):
            raise Unsupported("aten.index with several index tensors over symbolic dims")
        i = _core.where(i < 0, i + n, i)
        term = i * stride if stride != 1 else i
        flat = term if flat is None else flat + term
        stride *= n
    return flat, stride


def _numel_is_one(t):
    return all(isinstance(n, int) and n == 1 for n in t.shape)


def _write_at(x, d, index, rows, wrap):
    """x with `rows` (size 1 along d) written at the one position `index`
    holds: kv_write, one slice, where a scatter would pass over all of x (a
    static cache's decode step: transformers' StaticCache.update). wrap: a
    negative position counts from the end (index_put); else, as any
    position outside [0, n), it is an error (index_copy)."""
    pos = idx_of(index).reshape([])
    if wrap:
        n = x.shape[d]
        pos = _core.where(pos < 0, pos + (n if isinstance(n, int) else _core.dim_value(n)), pos)
    return _core.kv_write(x, rows, pos, d)


def idx_of(i):
    return i.astype("i64") if i.dtype not in ("i64", "i32") else i


def _outer_product(given, order):
    """Whether the index tensors on axes `order`, broadcast together, are an
    outer product: the k-th varies along the k-th broadcast dim only."""
    k = len(order)
    for pos, d in enumerate(order):
        shape = list(given[d].shape)
        if len(shape) > k:
            return False
        shape = [1] * (k - len(shape)) + shape
        if any(not (isinstance(n, int) and n == 1) for j, n in enumerate(shape) if j != pos):
            return False
    return True


@row(aten.index, aten._unsafe_index)
def _index(x, indices):
    """x[i0, i1, ...] with index tensors (None: the whole axis), numpy's
    advanced indexing: the indexed axes, moved first and flattened, read by
    one flat index; the result's indexed dims go where the first index is
    when the index tensors are adjacent, else first."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    given = {d: i for d, i in enumerate(indices) if i is not None}
    if any(i.dtype == "bool" for i in given.values()):
        raise Unsupported("aten.index with a boolean mask (a data-dependent shape)")
    order = sorted(given)
    adjacent = order == list(range(order[0], order[-1] + 1))
    rest = [d for d in range(x.ndim) if d not in given]
    if len(order) == 1:
        d = order[0]
        i = idx_of(given[d])
        return _core.take(x, i, d) if adjacent else _core.take(x, i, d)
    if adjacent and _outer_product(given, order):
        # x[.., i[:, None], j] (torch's decompositions of upsample and
        # reflection pads): a take per axis, rather than one flat index over
        # all their pairs; the last axis first, so that the outer axes'
        # takes read whole rows (and sink_gathers computes a bilinear
        # upsample's row blends before the rows are taken).
        r = x
        for d in reversed(order):
            r = _core.take(r, idx_of(given[d]).reshape([-1]), d)
        return r
    moved = x.transpose(order + rest)
    flat, total = _flat_index(x, given)
    lead = [sym(moved.shape[k]) for k in range(len(order), moved.ndim)]
    r = _core.take(moved.reshape([total] + texts(lead)), flat, 0)  # [B.., rest..]
    if adjacent and order[0] > 0:
        nb = r.ndim - len(rest)
        perm = list(range(nb, nb + order[0])) + list(range(nb)) + list(range(nb + order[0], r.ndim))
        r = r.transpose(perm)
    return r


@row(aten.index_put)
def _index_put(x, indices, values, accumulate=False):
    """x with values written (or added) where the index tensors say: the
    indexed axes moved first and flattened, a scatter along them. A
    boolean mask with a scalar value is a where()."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    given = {d: i for d, i in enumerate(indices) if i is not None}
    v = to(values, x.dtype)
    if len(given) == 1 and next(iter(given.values())).dtype == "bool":
        (d, m), = given.items()
        if v.ndim == 0 or all(s == 1 for s in v.shape):
            mask = m.reshape(list(m.shape) + [1] * (x.ndim - d - m.ndim)) if m.ndim + d < x.ndim else m
            if d:
                raise Unsupported("aten.index_put with a boolean mask after a full axis")
            v0 = v.reshape([])
            return _core.where(mask, x + v0 if accumulate else v0, x)
        raise Unsupported("aten.index_put with a boolean mask and values that are not one scalar (a data-dependent shape)")
    if any(i.dtype == "bool" for i in given.values()):
        raise Unsupported("aten.index_put with a boolean mask among index tensors")
    if not accumulate and len(given) == 1:
        (d, i), = given.items()
        if _numel_is_one(i) and i.ndim <= 1:  # one position (StaticCache.update's index_copy_ decomposes to this)
            row = [sym(n) for n in x.shape]
            row[d] = 1
            rows = _core.broadcast_to(v, texts(row)) if is_tensor(v) else _core.full(texts(row), float(v), x.dtype)
            return _write_at(x, d, i, rows, wrap=True)
    order = sorted(given)
    rest = [d for d in range(x.ndim) if d not in given]
    moved = x.transpose(order + rest) if order + rest != list(range(x.ndim)) else x
    if len(order) == 1:
        flat, total = idx_of(given[order[0]]), x.shape[order[0]]
        flat = _core.where(flat < 0, flat + (total if isinstance(total, int) else _core.dim_value(total)), flat)
    else:
        flat, total = _flat_index(x, given)
    lead = [sym(moved.shape[k]) for k in range(len(order), moved.ndim)]
    base = moved.reshape([text(sym(total))] + texts(lead))
    # Values as [B.., rest..] (B the index tensors' broadcast shape), each row
    # one write. They broadcast to x[indices]'s shape, which has the B dims
    # where the first index is when the index tensors are adjacent, else first.
    bshape = dims_of(flat)
    adjacent = order == list(range(order[0], order[-1] + 1))
    nb = len(bshape)
    if adjacent and order[0] > 0:
        before = [sym(x.shape[d]) for d in range(order[0])]
        after = [sym(x.shape[d]) for d in range(order[-1] + 1, x.ndim)]
        v = _core.broadcast_to(v, texts(before + bshape + after)) if is_tensor(v) else _core.full(texts(before + bshape + after), float(v), x.dtype)
        nbefore = len(before)
        v = v.transpose(list(range(nbefore, nbefore + nb)) + list(range(nbefore)) + list(range(nbefore + nb, v.ndim)))
    elif not is_tensor(v):
        v = _core.full(texts(bshape + lead), float(v), x.dtype)
    vals = _core.broadcast_to(v, texts(bshape + lead)).reshape([-1] + texts(lead))
    rows = flat.reshape([-1])
    idx_full = _core.broadcast_to(rows.reshape([-1] + [1] * len(lead)), texts(dims_of(vals)))
    r = _core.scatter(base, idx_full, vals, 0, bool(accumulate))
    r = r.reshape(texts([sym(moved.shape[k]) for k in range(moved.ndim)]))
    if moved is x:
        return r
    inv = [0] * x.ndim
    for k, d in enumerate(order + rest):
        inv[d] = k
    return r.transpose(inv)


@row(aten.scatter)
def _scatter(x, dim, index, src=None, value=None, reduce=None):
    if reduce not in (None, "add", "multiply"):
        raise Unsupported(f"aten.scatter with reduce='{reduce}'")
    if not is_tensor(src):
        src = _core.full(texts(dims_of(index)), float(src if src is not None else value), x.dtype)
    if x.ndim and any(s == 0 for s in index.shape):
        return x
    if reduce == "multiply":
        return _scatter_dense(x, axis(dim, x), index, to(src, x.dtype), "prod", True)
    return _core.scatter(x, index, to(src, x.dtype), axis(dim, x), reduce == "add")


_DENSE_SCATTER_LIMIT = 1 << 22  # updates x positions compared, for the reductions scatter_add cannot do


def _scatter_dense(x, d, index, src, reduce, include_self):
    """scatter_reduce's prod, amax and amin: every update compared with every
    position of x (the flat position of update u against p), the matches
    reduced; positions no update reaches keep x. Bounded: U * P elements."""
    if not all(isinstance(s, int) for s in list(x.shape) + list(index.shape)):
        raise Unsupported(f"aten.scatter_reduce '{reduce}' over symbolic sizes")
    P = int(np.prod(x.shape)) if x.ndim else 1
    U = int(np.prod(index.shape)) if index.ndim else 1
    if U * P > _DENSE_SCATTER_LIMIT:
        raise Unsupported(f"aten.scatter_reduce '{reduce}' of {U} updates into {P} elements (at most {_DENSE_SCATTER_LIMIT} pairs: "
                          "each update is compared with every position)")
    shape = list(index.shape)
    n = x.shape[d]
    i = idx_of(index)
    i = _core.where(i < 0, i + n, i)
    flat, stride = None, 1
    for k in range(x.ndim - 1, -1, -1):
        if k == d:
            coord = i
        else:
            s = [1] * x.ndim
            s[k] = shape[k]
            coord = _core.arange(shape[k], "i64").reshape(s)
        term = coord * stride if stride != 1 else coord
        flat = term if flat is None else flat + term
        stride *= x.shape[k]
    at = _core.broadcast_to(flat, shape).reshape([U, 1])
    match = at == _core.arange(P, "i64").reshape([1, P])  # [U, P]
    for k in range(src.ndim):  # updates beyond the index's shape are never read
        if src.shape[k] != shape[k]:
            src = _core.slice_axis(src, k, 0, shape[k], 1)
    vals = src.reshape([U, 1])
    ident = {"prod": 1.0, "amax": -math.inf, "amin": math.inf}[reduce]
    if not is_float(x.dtype):
        info = np.iinfo({"i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8}.get(x.dtype, np.int64))
        ident = 1 if reduce == "prod" else (info.min if reduce == "amax" else info.max)
    picked = _core.where(match, vals, scalar(ident, x.dtype))
    red = picked.prod(axis=0) if reduce == "prod" else picked.max(axis=0) if reduce == "amax" else picked.min(axis=0)
    hit = match.astype("u8").max(axis=0) != 0
    flat_x = x.reshape([P])
    if include_self:
        red = red * flat_x if reduce == "prod" else _core.maximum(red, flat_x) if reduce == "amax" else _core.minimum(red, flat_x)
    return _core.where(hit, red, flat_x).reshape(texts(dims_of(x)))


@row(aten.scatter_add)
def _scatter_add(x, dim, index, src):
    return _core.scatter(x, index, to(src, x.dtype), axis(dim, x), True)


@row(aten.scatter_reduce)
def _scatter_reduce(x, dim, index, src, reduce, include_self=True):
    """sum and mean (with or without the elements already there)."""
    if reduce not in ("sum", "mean", "prod", "amax", "amin"):
        raise Unsupported(f"aten.scatter_reduce with reduce='{reduce}'")
    d = axis(dim, x)
    if x.ndim and any(s == 0 for s in index.shape):
        return x
    src = to(src, x.dtype)
    if reduce in ("prod", "amax", "amin"):
        return _scatter_dense(x, d, index, src, reduce, include_self)
    ones = _core.full(texts(dims_of(index)), 1, x.dtype)
    hits = _core.scatter(_core.full(texts(dims_of(x)), 0, x.dtype), index, ones, d, True)
    base = x if include_self else _core.where(hits > 0, scalar(0, x.dtype), x)
    total = _core.scatter(base, index, src, d, True)
    if reduce == "sum":
        return total
    count = hits + 1 if include_self else _core.maximum(hits, scalar(1, x.dtype))
    r = total / count
    return r if is_float(x.dtype) else _core.floor(r.astype("f64")).astype(x.dtype)


@row(aten.index_add)
def _index_add(x, dim, index, src, alpha=1):
    d = axis(dim, x)
    shape = [1] * x.ndim
    shape[d] = -1
    full = _core.broadcast_to(index.reshape(shape), texts(dims_of(src)))
    return _core.scatter(x, full, to(src * alpha if alpha != 1 else src, x.dtype), d, True)


@row(aten.index_copy)
def _index_copy(x, dim, index, src):
    """x with src's slices written at index along dim (one index: _write_at)."""
    d = axis(dim, x)
    if is_tensor(src) and _numel_is_one(index) and src.ndim == x.ndim and src.shape[d] == 1:
        return _write_at(x, d, index, to(src, x.dtype), wrap=False)
    shape = [1] * x.ndim
    shape[d] = -1
    full = _core.broadcast_to(index.reshape(shape), texts(dims_of(src)))
    return _core.scatter(x, full, to(src, x.dtype), d, False)


@row(aten.select_scatter)
def _select_scatter(x, src, dim, index):
    d = axis(dim, x)
    n = sym(x.shape[d])
    i = index + n if isinstance(index, int) and index < 0 else index
    return _slice_scatter(x, _core.expand_dims(src, [d]), d, i, i + 1, 1)


@row(aten.slice_scatter)
def _slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    """x with src where x[start:end:step] is along dim: every position
    p reads src[(p - start) / step] where it is in the slice."""
    d = axis(dim, x)
    n = sym(x.shape[d])
    s = _clamp_index(start, n)
    s = 0 if s is None else s
    src = to(src, x.dtype)
    if step == 1 and all(isinstance(v, int) for v in (s, n)) and isinstance(src.shape[d], int):
        e = s + src.shape[d]
        parts = []
        if s > 0:
            parts.append(_core.slice_axis(x, d, 0, s, 1))
        parts.append(src)
        if e < n:
            parts.append(_core.slice_axis(x, d, e, n, 1))
        return parts[0] if len(parts) == 1 else _core.concatenate(parts, d)
    m = sym(src.shape[d])
    p = _core.arange(text(n), "i64")
    sv = s if isinstance(s, int) else _core.dim_value(s.text)
    rel = p - sv
    inside = (rel >= 0) & (_core.mod(rel, step) == 0) & (rel < (m * step if isinstance(m, int) else _core.dim_value(m.text) * step))
    at = _core.clip(rel // step, 0, (m - 1) if isinstance(m, int) else 2 ** 40)
    shape = [1] * x.ndim
    shape[d] = text(n)
    got = _core.take(src, at, d)
    return _core.where(inside.reshape(shape), got, x)


@row(aten.repeat)
def _repeat(x, repeats):
    lead = len(repeats) - x.ndim
    if lead:
        x = x.reshape([1] * lead + texts(dims_of(x)))
    shape = dims_of(x)
    wide, merged = [], []
    for r, d in zip(repeats, shape):
        wide += [text(sym(r)), text(d)]
        merged.append(text(sym(r) * d if isinstance(d, Sym) else d * r))
    y = _core.expand_dims(x, [2 * i for i in range(x.ndim)])
    return _core.broadcast_to(y, wide).reshape(merged)


@row(aten.flip)
def _flip(x, dims):
    return _core.flip(x, [axis(d, x) for d in dims])


@row(aten.roll)
def _roll(x, shifts, dims=()):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    return _core.roll(x, shifts, [axis(d, x) for d in dims])


def _pad_lists(x, pad):
    """torch's pad list [b_last, e_last, b_prev, e_prev, ..] per axis from 0."""
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        begin[d], end[d] = int(pad[2 * i]), int(pad[2 * i + 1])
    return begin, end


@row(aten.constant_pad_nd)
def _constant_pad(x, pad, value=0):
    b, e = _pad_lists(x, pad)
    return _core.pad(x, b, e, "constant", scalar(value, x.dtype))


@row(aten.pad)
def _pad(x, pad, mode="constant", value=None):
    b, e = _pad_lists(x, pad)
    if mode == "constant":
        return _core.pad(x, b, e, "constant", scalar(value or 0, x.dtype))
    return _core.pad(x, b, e, mode)


for _op in (aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d):
    ROWS[_op] = lambda x, pad: _core.pad(x, *_pad_lists(x, pad), "reflect")
for _op in (aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d):
    ROWS[_op] = lambda x, pad: _core.pad(x, *_pad_lists(x, pad), "edge")


@row(aten.tril)
def _tril(x, diagonal=0):
    return _core.tril(x, diagonal)


@row(aten.triu)
def _triu(x, diagonal=0):
    return _core.triu(x, diagonal)


@row(aten.cumsum)
def _cumsum(x, dim, dtype=None):
    dt = out_dtype()
    x = to(x, dt)
    return x if x.ndim == 0 else _core.cumsum(x, axis(dim, x))


@row(aten.cumprod)
def _cumprod(x, dim, dtype=None):
    dt = out_dtype()
    x = to(x, dt)
    return x if x.ndim == 0 else _core.cumprod(x, axis(dim, x))


@row(aten.sort)
def _sort(x, *args, **kwargs):
    # sort.default(x, dim=-1, descending=False); sort.stable(x, *, stable, dim=-1, descending=False)
    if current is not None and current.target == aten.sort.stable:
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:
        dim = args[0] if args else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    if x.ndim == 0:
        return x, _core.full([], 0, "i64")
    key = x.astype("u8") if x.dtype == "bool" else x
    v, i = _core.sort(key, axis(dim, x), bool(descending))
    return (v.astype("bool") if x.dtype == "bool" else v), i


@row(aten.searchsorted)
def _searchsorted(sorted_seq, values, out_int32=False, right=False, side=None, sorter=None):
    """The insertion points: how many of the sorted row's elements are below
    each value (or at most it, right): a comparison against all of them."""
    if sorter is not None:
        sorted_seq = _core.take_along(sorted_seq, sorter, sorted_seq.ndim - 1)
    right = right or side == "right"
    v = values if is_tensor(values) else _core.full([], float(values), sorted_seq.dtype)
    dt = result_dtype(sorted_seq, v)
    s, v = to(sorted_seq, dt), to(v, dt)
    if s.ndim == 1:
        cmp = s.reshape([1] * v.ndim + [-1])
        below = cmp <= _core.expand_dims(v, [v.ndim]) if right else cmp < _core.expand_dims(v, [v.ndim])
    else:  # rows: values' last dim searched in the matching row
        below = (_core.expand_dims(s, [s.ndim - 1]) <= _core.expand_dims(v, [v.ndim])) if right else \
            (_core.expand_dims(s, [s.ndim - 1]) < _core.expand_dims(v, [v.ndim]))
    n = below.astype("i64").sum(axis=[below.ndim - 1])
    return n.astype("i32") if out_int32 else n


@row(aten.topk)
def _topk(x, k, dim=-1, largest=True, sorted=True):
    if x.ndim == 0:
        return x, _core.full([], 0, "i64")
    return _core.topk(x, int(k), axis(dim, x), bool(largest))


@row(aten.kthvalue)
def _kthvalue(x, k, dim=-1, keepdim=False):
    if x.ndim == 0:
        return x, _core.full([], 0, "i64")
    d = axis(dim, x)
    v, i = _core.sort(x, d, False)
    v, i = _core.slice_axis(v, d, k - 1, k, 1), _core.slice_axis(i, d, k - 1, k, 1)
    return (v, i) if keepdim else (_core.squeeze(v, [d]), _core.squeeze(i, [d]))


@row(aten.median)
def _median(x, dim=None, keepdim=False):
    """The lower median (torch's): element (n - 1) // 2 of the sorted axis."""
    if dim is None:
        flat = x.reshape([-1])
        n = flat.shape[0]
        return _kthvalue(flat, (n - 1) // 2 + 1, 0)[0]
    d = axis(dim, x)
    n = x.shape[d] if x.ndim else 1
    return _kthvalue(x, (n - 1) // 2 + 1, d, keepdim)


@row(aten.logcumsumexp)
def _logcumsumexp(x, dim):
    if x.ndim == 0:
        return x
    d = axis(dim, x)
    m = x.max(axis=[d], keepdims=True)
    m = _core.where(abs(m) == math.inf, scalar(0, x.dtype), m)
    return _core.log(_core.cumsum(_core.exp(x - m), d)) + m


def _cum_extreme(largest):
    """(values, indices) of the running maximum (minimum): log2(n) rounds,
    each taking the better of an element and the one 2^r before it (the
    later index on ties, as torch)."""
    def r(x, dim):
        if x.ndim == 0:
            return x, _core.full([], 0, "i64")
        d = axis(dim, x)
        n = x.shape[d]
        if not isinstance(n, int):
            raise Unsupported("a running maximum over a symbolic dim")
        shape = [1] * x.ndim
        shape[d] = n
        v, i = x, _core.broadcast_to(_core.arange(n, "i64").reshape(shape), texts(dims_of(x)))
        s = 1
        while s < n:
            pv = _core.concatenate([_core.slice_axis(v, d, 0, s, 1), _core.slice_axis(v, d, 0, n - s, 1)], d)
            pi = _core.concatenate([_core.slice_axis(i, d, 0, s, 1), _core.slice_axis(i, d, 0, n - s, 1)], d)
            better = (pv > v) if largest else (pv < v)
            if is_float(x.dtype):
                better = better | ((pv != pv) & (v == v))  # NaN wins and stays
            v, i = _core.where(better, pv, v), _core.where(better, pi, i)
            s *= 2
        return v, i
    return r


ROWS[aten.cummax] = _cum_extreme(True)
ROWS[aten.cummin] = _cum_extreme(False)


@row(aten._cdist_forward)
def _cdist(a, b, p, compute_mode=None):
    """Pairwise distances of the rows of a [.., P, M] and b [.., R, M]."""
    diff = _core.expand_dims(a, [a.ndim - 1]) - _core.expand_dims(b, [b.ndim - 2])  # [.., P, R, M]
    last = [diff.ndim - 1]
    if p == 0:
        return (diff != 0).astype(a.dtype).sum(axis=last)
    if p == math.inf:
        return abs(diff).max(axis=last)
    if p == 1:
        return abs(diff).sum(axis=last)
    if p == 2:
        return _core.sqrt((diff * diff).sum(axis=last))
    return (abs(diff) ** float(p)).sum(axis=last) ** (1.0 / p)


@row(aten.diagonal_scatter)
def _diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """x with src on its diagonal: a mask of the diagonal, src spread over it."""
    a, b = axis(dim1, x), axis(dim2, x)
    n, m = x.shape[a], x.shape[b]
    if not isinstance(n, int) or not isinstance(m, int):
        raise Unsupported("aten.diagonal_scatter over symbolic dims")
    i = _core.arange(n, "i64").reshape([n, 1])
    j = _core.arange(m, "i64").reshape([1, m])
    on = (j - i) == offset  # [n, m]
    rest = [d for d in range(x.ndim) if d not in (a, b)]
    moved = x.transpose(rest + [a, b])
    # src [rest.., k]: diagonal position (i, j) holds src[.., i] (offset >= 0) or src[.., j].
    k = src.shape[-1]
    if not k:
        return x
    at = _core.clip(_core.broadcast_to(i if offset >= 0 else j, [n, m]), 0, k - 1)
    spread = _core.take(to(src, x.dtype), at.reshape([n * m]), src.ndim - 1)  # [rest.., n * m]
    spread = spread.reshape(texts(dims_of(moved)))
    r = _core.where(on, spread, moved)
    inv = [0] * x.ndim
    for pos, d in enumerate(rest + [a, b]):
        inv[d] = pos
    return r.transpose(inv)


@row(aten._batch_norm_with_update_functional)
def _bn_with_update(x, w, b, rm, rv, momentum, eps):
    y, mean, rstd, new_rm, new_rv = _bn_functional(x, w, b, rm, rv, True, momentum, eps)
    return y, mean, rstd, _empty0("u8"), new_rm, new_rv


@row(aten.unfold)
def _unfold(x, dim, size, step):
    """Windows of `size` every `step` along dim, as a new last dim."""
    if x.ndim == 0:
        return x.reshape([1])
    d = axis(dim, x)
    n = x.shape[d]
    if not isinstance(n, int):
        raise Unsupported("aten.unfold over a symbolic dim")
    count = (n - size) // step + 1
    idx = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    g = _core.take(x, _core.asarray(np.ascontiguousarray(idx.astype(np.int64))), d)  # [.., count * size, ..]
    shape = texts(dims_of(x))
    shape[d:d + 1] = [count, size]
    g = g.reshape(shape)
    perm = [k for k in range(g.ndim) if k != d + 1] + [d + 1]
    return g.transpose(perm)


# ---- normalization ------------------------------------------------------------------------

@row(aten.native_layer_norm)
def _native_layer_norm(x, shape, w, b, eps):
    return _core.layer_norm_over(x, x.ndim - len(shape), w, b, float(eps))


@row(aten.native_group_norm)
def _native_group_norm(x, w, b, n, c, hw, groups, eps):
    return _core.group_norm(x, int(groups), w, b, float(eps))


def _empty0(dt):
    return _core.full([0], 0, dt)


@row(aten._native_batch_norm_legit_no_training)
def _bn_inference(x, w, b, rm, rv, momentum, eps):
    return _core.batch_norm(x, w, b, rm, rv, float(eps)), _empty0(x.dtype), _empty0(x.dtype)


def _bn_train(x, w, b, eps):
    y, mean, var, rstd = _core.batch_norm_train(x, w, b, float(eps))
    return y, mean, var, rstd


@row(aten._native_batch_norm_legit)
def _bn_legit(x, w, b, *rest):
    # (x, w, b, running_mean, running_var, training, momentum, eps) or no_stats: (x, w, b, training, momentum, eps)
    if len(rest) == 5:
        rm, rv, training, momentum, eps = rest
    else:
        rm = rv = None
        training, momentum, eps = rest
    if not training:
        return _bn_inference(x, w, b, rm, rv, momentum, eps)
    y, mean, _, rstd = _bn_train(x, w, b, eps)
    return y, mean, rstd


@row(aten._native_batch_norm_legit_functional)
def _bn_functional(x, w, b, rm, rv, training, momentum, eps):
    """Training: the batch's statistics, and the running ones updated as
    torch does (the variance unbiased): (1 - m) running + m batch."""
    if not training:
        y = _core.batch_norm(x, w, b, rm, rv, float(eps))
        return y, _empty0(x.dtype), _empty0(x.dtype), rm, rv
    y, mean, var, rstd = _bn_train(x, w, b, eps)
    n = 1
    for d in range(x.ndim):
        if d != 1:
            n = n * sym(x.shape[d])
    if isinstance(n, Sym):
        raise Unsupported("batch norm training over a symbolic batch (the running variance's n / (n - 1))")
    unbiased = var * (n / (n - 1)) if n > 1 else var
    m = float(momentum)
    return y, mean, rstd, rm * (1 - m) + mean * m, rv * (1 - m) + unbiased * m


@row(aten.native_dropout)
def _native_dropout(x, p, train):
    if train and p > 0:
        raise Unsupported("aten.native_dropout in training (random numbers: runs eagerly)")
    return x, _core.full(texts(dims_of(x)), 1, "bool")


@row(aten._softmax)
def _softmax(x, dim, half_to_float=False):
    x = to(x, out_dtype())
    if x.ndim == 0:  # one element: exp(x - x) / itself
        return _core.exp(x - x)
    return _core.softmax(x, axis(dim, x))


@row(aten._log_softmax)
def _log_softmax(x, dim, half_to_float=False):
    x = to(x, out_dtype())
    if x.ndim == 0:
        return x - x
    return _core.log_softmax(x, axis(dim, x))


@row(aten._safe_softmax)
def _safe_softmax(x, dim, dtype=None):
    s = _core.softmax(to(x, out_dtype()), axis(dim, x))
    return _core.where(s != s, 0.0, s)  # a row with no visible element: 0, not NaN


# ---- convolution and pooling ------------------------------------------------------------------

def _spatial(v, k, default):
    """torch's int-or-list window arguments as k values."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return list(default) if isinstance(default, (list, tuple)) else [default] * k
    v = [v] if isinstance(v, int) else list(v)
    return v * k if len(v) == 1 and k > 1 else v


@row(aten.convolution, aten._convolution)
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups, *_):
    k = w.ndim - 2
    if isinstance(padding, str):
        raise Unsupported(f"aten.convolution with padding='{padding}'")
    pad = _spatial(padding, k, 0)
    s, d = _spatial(stride, k, 1), _spatial(dilation, k, 1)
    if transposed:
        return _core.conv_transpose(x, w, bias, s, d, pad, pad, _spatial(output_padding, k, 0), int(groups))
    return _core.conv(x, w, bias, s, d, pad, pad, int(groups))


@row(aten.col2im)
def _col2im(x, output_size, kernel_size, dilation, padding, stride):
    k = len(output_size)
    p = _spatial(padding, k, 0)
    return _core.col2im(x, list(output_size), _spatial(kernel_size, k, 1), _spatial(stride, k, 1), _spatial(dilation, k, 1), p, p)


@row(aten.convolution_backward)
def _convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask):
    """The input's gradient is the transposed convolution of the output's;
    the weight's, the products of each window of the input with it."""
    if transposed:
        raise Unsupported("aten.convolution_backward of a transposed convolution")
    k = w.ndim - 2
    pad, s, d = _spatial(padding, k, 0), _spatial(stride, k, 1), _spatial(dilation, k, 1)
    gi = gw = gb = None
    if mask[0]:
        outpad = []
        for i in range(k):
            n_in, n_out, kk = x.shape[x.ndim - k + i], grad.shape[grad.ndim - k + i], w.shape[2 + i]
            outpad.append(n_in - ((n_out - 1) * s[i] - 2 * pad[i] + d[i] * (kk - 1) + 1))
        gi = _core.conv_transpose(grad, w, None, s, d, pad, pad, outpad, int(groups))
    if mask[1]:
        gw = _core.conv_weight_grad(x, grad, list(w.shape[2:]), s, d, pad, pad, int(groups))
    if mask[2]:
        gb = grad.sum(axis=[a for a in range(grad.ndim) if a != 1])
    return gi, gw, gb


def _pool_args(x, kernel, stride, padding, dilation, k):
    kern = _spatial(kernel, k, 1)
    return kern, _spatial(stride, k, kern), _spatial(padding, k, 0), _spatial(dilation, k, 1)


def _max_pool(pool, k):
    def r(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
        kern, s, p, d = _pool_args(x, kernel, stride, padding, dilation, k)
        return pool(x, kern, s, d, p, p, bool(ceil_mode))
    return r


ROWS[aten.max_pool1d] = _max_pool(_core.max_pool, 1)
ROWS[aten.max_pool2d] = _max_pool(_core.max_pool, 2)
ROWS[aten.max_pool3d] = _max_pool(_core.max_pool, 3)
ROWS[aten.max_pool2d_with_indices] = _max_pool(_core.max_pool_with_indices, 2)
ROWS[aten.max_pool3d_with_indices] = _max_pool(_core.max_pool_with_indices, 3)


def _avg_pool(k):
    def r(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
        kern, s, p, _ = _pool_args(x, kernel, stride, padding, 1, k)
        return _core.avg_pool(x, kern, s, p, p, bool(ceil_mode), bool(count_include_pad), int(divisor_override or 0))
    return r


ROWS[aten.avg_pool1d] = _avg_pool(1)
ROWS[aten.avg_pool2d] = _avg_pool(2)
ROWS[aten.avg_pool3d] = _avg_pool(3)


def _adaptive(pool, k):
    return lambda x, out_size: pool(x, _spatial(out_size, k, 1))


ROWS[aten.adaptive_avg_pool1d] = _adaptive(_core.adaptive_avg_pool, 1)
ROWS[aten._adaptive_avg_pool2d] = _adaptive(_core.adaptive_avg_pool, 2)
ROWS[aten._adaptive_avg_pool3d] = _adaptive(_core.adaptive_avg_pool, 3)
ROWS[aten.adaptive_max_pool1d] = _adaptive(_core.adaptive_max_pool, 1)
ROWS[aten.adaptive_max_pool2d] = _adaptive(_core.adaptive_max_pool, 2)
ROWS[aten.adaptive_max_pool3d] = _adaptive(_core.adaptive_max_pool, 3)


def _upsample_size(x, k, output_size, scales):
    if output_size:
        return [int(v) for v in output_size], []
    sc = [float(v) for v in (scales if isinstance(scales, (list, tuple)) else [scales] * k)]
    return [int(math.floor(x.shape[x.ndim - k + i] * sc[i])) for i in range(k)], sc


def _upsample_nearest(k):
    def r(x, output_size=None, *scales):
        if len(scales) == 1 and (scales[0] is None or isinstance(scales[0], (list, tuple))):  # .vec: (x, output_size, scale_factors)
            out_, sc = _upsample_size(x, k, output_size, scales[0])
        else:  # .default: (x, output_size, scales_h?, scales_w?)
            out_ = [int(v) for v in output_size]
            sc = [float(v) if v is not None else 0.0 for v in scales] if any(v is not None for v in scales) else []
        return _core.upsample_nearest(x, out_, sc)
    return r


ROWS[aten.upsample_nearest1d] = _upsample_nearest(1)
ROWS[aten.upsample_nearest2d] = _upsample_nearest(2)
ROWS[aten.upsample_nearest3d] = _upsample_nearest(3)


def _upsample_linear(k):
    def r(x, output_size, align_corners, *scales):
        if len(scales) == 1 and (scales[0] is None or isinstance(scales[0], (list, tuple))):
            out_, sc = _upsample_size(x, k, output_size, scales[0])
        else:
            out_ = [int(v) for v in output_size]
            sc = [float(v) if v is not None else 0.0 for v in scales] if any(v is not None for v in scales) else []
        return _core.upsample_linear(x, out_, bool(align_corners), sc if not align_corners else [])
    return r


ROWS[aten.upsample_linear1d] = _upsample_linear(1)
ROWS[aten.upsample_bilinear2d] = _upsample_linear(2)
ROWS[aten.upsample_trilinear3d] = _upsample_linear(3)


def _avg_pool_backward(k):
    def r(grad, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
        kern, s, p, _ = _pool_args(x, kernel, stride, padding, 1, k)
        return _core.avg_pool_grad(grad, x, kern, s, p, p, bool(ceil_mode), bool(count_include_pad), int(divisor_override or 0))
    return r


ROWS[aten.avg_pool2d_backward] = _avg_pool_backward(2)
ROWS[aten.avg_pool3d_backward] = _avg_pool_backward(3)


@row(aten._adaptive_avg_pool2d_backward, aten._adaptive_avg_pool3d_backward)
def _adaptive_avg_backward(grad, x):
    k = 3 if current is not None and current.target == aten._adaptive_avg_pool3d_backward.default else 2
    return _core.adaptive_avg_pool_grad(grad, x, [int(s) for s in grad.shape[-k:]])


# ---- attention ----------------------------------------------------------------------------------

def _attention_options(q, attn_mask, is_causal, scale):
    """tensorjit's attention options: torch's is_causal is top-left (key j
    visible to query i iff j <= i); a mask is a bool (True: visible) or an
    additive bias; a row that sees no key gives 0 (torch's safe softmax)."""
    if attn_mask is not None and is_causal:
        raise Unsupported("scaled dot-product attention with both a mask and is_causal")
    return dict(scale=float(scale) if scale else 0.0, causal=bool(is_causal), causal_offset=0, bias=attn_mask, zero_empty_rows=True)


def _no_dropout(p):
    if p:
        raise Unsupported("scaled dot-product attention with dropout (random numbers: runs eagerly)")


@row(aten._scaled_dot_product_flash_attention_for_cpu)
def _sdpa_flash_cpu(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """(output, logsumexp [B, H, T] in f32)."""
    _no_dropout(dropout_p)
    o = _attention_options(q, attn_mask, is_causal, scale)
    out = _core.attention(q, k, v, **o)
    lse = _core.attention_lse(q, k, **o)
    return out, to(lse, "f32")


@row(aten._scaled_dot_product_flash_attention_for_cpu_backward)
def _sdpa_flash_cpu_backward(dout, q, k, v, out, lse, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    _no_dropout(dropout_p)
    o = _attention_options(q, attn_mask, is_causal, scale)
    return _core.attention_grad(q, k, v, out, dout, to(lse, q.dtype), **o)


@row(aten.scaled_dot_product_attention)
def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    _no_dropout(dropout_p)
    return _core.attention(q, k, v, **_attention_options(q, attn_mask, is_causal, scale))


# ---- what runs eagerly --------------------------------------------------------------------------

# Ops with no row run eagerly between compiled parts (partition.py). These
# are named here to say why.
EAGER = {
    aten._local_scalar_dense: "reads a value (Dynamo breaks the graph on item())",
    aten.nonzero: "a data-dependent shape",
    aten.masked_select: "a data-dependent shape",
    aten.rand: "random numbers", aten.randn: "random numbers", aten.randint: "random numbers", aten.bernoulli: "random numbers",
    aten.rand_like: "random numbers", aten.randn_like: "random numbers", aten.randperm: "random numbers",
    aten.native_dropout: "random numbers",
}
