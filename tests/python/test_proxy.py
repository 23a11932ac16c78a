"""Every proxy operator, method and function against numpy: the same
function run by numpy and by tensorjit.jit gives the same values."""
import numpy as np
import pytest

import tensorjit as tj

rng = np.random.default_rng(1)
X = rng.standard_normal((4, 6)).astype(np.float32)
Y = rng.standard_normal((4, 6)).astype(np.float32)
P = np.abs(X) + 0.5  # positive


def same(fn, *args, rtol=1e-5, atol=1e-6, np_fn=None):
    """fn on numpy arrays against fn traced by tensorjit (np_fn: numpy's own spelling)."""
    want = (np_fn or fn)(*args)
    got = tj.jit(fn)(*args)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    else:
        assert got.shape == np.shape(want), (got.shape, np.shape(want))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: a + 2.5, lambda a, b: 2.5 - a, lambda a, b: 3.0 * a, lambda a, b: 1.0 / (b * b + 1),
    lambda a, b: -a, lambda a, b: abs(a), lambda a, b: +a,
    lambda a, b: (a < b).astype(np.float32), lambda a, b: (a <= b).astype(np.float32),
    lambda a, b: (a > 0.1).astype(np.float32), lambda a, b: (a >= b).astype(np.float32),
    lambda a, b: (a == a).astype(np.float32), lambda a, b: (a != b).astype(np.float32),
    lambda a, b: a @ b.T, lambda a, b: a // 0.3, lambda a, b: a % 0.7,
])
def test_operators(op):
    same(op, X, Y)


def test_power():
    same(lambda p: p ** 2.0, P)
    same(lambda p, q: p ** q, P, P)


def test_logical_operators():
    same(lambda a, b: ((a > 0) & (b > 0)).astype(np.float32), X, Y)
    same(lambda a, b: ((a > 0) | (b > 0)).astype(np.float32), X, Y)
    same(lambda a: (~(a > 0)).astype(np.float32), X)


def test_array_constants_on_either_side():
    c = np.linspace(-1, 1, 6).astype(np.float32)
    same(lambda a: a + c, X)
    same(lambda a: c * a, X)


@pytest.mark.parametrize("index", [
    lambda a: a[1], lambda a: a[-1], lambda a: a[:, 1:3], lambda a: a[1:, ::2], lambda a: a[..., 2],
    lambda a: a[None], lambda a: a[:, None, 1:4], lambda a: a[2, -3:], lambda a: a[..., None],
])
def test_indexing(index):
    same(index, X)


def test_take_with_an_index_tensor():
    idx = np.array([3, 0, 2], dtype=np.int64)
    same(lambda a, i: a[i], X, idx)
    same(lambda a, i: tj.take(a, i, axis=1), X, idx, np_fn=lambda a, i: np.take(a, i, axis=1))


@pytest.mark.parametrize("method", [
    lambda a: a.reshape(3, 8), lambda a: a.reshape((2, -1)), lambda a: a.T, lambda a: a.transpose(),
    lambda a: a.transpose(1, 0), lambda a: a.sum(), lambda a: a.sum(axis=1), lambda a: a.sum(axis=0, keepdims=True),
    lambda a: a.mean(axis=-1), lambda a: a.max(axis=1), lambda a: a.min(axis=(0, 1)), lambda a: a.prod(axis=0),
    lambda a: a.astype(np.float64), lambda a: a.astype("int32"),
])
def test_methods(method):
    same(method, X)


def test_argmax():
    same(lambda a: a.argmax(axis=1), X)
    assert tj.jit(lambda a: a.argmax(axis=1))(X).dtype == np.int64


