"""The call path of a jit function (python/src/calls.cpp): positional and keyword
arguments of a structure seen before are checked and run in C++ (the fast
path); everything it cannot take goes to the Python slow path, which gives
the same results. Each case is checked against numpy or the slow path."""
import sys
import threading

import numpy as np
import pytest

import tensorjit as tj

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def slow(f, *args):
    """The same call on the slow path (a keyword-free call that skips the fast one)."""
    return f._call(*args)


def test_fast_path_hits_give_the_slow_paths_results():
    @tj.jit
    def f(x, scale, flag, d, name=None):
        y = x * scale + d["b"]
        return (tj.tanh(y), y.sum()) if flag else [y]

    x, d = f32(3, 4), {"b": f32(4)}
    for scale, flag in [(2.0, True), (2.0, True), (3.5, True), (2.0, False), (2.0, False)]:
        got, want = f(x, scale, flag, d), slow(f, x, scale, flag, d)
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(f(x, 2.0, False, d)[0], x * 2 + d["b"], rtol=1e-6)
    s = f.stats
    assert s["calls"] == s["hits"] + s["compilations"]


def test_each_entry_keeps_its_own_output_structure():
    # The output structure depends on a shape: two entries, called in turn.
    f = tj.jit(lambda x: (x + 1, x * 2) if x.shape[0] == 2 else x - 1, dynamic=False)
    a, b = f32(2, 3), f32(3, 3)
    for _ in range(3):
        ra, rb = f(a), f(b)
        assert isinstance(ra, tuple) and len(ra) == 2 and isinstance(rb, np.ndarray)
        np.testing.assert_allclose(ra[1], a * 2)
        np.testing.assert_allclose(rb, b - 1)
    assert f.stats["compilations"] == 2


def test_donated_caches_come_back_as_the_same_arrays():
    f = tj.jit(lambda x, cache, pos: (x * 2, tj.kv_write(cache, x, pos, axis=0)))
    cache = np.zeros((8, 4), np.float32)
    for step in range(4):
        x = f32(1, 4)
        y, c = f(x, cache, np.array(step, np.int64))
        assert c is cache
        np.testing.assert_array_equal(cache[step], x[0])
        np.testing.assert_allclose(y, x * 2)


def test_changing_frozen_weights_in_place_of_the_dict_recompiles():
    w = {"a": f32(4, 4)}
    f = tj.jit(lambda x, w: x @ w["a"], freeze="w")
    x = f32(2, 4)
    np.testing.assert_allclose(f(x, w), x @ w["a"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(x, w), x @ w["a"], rtol=1e-5, atol=1e-6)
    w["a"] = f32(4, 4)  # the same dict, another array: a new compilation
    np.testing.assert_allclose(f(x, w), x @ w["a"], rtol=1e-5, atol=1e-6)
    assert f.stats["compilations"] == 2
    w["b"] = f32(1)  # a new key: the structure changed
    np.testing.assert_allclose(f(x, w), x @ w["a"], rtol=1e-5, atol=1e-6)


def test_dicts_and_lists_of_arrays_take_the_fast_path():
    f = tj.jit(lambda x, w, ws: x @ w["a"] + ws[0] - ws[1])
    x, w, ws = f32(2, 4), {"a": f32(4, 4)}, [f32(4), f32(4)]
    want = x @ w["a"] + ws[0] - ws[1]
    for _ in range(3):
        np.testing.assert_allclose(f(x, w, ws), want, rtol=1e-5, atol=1e-6)
    w2 = {"b": w["a"]}  # other keys: the slow path says what is missing
    with pytest.raises(KeyError):
        f(x, w2, ws)
    np.testing.assert_allclose(f(x, w, [ws[0], ws[1] * 0]), x @ w["a"] + ws[0], rtol=1e-5, atol=1e-6)
    assert f.stats["compilations"] == 1


def test_what_the_fast_path_does_not_take_still_works_or_fails_clearly():
    f = tj.jit(lambda x, n: x * n)
    x = f32(4, 6)
    f(x, 2)
    np.testing.assert_allclose(f(x.astype(np.float64), 2), x.astype(np.float64) * 2)  # another dtype: a new entry
    with pytest.raises(tj.Error, match="not contiguous"):
        f(x[:, ::2], 2)
    np.testing.assert_allclose(f(np.asfortranarray(x).T.copy(), 2), x.T * 2)
    big = np.arange(4, dtype=">f4")  # big-endian: converted on the slow path or refused, never misread
    try:
        np.testing.assert_allclose(f(big, 1), np.arange(4))
    except tj.Error as e:
        assert "not supported" in str(e)
    with pytest.raises(tj.Error, match="does not fit in 64 bits"):
        f(x, 2**70)
    np.testing.assert_allclose(f(x, n=3), x * 3)


def test_calls_leave_no_references_behind():
    f = tj.jit(lambda x, c, pos: (x + 1, tj.kv_write(c, x, pos, axis=0)))
    x, c, pos = f32(1, 4), np.zeros((4, 4), np.float32), np.array(1, np.int64)
    f(x, c, pos)
    before = [sys.getrefcount(a) for a in (x, c, pos)]
    for _ in range(1000):
        y, c2 = f(x, c, pos)
    del y, c2
    assert [sys.getrefcount(a) for a in (x, c, pos)] == before


def test_calls_from_threads():
    f = tj.jit(lambda x, k: x * k)
    xs = [f32(16) for _ in range(4)]
    f(xs[0], 1.0)
    errors = []

    def work(i):
        try:
            for j in range(200):
                np.testing.assert_allclose(f(xs[i], float(i)), xs[i] * i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_keyword_arguments_take_the_fast_path():
    @tj.jit
    def f(x, w, scale=1.0):
        return (x @ w["a"]) * scale

    x, w = f32(2, 4), {"a": f32(4, 3)}
    slow_calls = []
    slow = f._call
    f._call = lambda *a, **k: slow_calls.append(1) or slow(*a, **k)
    for _ in range(3):
        np.testing.assert_allclose(f(x, w=w, scale=2.0), 2 * x @ w["a"], rtol=1e-5, atol=1e-6)
    assert len(slow_calls) == 1  # the first call traced; the others ran in C++
    np.testing.assert_allclose(f(w=w, x=x), x @ w["a"], rtol=1e-5, atol=1e-6)  # another order: another structure
    np.testing.assert_allclose(f(x, w=w, scale=3), 3 * x @ w["a"], rtol=1e-5, atol=1e-6)  # an int: another kind
    assert len(slow_calls) == 3

    g = tj.jit(lambda x, w: x @ w["a"], freeze="w")
    np.testing.assert_allclose(g(x, w=w), x @ w["a"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g(x, w=w), x @ w["a"], rtol=1e-5, atol=1e-6)
    w["a"] = f32(4, 3)  # a frozen weight replaced: compiled again, not the old one run
    np.testing.assert_allclose(g(x, w=w), x @ w["a"], rtol=1e-5, atol=1e-6)
    assert g.stats["compilations"] == 2
