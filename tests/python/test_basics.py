import numpy as np
import pytest

import tensorjit as tj


def test_roundtrip_is_zero_copy_in():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert tj._core._data_pointer(x) == x.ctypes.data
    np.testing.assert_array_equal(tj._core._roundtrip(x), x)


def test_jit_mlp_matches_numpy():
    rng = np.random.default_rng(0)
    w = {"w1": rng.standard_normal((8, 16)).astype(np.float32), "w2": rng.standard_normal((16, 4)).astype(np.float32)}

    @tj.jit
    def mlp(x, w):
        return tj.relu(x @ w["w1"]) @ w["w2"]

    x = rng.standard_normal((3, 8)).astype(np.float32)
    want = np.maximum(x @ w["w1"], 0) @ w["w2"]
    np.testing.assert_allclose(mlp(x, w), want, rtol=1e-5, atol=1e-5)
