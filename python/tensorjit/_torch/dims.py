"""Sizes in the aten graphs: ints, or symbolic sizes (SymInts under dynamic
shapes) held as tensorjit dim text ("d0", "2*d0"), with the arithmetic
the graphs do on them (tensorjit's Dim: polynomials over size symbols)."""

from __future__ import annotations

import torch

from .. import _core


class Sym:
    """A symbolic size: its text as tensorjit's dims spell it."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def _arith(self, op, other, swap=False):
        if not isinstance(other, (int, Sym)):
            return NotImplemented
        a, b = (other, self) if swap else (self, other)
        return sym(_core.dim_arith(op, text(a), text(b)))

    def __add__(self, o):
        return self._arith("add", o)

    def __radd__(self, o):
        return self._arith("add", o, True)

    def __sub__(self, o):
        return self._arith("sub", o)

    def __rsub__(self, o):
        return self._arith("sub", o, True)

    def __mul__(self, o):
        return self._arith("mul", o)

    def __rmul__(self, o):
        return self._arith("mul", o, True)

    def __floordiv__(self, o):
        return self._arith("floordiv", o)

    def __rfloordiv__(self, o):
        return self._arith("floordiv", o, True)

    def __mod__(self, o):
        return self._arith("mod", o)

    def __neg__(self):
        return sym(_core.dim_arith("sub", 0, self.text))

    def __eq__(self, o):
        return isinstance(o, Sym) and o.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __index__(self):
        raise _core.UnsupportedOperand(f"the symbolic size {self.text} is used where a Python int is needed")

    __int__ = __index__

    def __repr__(self):
        return f"Sym({self.text})"


def sym(v):
    """An int, or a Sym for a dim's text."""
    return Sym(v) if isinstance(v, str) else v


def text(v):
    """What tensorjit's functions take: an int, or a dim's text."""
    if isinstance(v, Sym):
        return v.text
    if isinstance(v, (torch.SymInt,)):
        raise _core.UnsupportedOperand(f"a SymInt ({v}) reached the lowering without a tensorjit size")
    return int(v)


def shape(x):
    """x.shape with symbolic dims as Syms."""
    return [sym(d) for d in x.shape]


def texts(dims):
    return [text(d) for d in dims]


def is_static(v):
    return not isinstance(v, Sym)
