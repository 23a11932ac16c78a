#!/usr/bin/env python3
"""The first call of torch.compile on zoo models, each backend in a process
of its own (after one eager call, warm compile caches): Dynamo alone
(backend="eager", torch's no-op backend: the floor for any backend),
tensorjit and Inductor. bench/zoo.py times first calls inside one process
per model; this one gives each backend a fresh start.

    bench/first_call.py                            # the zoo's transformers and resnet50
    bench/first_call.py --models gpt2 --repeat 3   # medians of three processes each
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("eager", "tensorjit", "inductor")


def one(name, backend, threads):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from zoo import build
    torch.set_num_threads(threads)
    model, kw = build(name)
    model.eval()
    with torch.no_grad():
        model(**kw)
        if backend == "tensorjit":
            import tensorjit._torch as tjt
            c = torch.compile(model, backend=tjt.backend)
        else:
            c = torch.compile(model, backend=backend)
        t0 = time.perf_counter()
        c(**kw)
        return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert,gpt2,llama,distilbert,vit,deit_tiny_patch16_224,resnet50")
    ap.add_argument("--repeat", type=int, default=1, help="processes per model and backend (the median is printed)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TJ_THREADS", "2")))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(f"FIRST-CALL {one(args.one[0], args.one[1], args.threads)}")
        return 0
    print(f"{'model':24s}" + "".join(f"{b:>12s}" for b in ("Dynamo alone", "tensorjit", "Inductor")) + "   (first call, s)")
    for name in args.models.split(","):
        cells = []
        for b in BACKENDS:
            times = []
            for _ in range(args.repeat):
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, b, "--threads", str(args.threads)],
                                   capture_output=True, text=True)
                line = next((l for l in p.stdout.splitlines() if l.startswith("FIRST-CALL ")), None)
                if line:
                    times.append(float(line.split()[1]))
            cells.append(f"{statistics.median(times):12.2f}" if times else f"{'failed':>12s}")
        print(f"{name:24s}" + "".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
