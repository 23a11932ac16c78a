"""tensorjit.onnx.load: a model file compiled and called from Python, warm
the second time (the program from the cache, the file not read)."""
import numpy as np
import pytest

import tensorjit as tj

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def mlp_file(path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return w, b


def test_load_and_call(tmp_path, monkeypatch):
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path / "cache"))
    w, b = mlp_file(tmp_path / "mlp.onnx")
    m = tj.onnx.load(tmp_path / "mlp.onnx")
    assert m.imported and m.input_names == ["x"] and m.output_names == ["y"]
    for batch in (2, 5):  # one compilation for every batch size
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        (y,) = m(x)
        np.testing.assert_allclose(y, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m(x=x)[0], y)
    warm = tj.onnx.load(tmp_path / "mlp.onnx")
    assert not warm.imported
    np.testing.assert_allclose(warm(x)[0], y)
    with pytest.raises(TypeError, match="missing input"):
        m()
    with pytest.raises(tj.Error):
        m(np.ones((2, 5), np.float32))  # wrong inner size


def test_bad_files(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(tj.Error, match="not a valid ONNX model"):
        tj.onnx.load(tmp_path / "junk.onnx")
    with pytest.raises(tj.Error, match="cannot open"):
        tj.onnx.load(tmp_path / "missing.onnx")


def test_load_with_narrow_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((64, 80)) / 8).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 80])],
                          [numpy_helper.from_array(w, "w")])
    path = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = rng.standard_normal((2, 64)).astype(np.float32)
    exact = tj.onnx.load(path)(x)[0]
    np.testing.assert_allclose(exact, x @ w, rtol=1e-5, atol=1e-5)
    seen = set()
    for fmt in ("bf16", "int8", "bf16"):  # each format its own cache entry, not f32's: the second bf16 is warm
        m = tj.onnx.load(path, weights=fmt)
        got = m(x)[0]
        assert m.imported == (fmt not in seen), fmt
        seen.add(fmt)
        err = np.abs(got - exact).max() / np.abs(exact).max()
        assert 0 < err < (1e-2 if fmt == "bf16" else 5e-2), (fmt, err)


def test_shapes_given_as_inputs_are_specialized_on_their_values(tmp_path, monkeypatch):
    """A Reshape's shape and TopK's k arriving as graph inputs: one program
    per value of them (their values are its guard), not an error."""
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path / "cache"))
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("TopK", ["r", "k"], ["v", "i"], axis=-1)],
        "spec",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None), helper.make_tensor_value_info("i", TensorProto.INT64, None)],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "spec.onnx"))
    m = tj.onnx.load(tmp_path / "spec.onnx")
    assert m.specialized == ["shape", "k"] and m.programs == 0
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    for shape, k in (((3, 4), 2), ((4, 3), 1), ((3, 4), 2)):
        v, i = m(x, np.array(shape, np.int64), np.array([k], np.int64))
        want_i = np.argsort(-x.reshape(shape), axis=-1, kind="stable")[:, :k]
        np.testing.assert_array_equal(i, want_i)
        np.testing.assert_allclose(v, np.take_along_axis(x.reshape(shape), want_i, -1))
    assert m.programs == 2  # (3, 4) with k 2 was seen before


def test_unique_is_specialized_on_its_data(tmp_path, monkeypatch):
    """Unique's output shape depends on its input's values: the float input
    is specialized on (one program per value), and the result is numpy's."""
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path / "cache"))
    g = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], sorted=1)], "uniq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("y", TensorProto.FLOAT), ("first", TensorProto.INT64), ("inverse", TensorProto.INT64), ("counts", TensorProto.INT64))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "u.onnx"))
    m = tj.onnx.load(tmp_path / "u.onnx")
    assert m.specialized == ["x"]
    for x in ([2.0, 1.0, 2.0, np.nan, -0.0, np.nan], [3.0, 3.0, 3.0, 3.0, 3.0, 3.0]):
        x = np.array(x, np.float32)
        got = m(x)
        want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert m.programs == 2
