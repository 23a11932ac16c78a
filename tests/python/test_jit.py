"""tensorjit.jit: guards and recompilation on each kind of Python value,
graph breaks (how many, and where), dynamic shapes, arrays in and out
without copies, structured control flow, and clear errors."""
import numpy as np
import pytest

import tensorjit as tj

rng = np.random.default_rng(2)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_scalars_are_guards_and_recompile_on_a_new_value():
    @tj.jit
    def scale(x, k, flag):
        y = x * k
        return tj.relu(y) if flag else y

    x = f32(3, 4)
    np.testing.assert_allclose(scale(x, 2.0, True), np.maximum(x * 2, 0), rtol=1e-6)
    np.testing.assert_allclose(scale(x, 2.0, True), np.maximum(x * 2, 0), rtol=1e-6)
    assert scale.stats["compilations"] == 1 and scale.stats["hits"] == 1
    np.testing.assert_allclose(scale(x, 3.0, True), np.maximum(x * 3, 0), rtol=1e-6)
    np.testing.assert_allclose(scale(x, 3.0, False), x * 3, rtol=1e-6)
    assert scale.stats["compilations"] == 3
    text = tj.explain(scale)
    assert "guard" in text.lower(), text


def test_ints_strings_none_and_list_lengths_are_guards():
    @tj.jit
    def f(xs, n, mode, bias):
        y = xs[0]
        for x in xs[1:]:
            y = y + x
        y = y * n
        if mode == "neg":
            y = -y
        return y if bias is None else y + bias

    a, b, c = f32(2, 3), f32(2, 3), f32(2, 3)
    np.testing.assert_allclose(f([a, b], 2, "pos", None), (a + b) * 2, rtol=1e-6)
    np.testing.assert_allclose(f([a, b, c], 2, "pos", None), (a + b + c) * 2, rtol=1e-6)
    np.testing.assert_allclose(f([a, b], 3, "neg", None), -(a + b) * 3, rtol=1e-6)
    np.testing.assert_allclose(f([a, b], 3, "neg", c), -(a + b) * 3 + c, rtol=1e-6)
    assert f.stats["compilations"] == 4
    f([a, b], 2, "pos", None)
    assert f.stats["compilations"] == 4  # seen before: a hit


def test_new_shapes_and_dtypes_recompile_and_dynamic_dims_do_not():
    g = tj.jit(lambda x: (x * 2).sum(axis=-1))
    for n in (3, 5, 7, 9):
        x = f32(n, 4)
        np.testing.assert_allclose(g(x), (x * 2).sum(-1), rtol=1e-5)
    # automatic: static until a dim shows a second size, then symbolic
    assert g.stats["compilations"] == 2
    g(np.ones((3, 4), np.float64))
    assert g.stats["compilations"] == 3  # a new dtype

    static = tj.jit(lambda x: x + 1, dynamic=False)
    for n in (3, 5, 7):
        static(f32(n, 2))
    assert static.stats["compilations"] == 3
    symbolic = tj.jit(lambda x: x + 1, dynamic=True)
    for n in (3, 5, 7):
        symbolic(f32(n, 2))
    assert symbolic.stats["compilations"] == 1


def test_mark_dynamic():
    h = tj.jit(lambda x: x * 3, dynamic=False)
    x = tj.mark_dynamic(f32(4, 2), 0)
    h(x)
    y = f32(6, 2)
    np.testing.assert_allclose(h(y), y * 3, rtol=1e-6)
    assert h.stats["compilations"] == 1


def test_graph_breaks_are_counted_and_located():
    @tj.jit
    def branchy(x):
        s = x.sum()
        if s > 0:  # a graph break: the value decides the branch
            return x * 2
        return x - 1

    pos = np.abs(f32(3, 3))
    neg = -pos
    np.testing.assert_allclose(branchy(pos), pos * 2, rtol=1e-6)
    np.testing.assert_allclose(branchy(neg), neg - 1, rtol=1e-6)
    np.testing.assert_allclose(branchy(pos), pos * 2, rtol=1e-6)
    assert branchy.stats["graph_breaks"] == 3
    text = tj.explain(branchy)
    assert "test_jit.py" in text and "if s > 0" in text, text
    assert "3 times" in text, text


def test_item_float_and_int_are_graph_breaks():
    @tj.jit
    def f(x):
        n = int(x.max())
        return x * float(x.mean()) + n

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(f(x), x * x.mean() + 5, rtol=1e-6)
    assert f.stats["graph_breaks"] == 2


