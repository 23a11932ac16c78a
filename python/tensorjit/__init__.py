"""tensorjit: a compiler for tensor programs, from Python.

    import numpy as np, tensorjit as tj

    @tj.jit
    def mlp(x, w):
        return tj.gelu(x @ w["w1"]) @ w["w2"]

    y = mlp(np.ones((4, 64), np.float32), weights)   # traced, compiled, run
    print(tj.explain(mlp))                            # entries, guards, graph breaks

Inside a jit function arrays are proxies (tensorjit.Tensor) with numpy's
operators, indexing and methods; the functions below are numpy's where numpy
has them. See docs/python.md."""

from . import _core
from ._core import (  # noqa: F401
    Error, Unsupported, ParseError, ShapeError, UnsupportedOperand,
    Tensor, Graph, Program,
    exp, log, tanh, sqrt, rsqrt, sin, cos, abs, sigmoid, erf, floor, ceil, round, sign, log1p, expm1,
    relu, silu, softplus, hardswish, gelu, leaky_relu, negative, reciprocal, logical_not,
    tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, trunc, bitwise_not,
    add, subtract, multiply, divide, power, maximum, minimum, matmul, equal, not_equal, less, less_equal,
    greater, greater_equal, logical_and, logical_or, mod, fmod, arctan2, where, clip,
    bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift, concatenate, stack, take, scatter_add,
    softmax, log_softmax, layer_norm, rms_norm, expand_dims, squeeze, broadcast_to, swapaxes, slice_axis, argmax,
    arange, asarray, causal_mask, kv_write, flash_attention, cond, while_loop,
)
from ._jit import JitFunction, jit, explain, compile, mark_dynamic, grad, value_and_grad, _note_break  # noqa: F401
from . import onnx  # noqa: F401

__version__ = "0.1.0"


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return x.sum(axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    return x.mean(axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return x.max(axis=axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    return x.min(axis=axis, keepdims=keepdims)


def prod(x, axis=None, keepdims=False):
    return x.prod(axis=axis, keepdims=keepdims)


def reshape(x, shape):
    return x.reshape(shape)


def transpose(x, axes=None):
    return x.transpose() if axes is None else x.transpose(axes)


def parse_ir(text):
    """A graph from the IR's text (docs/ir.md)."""
    return Graph.parse(text)


def _reading(method):
    def read(self, *args):
        _note_break()
        return method(self, *args)
    read.__name__ = method.__name__
    read.__doc__ = "Reads the value: a graph break under tensorjit.jit (the graph so far runs)."
    return read


for _name in ("item", "__bool__", "__float__", "__int__"):
    setattr(Tensor, _name, _reading(getattr(Tensor, _name)))
del _name
