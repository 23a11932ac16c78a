"""Per-call cost of tensorjit from Python, on a function that does almost
nothing (x + 1 on 4 floats): a tensorjit.jit call (flattening, guard check,
argument views, run, result array) against the same graph's Program.run, and
a plain numpy x + 1. Medians and p90 per call (bench/compare_numpy.py's
timing), side by side.
    PYTHONPATH=build/python build/py-venv/bin/python bench/python_overhead.py"""
import os
import sys

import numpy as np

import tensorjit as tj

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_numpy import timing  # noqa: E402

x = np.ones(4, np.float32)
f = tj.jit(lambda x: x + 1, dynamic=False)
f(x)
p = tj.Program.compile(tj.parse_ir("graph g\ninput %x : f32[4]\n%0 = add(%x, %x) : f32[4]\nreturn %0\n"))
inputs = {"x": x}
rows = [("tensorjit.jit call", lambda: f(x)), ("Program.run (the compiled graph alone)", lambda: p.run(inputs)),
        ("numpy x + 1", lambda: x + 1)]
print(f"{'per call, us':40s} {'median':>8s} {'p90':>8s}")
for name, fn in rows:
    med, p90 = timing(fn, 1.0)
    print(f"{name:40s} {med * 1e6:8.2f} {p90 * 1e6:8.2f}")