def np_erf(x):
    import math
    return np.vectorize(math.erf)(x).astype(np.float32)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("fn,ref", [
    (tj.exp, np.exp), (tj.tanh, np.tanh), (tj.sin, np.sin), (tj.cos, np.cos), (tj.abs, np.abs),
    (tj.floor, np.floor), (tj.ceil, np.ceil), (tj.round, np.round), (tj.sign, np.sign), (tj.expm1, np.expm1),
    (tj.erf, np_erf), (tj.relu, lambda x: np.maximum(x, 0)), (tj.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    (tj.negative, np.negative), (tj.softmax, np_softmax),
    (tj.silu, lambda x: x / (1 + np.exp(-x))),
    (tj.tan, np.tan), (tj.atan, np.arctan), (tj.sinh, np.sinh), (tj.cosh, np.cosh), (tj.asinh, np.arcsinh),
    (tj.trunc, np.trunc),
])
def test_unary_functions(fn, ref):
    same(lambda a: fn(a), X, np_fn=ref)


def test_functions_of_positive_values():
    same(lambda p: tj.log(p), P, np_fn=np.log)
    same(lambda p: tj.sqrt(p), P, np_fn=np.sqrt)
    same(lambda p: tj.rsqrt(p), P, np_fn=lambda p: 1 / np.sqrt(p))
    same(lambda p: tj.log1p(p), P, np_fn=np.log1p)
    same(lambda p: tj.reciprocal(p), P, np_fn=np.reciprocal)


def test_binary_functions():
    same(lambda a, b: tj.maximum(a, b), X, Y, np_fn=np.maximum)
    same(lambda a, b: tj.minimum(a, 0.2), X, Y, np_fn=lambda a, b: np.minimum(a, 0.2))
    same(lambda a, b: tj.where(a > b, a, b * 2), X, Y, np_fn=lambda a, b: np.where(a > b, a, b * 2))
    same(lambda a, b: tj.where(a > 0, a, 0.0), X, Y, np_fn=lambda a, b: np.where(a > 0, a, 0.0))
    same(lambda a, b: tj.matmul(a, b.T), X, Y, np_fn=lambda a, b: a @ b.T)
    same(lambda a, b: tj.concatenate([a, b], axis=1), X, Y, np_fn=lambda a, b: np.concatenate([a, b], axis=1))
    same(lambda a, b: tj.stack([a, b], axis=0), X, Y, np_fn=lambda a, b: np.stack([a, b], axis=0))
    same(lambda a, b: tj.clip(a, -0.5, 0.5), X, Y, np_fn=lambda a, b: np.clip(a, -0.5, 0.5))
    same(lambda a, b: tj.expand_dims(a, [0]), X, Y, np_fn=lambda a, b: np.expand_dims(a, 0))
    same(lambda a, b: tj.sum(a, axis=1) + tj.mean(b), X, Y, np_fn=lambda a, b: np.sum(a, axis=1) + np.mean(b))


def test_functions_on_a_domain():
    u = np.clip(X * 0.3, -0.9, 0.9)
    same(lambda a: tj.asin(a), u, np_fn=np.arcsin)
    same(lambda a: tj.acos(a), u, np_fn=np.arccos)
    same(lambda a: tj.atanh(a), u, np_fn=np.arctanh)
    same(lambda p: tj.acosh(p + 1), P, np_fn=lambda p: np.arccosh(p + 1))
    same(lambda a, p: tj.arctan2(a, p), X, P, np_fn=np.arctan2)
    same(lambda a, p: tj.fmod(a, p), X, P, np_fn=np.fmod)


def test_slice_axis():
    same(lambda a: tj.slice_axis(a, 1, 1, 5, 2), X, np_fn=lambda a: a[:, 1:5:2])


def test_clip_to_arrays():
    lo, hi = -np.abs(Y), np.abs(Y)
    same(lambda a, lo, hi: tj.clip(a, lo, hi), X, lo, hi, np_fn=np.clip)


def test_scatter_add():
    idx = np.array([0, 2, 0, 3, 0], dtype=np.int64)
    upd = rng.standard_normal((5, 6)).astype(np.float32)

    def add_at(x, i, u):
        r = x.copy()
        np.add.at(r, i, u)
        return r

    same(lambda x, i, u: tj.scatter_add(x, i, u), X, idx, upd, np_fn=add_at)


def test_integer_bits():
    a = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    b = np.arange(12, dtype=np.int64).reshape(3, 4) % 5
    same(lambda a, b: tj.bitwise_and(a, b), a, b, np_fn=np.bitwise_and)
    same(lambda a, b: tj.bitwise_or(a, b), a, b, np_fn=np.bitwise_or)
    same(lambda a, b: tj.bitwise_xor(a, b), a, b, np_fn=np.bitwise_xor)
    same(lambda a: tj.bitwise_not(a), a, np_fn=np.invert)
    same(lambda a, b: tj.left_shift(a, b), a, b, np_fn=np.left_shift)
    same(lambda a, b: tj.right_shift(a, b), a, b, np_fn=np.right_shift)


def test_normalizations():
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def ln(x, w, b):
        m = x.mean(axis=-1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * w + b

    same(lambda x, w, b: tj.layer_norm(x, w, b), X, w, b, np_fn=ln, rtol=1e-4, atol=1e-5)
    same(lambda x, w: tj.rms_norm(x, w), X, w, np_fn=lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w,
         rtol=1e-4, atol=1e-5)


def test_integer_arrays():
    a = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    same(lambda a: a * 3 + 1, a)
    same(lambda a: a // 4, a)
    same(lambda a: a % 4, a)
    same(lambda a: a.min(axis=0), a)


def test_structured_outputs():
    f = tj.jit(lambda a, b: {"sum": a + b, "pair": (a * 2, [b])})
    r = f(X, Y)
    np.testing.assert_allclose(r["sum"], X + Y)
    np.testing.assert_allclose(r["pair"][0], X * 2)
    np.testing.assert_allclose(r["pair"][1][0], Y)