def test_cond_and_while_loop_stay_in_one_graph():
    @tj.jit
    def collatz_steps(n):
        def cond(state):
            return state[0] > 1

        def body(state):
            v, steps = state
            odd = (v % 2) == 1
            return [tj.where(odd, v * 3 + 1, v // 2), steps + 1]

        zero = n * 0
        return tj.while_loop(cond, body, [n, zero])[1]

    assert int(collatz_steps(np.array(27, dtype=np.int64))) == 111
    assert collatz_steps.stats["graph_breaks"] == 0

    @tj.jit
    def pick(p, x):
        return tj.cond(p, lambda x: [x * 2], lambda x: [x - 1], [x])[0]

    x = f32(3)
    np.testing.assert_allclose(pick(np.array(True), x), x * 2, rtol=1e-6)
    np.testing.assert_allclose(pick(np.array(False), x), x - 1, rtol=1e-6)
    assert pick.stats["compilations"] == 1


def test_arrays_go_in_without_a_copy_and_come_out_owned():
    x = f32(64, 64)
    assert tj._core._data_pointer(x) == x.ctypes.data
    f = tj.jit(lambda x: x + 1)
    y = f(x)
    assert isinstance(y, np.ndarray) and y.flags["C_CONTIGUOUS"] and y.flags["WRITEABLE"]
    y[0, 0] = 5  # the result is the caller's
    identity = tj.jit(lambda x: x)
    z = identity(x)
    assert z is x or z.ctypes.data != x.ctypes.data  # the input itself, or a copy: never a view of it that could dangle
    np.testing.assert_array_equal(z, x)


def test_bad_inputs_give_clear_errors():
    f = tj.jit(lambda x: x @ x)
    with pytest.raises(tj.Error, match="not contiguous"):
        f(f32(4, 8)[:, ::2])
    with pytest.raises(tj.ShapeError):
        f(f32(3, 4))  # [3,4] @ [3,4]
    with pytest.raises(TypeError, match="not supported"):
        f(object())
    with pytest.raises(tj.Error, match="not supported"):
        tj.jit(lambda x: x + 1)(np.array(["a"]))
    kept = []
    g = tj.jit(lambda x: kept.append(x) or x * 2)
    g(f32(2))
    with pytest.raises(tj.Error, match="trace that has ended"):
        kept[0] + 1
    with pytest.raises(TypeError, match="must return tensors"):
        tj.jit(lambda x: 3)(f32(2))
    with pytest.raises(tj.Error, match="only available while a function is traced"):
        tj.arange(4)


def test_wrong_dtypes_ranks_and_guarded_values_are_clear_errors():
    # A compiled program takes what it was compiled for, and names the rest.
    p = tj.Program.compile(tj.parse_ir("graph g\ninput %x : f32[2,3]\n%0 = add(%x, %x) : f32[2,3]\nreturn %0\n"))
    for bad, want in [(np.ones((2, 3), np.float64), "f64\\[2,3\\], expected f32\\[2,3\\]"),
                      (np.ones((2, 3, 1), np.float32), "f32\\[2,3,1\\], expected"), (np.ones((3, 2), np.float32), "f32\\[3,2\\], expected")]:
        with pytest.raises(tj.Error, match=want):
            p.run({"x": bad})
    # A jit function compiles again for a new dtype or rank; Python values
    # it cannot guard on are a TypeError naming their type.
    f = tj.jit(lambda x, n: x * n)
    for v in ({1, 2}, 1 + 2j, object(), b"x"):
        with pytest.raises(TypeError, match=f"type {type(v).__name__} is not supported"):
            f(f32(3), v)
    with pytest.raises(tj.Error, match="does not fit in 64 bits"):
        f(f32(3), -(2**63) - 1)


def test_ahead_of_time_compile_and_ir_text():
    f = tj.compile(lambda x: tj.tanh(x) * 2, [f32(2, 3)])
    assert f.stats["compilations"] == 1
    g = tj.parse_ir("graph g\ninput %x : f32[2]\n%0 = add(%x, %x) : f32[2]\nreturn %0\n")
    assert "add" in g.text and g.inputs == ["x"]
    p = tj.Program.compile(g)
    np.testing.assert_array_equal(p.run({"x": np.array([1, 2], np.float32)})[0], [2, 4])
    with pytest.raises(tj.ParseError):
        tj.parse_ir("graph g\n%0 = nope() : f32[]\n")


def test_frozen_weights_are_copied_in_and_guarded_by_identity():
    w = {"a": f32(4, 4), "b": f32(4)}

    @tj.jit(freeze="w")
    def f(x, w):
        return x @ w["a"] + w["b"]

    x = f32(2, 4)
    np.testing.assert_allclose(f(x, w), x @ w["a"] + w["b"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(x, w), x @ w["a"] + w["b"], rtol=1e-5, atol=1e-6)
    assert f.stats["compilations"] == 1 and f.stats["hits"] == 1
    w2 = {"a": f32(4, 4), "b": w["b"]}  # another array: compiled again, with it
    np.testing.assert_allclose(f(x, w2), x @ w2["a"] + w2["b"], rtol=1e-5, atol=1e-6)
    assert f.stats["compilations"] == 2
    del w2  # the compilation holds its own copy
    np.testing.assert_allclose(f(x, w=w), x @ w["a"] + w["b"], rtol=1e-5, atol=1e-6)
    want = x @ w["a"] + w["b"]
    w["b"] += 1  # written in place: the copy frozen into the compilation is what runs
    np.testing.assert_allclose(f(x, w=w), want, rtol=1e-5, atol=1e-6)
    assert "frozen" in tj.explain(f)
    with pytest.raises(ValueError, match="not a parameter"):
        tj.jit(lambda x: x, freeze="w")


def test_borrowed_frozen_weights_are_read_in_place_and_released():
    # borrow=True (the torch backend's): no copy; the compilation holds a
    # reference to each array while it reads it, and drops it with the function.
    import gc
    import weakref
    from tensorjit._jit import JitFunction

    w, x = f32(64, 32), f32(3, 64)
    f = JitFunction(lambda x, w: x * 2 @ w, freeze="w", borrow=True)
    want = x * 2 @ w
    np.testing.assert_allclose(f(x, w), want, rtol=1e-5, atol=1e-5)
    alive = weakref.ref(w)
    del w
    gc.collect()
    assert alive() is not None  # the compilation's reference
    np.testing.assert_allclose(f(x, alive()), want, rtol=1e-5, atol=1e-5)
    assert f.stats["compilations"] == 1
    del f
    gc.collect()
    assert alive() is None  # released with it: no leak


def test_weight_formats():
    # bf16 and int8 weights: frozen matrices (>= 4096 elements) stored narrower, read converted.
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((64, 96)) / 8).astype(np.float32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    want = x @ w
    for fmt, tol in (("bf16", 1e-2), ("int8", 5e-2)):
        f = tj.jit(lambda x, w: x @ w, freeze="w", weights=fmt)
        got = f(x, w)
        err = np.abs(got - want).max() / np.abs(want).max()
        assert 0 < err < tol, (fmt, err)
        g = tj.parse_ir("graph g\ninput %x : f32[3,64]\nparam %w : f32[64,96]\n%0 = matmul(%x, %w) : f32[3,96]\nreturn %0\n")
        p = tj.Program.compile(g, {"w": w}, weights=fmt)
        assert 0 < np.abs(p.run({"x": x})[0] - want).max() / np.abs(want).max() < tol
    with pytest.raises(ValueError, match="weight format"):
        tj.jit(lambda x: x, weights="f16")
    with pytest.raises(Exception, match="weight format"):
        tj.Program.compile(g, {"w": w}, weights="int4")


def test_devices():
    # device="opencl": the same function compiled for OpenCL (PoCL on a machine without a GPU).
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    want = np.tanh(x @ w) + 1
    f = tj.jit(lambda x, w: tj.tanh(x @ w) + 1, device="opencl")
    try:
        got = f(x, w)
    except Exception as e:  # no OpenCL here: a clear error, then nothing else to check
        assert "OpenCL" in str(e), e
        pytest.skip(str(e))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    g = tj.parse_ir("graph g\ninput %x : f32[5,32]\nparam %w : f32[32,16]\n%0 = matmul(%x, %w) : f32[5,16]\nreturn %0\n")
    p = tj.Program.compile(g, {"w": w}, device="opencl")
    assert np.abs(p.run({"x": x})[0] - x @ w).max() <= 1e-5 * np.abs(x @ w).max()
    with pytest.raises(ValueError, match="not a device"):
        tj.jit(lambda x: x, device="tpu")
    with pytest.raises(Exception, match="unknown device"):
        tj.Program.compile(g, {"w": w}, device="gpu")
