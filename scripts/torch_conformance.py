"""PyTorch's own samples as the torch backend's conformance check
(scripts/torch-conformance runs this in the bench venv).

For every OpInfo of torch's op database (op_db, the samples torch tests
its own ops with) that supports float32 on the CPU, each sample is wrapped
in a function compiled with torch.compile(backend=tensorjit,
fullgraph=True, dynamic=False) and compared with eager at torch's float32
tolerances (rtol 1.3e-6, atol 1e-5; wider where the OpInfo overrides
them). tensorjit runs strictly: an op without a row is an error, not an
eager fallback. A sample is

  passed       the outputs match;
  failed       they do not, or something other than a clear refusal broke;
  unsupported  tensorjit refused it with an error naming the op and node
               (no row, or arguments the row does not lower);
  skipped      torch itself could not run it (eager or Dynamo failed).

By default the graphs run on tensorjit's reference interpreter (what the
lowering means); --compiled runs the generated code (slower: a C++
compile per sample).

    scripts/torch-conformance                      # every op, a table
    scripts/torch-conformance --filter '^(add|conv)'
    scripts/torch-conformance --json out.json --markdown docs-table.md
    scripts/torch-conformance --require tests/data/torch/passing.txt   # exit 1 on a regression
    scripts/torch-conformance --jobs 2          # two processes, a share of the ops each
    scripts/torch-conformance --write-baseline tests/data/torch/passing.txt
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def tolerances(op):
    """(rtol, atol) for float32: torch's defaults, or the widest override the OpInfo declares."""
    import torch
    rtol, atol = 1.3e-6, 1e-5
    for d in getattr(op, "decorators", ()) or ():
        dec = getattr(d, "decorators", None) or [d]
        for x in dec if isinstance(dec, (list, tuple)) else [dec]:
            over = getattr(x, "d", None)
            if isinstance(over, dict) and torch.float32 in over:
                t = over[torch.float32]
                if isinstance(t, float):  # precisionOverride: an atol
                    atol = max(atol, t)
                else:  # toleranceOverride: tol(atol, rtol)
                    rtol, atol = max(rtol, t.rtol), max(atol, t.atol)
    return rtol, atol


def flatten(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        r = []
        for o in out:
            r.extend(flatten(o))
        return r
    if hasattr(out, "_fields"):
        return flatten(tuple(out))
    return [out]


# Ops whose values are unspecified (uninitialized memory): shapes and dtypes only.
UNSPECIFIED = ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted")


def compare(got, want, rtol, atol, values=True):
    import torch
    g, w = flatten(got), flatten(want)
    if len(g) != len(w):
        return f"{len(g)} outputs, eager has {len(w)}"
    for a, b in zip(g, w):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"a {type(a).__name__} where eager has a tensor"
            if a.dtype != b.dtype:
                return f"dtype {a.dtype}, eager {b.dtype}"
            if a.shape != b.shape:
                return f"shape {tuple(a.shape)}, eager {tuple(b.shape)}"
            if not values:
                continue
            try:
                torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
            except AssertionError as e:
                return " ".join(str(e).split())[:240]
        elif isinstance(b, float) and isinstance(a, (float, int)):
            if not (abs(a - b) <= atol + rtol * abs(b) or (a != a and b != b)):
                return f"{a} where eager has {b}"
        elif a != b:
            return f"{a!r} where eager has {b!r}"
    return None


def refusal(e):
    """A clear refusal of tensorjit's naming the op (unsupported), or None."""
    from tensorjit import _core
    from tensorjit._torch.aten import Unsupported
    from tensorjit._torch.lower import LoweringError
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (LoweringError, Unsupported, _core.UnsupportedOperand, _core.Unsupported)):
            return str(e).splitlines()[0][:240]
        e = e.__cause__ or e.__context__
    return None


