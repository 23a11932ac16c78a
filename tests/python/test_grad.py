"""tensorjit.grad and value_and_grad: gradients of Python functions against
finite differences in f64, in the structure of their arguments; a
regression trained with them; clear errors."""
import numpy as np
import pytest

import tensorjit as tj

rng = np.random.default_rng(11)


def mlp_loss(x, w, y):
    h = tj.tanh(x @ w["w1"] + w["b1"])
    out = tj.rms_norm(h, w["g"]) @ w["w2"]
    return tj.mean((out - y) ** 2.0)


def numeric_grad(f, arrays, key, eps=1e-6):
    """Central differences of f() with respect to arrays[key], in place."""
    a = arrays[key]
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + eps
        up = f()
        a[i] = old - eps
        down = f()
        a[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def test_grad_of_a_dict_of_weights_matches_finite_differences():
    w = {"w1": rng.standard_normal((4, 6)), "b1": rng.standard_normal(6), "g": 1 + 0.1 * rng.standard_normal(6),
         "w2": rng.standard_normal((6, 2))}
    x, y = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    g = tj.grad(mlp_loss, argnums=1)(x, w, y)
    assert isinstance(g, dict) and list(g) == list(w)
    value = tj.jit(mlp_loss)
    for k in w:
        want = numeric_grad(lambda: float(value(x, w, y)), w, k)
        np.testing.assert_allclose(g[k], want, rtol=1e-6, atol=1e-8, err_msg=k)


def test_value_and_grad_with_several_argnums():
    f = tj.value_and_grad(lambda a, b: tj.sum(tj.sin(a) * b), argnums=(0, 1))
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    for _ in range(2):  # the second call is the fast path's
        value, (da, db) = f(a, b)
        np.testing.assert_allclose(value, np.sum(np.sin(a) * b), rtol=1e-12)
        np.testing.assert_allclose(da, np.cos(a) * b, rtol=1e-12)
        np.testing.assert_allclose(db, np.sin(a).sum(0), rtol=1e-12)  # b broadcast over rows: summed back
    assert f.stats["compilations"] == 1


def test_a_regression_trained_with_value_and_grad():
    x = rng.standard_normal((64, 3)).astype(np.float32)
    true_w = np.array([[1.5], [-2.0], [0.5]], np.float32)
    y = x @ true_w + 0.3
    step = tj.value_and_grad(lambda p, x, y: tj.mean((x @ p["w"] + p["b"] - y) ** 2.0))
    p = {"w": np.zeros((3, 1), np.float32), "b": np.zeros(1, np.float32)}
    first = None
    for _ in range(200):
        loss, g = step(p, x, y)
        first = first if first is not None else float(loss)
        p = {k: p[k] - 0.1 * g[k] for k in p}
    assert float(loss) < first / 1000
    np.testing.assert_allclose(p["w"], true_w, atol=1e-3)
    np.testing.assert_allclose(p["b"], [0.3], atol=1e-3)


def test_what_cannot_be_differentiated_is_a_clear_error():
    x = rng.standard_normal(4)
    with pytest.raises(tj.Error, match="must return one scalar"):
        tj.grad(lambda x: x * 2.0)(x)
    with pytest.raises(TypeError, match="one scalar array"):
        tj.grad(lambda x: [tj.sum(x)])(x)
    with pytest.raises(TypeError, match="Python number"):
        tj.grad(lambda x, s: tj.sum(x * s), argnums=1)(x, 2.0)
    with pytest.raises(tj.Error, match="graph break"):
        tj.grad(lambda x: tj.sum(x) * 2.0 if float(tj.sum(x)) > 0 else tj.sum(x))(x)
    with pytest.raises(TypeError, match="argnum 3"):
        tj.grad(lambda x: tj.sum(x), argnums=3)(x)
    with pytest.raises(tj.Error, match="floating-point"):
        tj.grad(lambda i, x: tj.sum(x), argnums=0)(np.arange(3), x)
