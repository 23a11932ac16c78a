"""Per-call cost of a compiled call from Python, on a function that does
almost nothing (x + 1 on 4 floats), side by side in one run:
  - a tensorjit.jit call (fast path: argument check, views, guard check, run,
    result array) against the same call made from C++ on the same compiled
    function (its arguments converted once): the difference is what Python
    adds;
  - Program.run (the ahead-of-time path, inputs by name), numpy's x + 1;
  - torch.compile's and jax.jit's calls of the same function, when installed.
Medians and p90 per call, the rows timed in turn over five rounds; --busy N
times everything again beside N compile jobs.
    bench/run-python-llama --overhead [--busy N]"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import tensorjit as tj

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_numpy import BusyLoad  # noqa: E402


def samples(fn, budget):
    """Per-call seconds of `fn` called for `budget` seconds (at least 5 calls)."""
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def cpp_samples(jit_function, tensors, budget):
    """Per-call seconds of the same call made from C++ (the C++ JIT of a
    tensorjit.jit function with one argument structure), for about `budget`."""
    (jit, _, _), = jit_function._by_structure.values()
    probe = sorted(jit._time_calls(tensors, [], 100))
    return jit._time_calls(tensors, [], max(100, min(2_000_000, int(budget / max(probe[50], 1e-7)))))


def measure(rows, seconds, rounds=5):
    """{name: (median, p90)} over `rounds` rounds in which every row runs in
    turn for seconds/rounds: side by side, so that the machine's moods fall
    on all rows alike. A row is a function to call, ("cpp", jit function,
    arrays) for the same call made from C++, or ("once", f) for a figure f()
    measures itself."""
    pooled = {name: [] for name, _ in rows}
    result = {}
    for _ in range(rounds):
        for name, fn in rows:
            if isinstance(fn, tuple) and fn[0] == "once":
                continue
            if isinstance(fn, tuple):
                pooled[name] += cpp_samples(fn[1], fn[2], seconds / rounds)
            else:
                pooled[name] += samples(fn, seconds / rounds)
    for name, fn in rows:
        if isinstance(fn, tuple) and fn[0] == "once":
            result[name] = fn[1]()
        else:
            t = sorted(pooled[name])
            result[name] = t[len(t) // 2], t[min(len(t) - 1, int(len(t) * 0.9))]
    return result


def systems(threads):
    x = np.ones(4, np.float32)
    f = tj.jit(lambda x: x + 1, dynamic=False, name="add_one")
    f(x)
    p = tj.Program.compile(tj.parse_ir("graph g\ninput %x : f32[4]\n%0 = add(%x, %x) : f32[4]\nreturn %0\n"))
    inputs = {"x": x}
    rows = [("tensorjit.jit call", lambda: f(x)), ("the same call from C++", ("cpp", f, [x])),
            ("Program.run (inputs by name)", lambda: p.run(inputs)), ("numpy x + 1", lambda: x + 1)]
    try:
        import torch
        torch.set_num_threads(threads)
        tx = torch.ones(4)
        tf = torch.compile(lambda x: x + 1)
        tf(tx)
        rows.append((f"torch.compile {torch.__version__.split('+')[0]}", lambda: tf(tx)))
    except ImportError:
        print("torch: not installed (bench/setup --torch)")
    try:
        import jax
        jx = jax.device_put(x, jax.devices("cpu")[0])
        jf = jax.jit(lambda x: x + 1)
        jf(jx).block_until_ready()
        rows.append((f"jax.jit {jax.__version__}", lambda: jf(jx).block_until_ready()))
    except ImportError:
        print("jax: not installed (bench/setup --jax)")
    return rows


def parse_args(doc):
    """--seconds S (per row) and --busy N (every row again beside N compile jobs)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0, help="time per row")
    ap.add_argument("--busy", type=int, default=0, help="time every row again beside N compile jobs (0 to 64)")
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy must be in 0..64")
    return args


def main():
    args = parse_args(__doc__)
    rows = systems(int(os.environ.get("TJ_THREADS", "2")))
    runs = [("quiet", measure(rows, args.seconds))]
    if args.busy:
        with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 60 + 4 * args.seconds * len(rows), folder):
            runs.append((f"busy {args.busy}", measure(rows, args.seconds)))
    for label, r in runs:
        print(f"\n{'x + 1 on 4 floats, per call (' + label + ')':44s} {'median us':>10s} {'p90 us':>8s}")
        for name, _ in rows:
            med, p90 = r[name]
            print(f"{name:44s} {med * 1e6:10.2f} {p90 * 1e6:8.2f}")
        py, cpp = r["tensorjit.jit call"], r["the same call from C++"]
        print(f"{'Python over C++ (target <= 5 us)':44s} {(py[0] - cpp[0]) * 1e6:10.2f} {(py[1] - cpp[1]) * 1e6:8.2f}")


if __name__ == "__main__":
    main()