def run_sample(op, sample, options, rtol, atol):
    import torch
    import tensorjit._torch as tjt

    def fn(x, args, kwargs):
        return op(x, *args, **kwargs)

    try:
        with torch.no_grad():
            want = fn(sample.input, sample.args, sample.kwargs)
    except Exception as e:  # noqa: BLE001
        return "skipped", f"eager: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    torch._dynamo.reset()
    c = torch.compile(fn, backend=tjt.backend, fullgraph=True, dynamic=False, options=options)
    try:
        with torch.no_grad():
            got = c(sample.input, sample.args, sample.kwargs)
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        why = refusal(e)
        if why:
            return "unsupported", why
        text = f"{type(e).__name__}: {str(e).splitlines()[0][:240] if str(e) else ''}"
        if "torch._dynamo" in type(e).__module__ or "Unsupported" in type(e).__name__ and "dynamo" in repr(type(e)):
            return "skipped", "dynamo: " + text
        return "failed", text
    bad = compare(got, want, rtol, atol, values=op.name not in UNSPECIFIED)
    if bad and closer_to_f64(fn, sample, got, want):
        return "passed", "eager's f32 result is farther from the f64 one than tensorjit's"
    return ("failed", bad) if bad else ("passed", "")


def closer_to_f64(fn, sample, got, want):
    """Whether every floating tensor of `got` is at least as close as eager's
    `want` to eager's result on the inputs in f64 (as Inductor's accuracy
    check uses an fp64 reference): eager's own f32 error, not tensorjit's,
    broke the tolerance. False where f64 does not run."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    def f64(x):
        return x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
    try:
        with torch.no_grad():
            ref = fn(f64(sample.input), tree_map(f64, sample.args), tree_map(f64, sample.kwargs))
    except Exception:  # noqa: BLE001
        return False
    gs, ws, rs = (tree_flatten(x)[0] for x in (got, want, ref))
    if not (len(gs) == len(ws) == len(rs)):
        return False
    floats = 0
    for g, w, r in zip(gs, ws, rs):
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            continue
        if not isinstance(g, torch.Tensor) or not isinstance(r, torch.Tensor) or g.shape != r.shape or w.shape != r.shape:
            return False
        floats += 1
        mine, eager = (g.double() - r).abs().nan_to_num(), (w.double() - r).abs().nan_to_num()
        if mine.max() > eager.max():
            return False
    return floats > 0


def run_ops(args, shard=(0, 1)):
    """The OpInfos of this shard (their index in op_db modulo shard[1]):
    per op (name, samples, counts, first reason of each status), and per sample a result."""
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    torch.set_num_threads(int(os.environ.get("TJ_THREADS", "2")))
    options = {"eager_fallback": False, "interpret": not args.compiled, "freeze_parameters": False}
    pattern = re.compile(args.filter)
    signal.signal(signal.SIGALRM, _alarm)
    rows, results = [], []
    for index, op in enumerate(op_db):
        if index % shard[1] != shard[0]:
            continue
        name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if not pattern.search(name):
            continue
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        rtol, atol = tolerances(op)
        counts = {"passed": 0, "failed": 0, "unsupported": 0, "skipped": 0}
        first_reason = {}
        try:
            torch.manual_seed(0)  # the samples' values are random: the same ones every run
            samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))
        except Exception as e:  # noqa: BLE001
            print(f"{name}: the samples could not be made: {e}", file=sys.stderr)
            continue
        if args.max_samples:
            samples = samples[:args.max_samples]
        for k, s in enumerate(samples):
            signal.alarm(args.timeout)
            try:
                status, why = run_sample(op, s, options, rtol, atol)
            except Timeout:
                status, why = "failed", f"timed out after {args.timeout} s"
            except Exception as e:  # noqa: BLE001
                status, why = "failed", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            finally:
                signal.alarm(0)
            counts[status] += 1
            first_reason.setdefault(status, why)
            results.append({"op": name, "sample": k, "status": status, "why": why})
            if args.v > 1 or (args.v and status in ("failed",)):
                print(f"  {name}[{k}] {status} {why}", file=sys.stderr)
        rows.append((index, name, len(samples), counts, first_reason))
        if args.jobs <= 1:
            print_row(rows[-1])
    return rows, results


def print_row(row):
    _, name, n, counts, _ = row
    total = max(n, 1)
    print(f"{name:40s} {n:5d} {counts['passed']:6d} {counts['failed']:6d} {counts['unsupported']:6d} {counts['skipped']:6d}"
          f"  {100 * counts['passed'] / total:5.1f}%", flush=True)


def run_sharded(args):
    """--jobs N: N processes, each a shard of the ops; their rows merged in op_db's order."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        procs = []
        for k in range(args.jobs):
            out = os.path.join(d, f"shard{k}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--shard", f"{k}/{args.jobs}", "--shard-out", out, "--filter", args.filter,
                   "--max-samples", str(args.max_samples), "--timeout", str(args.timeout)] + (["--compiled"] if args.compiled else []) + \
                ["-v"] * args.v
            procs.append((subprocess.Popen(cmd, env=dict(os.environ, TJ_NUM_THREADS="1", OMP_NUM_THREADS="1")), out))
        rows, results = [], []
        for p, out in procs:
            if p.wait() != 0:
                sys.exit(f"torch_conformance: a shard failed (status {p.returncode})")
            with open(out) as f:
                part = json.load(f)
            rows += [tuple(r) for r in part["rows"]]
            results += part["results"]
    rows.sort(key=lambda r: r[0])
    order = {r[1]: r[0] for r in rows}
    results.sort(key=lambda r: (order.get(r["op"], 0), r["sample"]))
    for r in rows:
        print_row(r)
    return rows, results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", default="", help="regex on the OpInfo name (name.variant)")
    ap.add_argument("--max-samples", type=int, default=0, help="at most this many samples per op (0: all)")
    ap.add_argument("--compiled", action="store_true", help="run generated code, not the interpreter")
    ap.add_argument("--jobs", type=int, default=1, help="processes, each running a share of the ops (one thread each)")
    ap.add_argument("--json", help="per-sample results as JSON")
    ap.add_argument("--markdown", help="the per-op table as markdown")
    ap.add_argument("--require", help="a baseline: every sample listed must pass")
    ap.add_argument("--write-baseline", help="write the passing samples here")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per sample")
    ap.add_argument("-v", action="count", default=0)
    ap.add_argument("--shard", help=argparse.SUPPRESS)
    ap.add_argument("--shard-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        args.jobs = n
        rows, results = run_ops(args, (k, n))
        with open(args.shard_out, "w") as f:
            json.dump({"rows": rows, "results": results}, f)
        return 0
    t_start = time.time()
    rows, results = run_sharded(args) if args.jobs > 1 else run_ops(args)
    import torch
    rows = [r[1:] for r in rows]
    samples = sum(r[1] for r in rows)
    agg = {k: sum(r[2][k] for r in rows) for k in ("passed", "failed", "unsupported", "skipped")}
    lowered = [r for r in rows if r[2]["passed"] + r[2]["failed"] > 0]
    below = [r for r in lowered if r[2]["passed"] < 0.9 * (r[1] - r[2]["skipped"])]
    print(f"{'total':40s} {samples:5d} {agg['passed']:6d} {agg['failed']:6d} {agg['unsupported']:6d} {agg['skipped']:6d}")
    print(f"ops: {len(rows)}; with a lowering (a sample lowered): {len(lowered)}; of those below 90% of their samples passing: {len(below)}"
          f"; {time.time() - t_start:.0f} s")
    for name, n, c, why in below:
        print(f"  below 90%: {name}: {c['passed']}/{n - c['skipped']} ({'; '.join(f'{k}: {v}' for k, v in why.items() if k != 'passed')})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| OpInfo | samples | passed | failed | unsupported | skipped |\n|---|---:|---:|---:|---:|---:|\n")
            for name, n, c, _ in rows:
                f.write(f"| {name} | {n} | {c['passed']} | {c['failed']} | {c['unsupported']} | {c['skipped']} |\n")
    if args.write_baseline:
        with open(args.write_baseline, "w") as f:
            f.write(f"# OpInfo samples (torch {torch.__version__}) that pass under torch.compile(backend=tensorjit):\n"
                    "# scripts/torch-conformance --require fails if one of them does not. Regenerate after adding rows.\n")
            for r in results:
                if r["status"] == "passed":
                    f.write(f"{r['op']} {r['sample']}\n")
    if args.require:
        want = set()
        with open(args.require) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    want.add(line)
        got = {f"{r['op']} {r['sample']}": r for r in results}
        lost = [w for w in sorted(want) if w in got and got[w]["status"] != "passed"]
        for w in lost:
            print(f"REGRESSION: {w}: {got[w]['status']}: {got[w]['why']}", file=sys.stderr)
        if lost:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
