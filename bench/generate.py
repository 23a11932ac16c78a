#!/usr/bin/env python3
"""model.generate() with transformers' StaticCache under torch.compile:
greedy decoding of 32 new tokens from a 16-token prompt by the GPT-2 and
Llama configurations of bench/zoo.py (random weights, batch 1), eager,
through backend="tensorjit" and through Inductor, one process per system.
Prints whether the tokens are eager's, how many graphs each compiled
(Dynamo's count), the first call's time and tokens per second (decode
only: the run after a warm-up).

    bench/generate.py                      # both models, all three
    bench/generate.py --models gpt2 --new-tokens 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def run_one(name, system, args):
    import torch
    from transformers import CompileConfig
    from zoo import build
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TJ_NUM_THREADS", str(args.threads))
    model, kw = build(name)
    model.eval()
    prompt = kw["input_ids"][:, :args.prompt]
    gen = dict(max_new_tokens=args.new_tokens, do_sample=False, cache_implementation="static", min_new_tokens=args.new_tokens)
    if system == "eager":
        gen["disable_compile"] = True
    else:
        backend = "inductor"
        if system == "tensorjit":
            sys.path.insert(0, os.path.join(ROOT, "build", "python"))
            import tensorjit._torch as tjt
            backend = tjt.backend
        cc = CompileConfig(backend=backend, mode=None if system == "tensorjit" else "default", fullgraph=False)
        cc._compile_all_devices = True
        gen["compile_config"] = cc
    from torch._dynamo.utils import counters
    counters.clear()
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.generate(prompt, **gen)
        first = time.perf_counter() - t0
        graphs = counters["stats"]["unique_graphs"]
        t0 = time.perf_counter()
        out2 = model.generate(prompt, **gen)
        second = time.perf_counter() - t0
    new = out[0, prompt.shape[1]:].tolist()
    return {"model": name, "system": system, "tokens": new, "same_twice": out2.tolist() == out.tolist(), "graphs": graphs,
            "first_s": first, "tokens_per_s": args.new_tokens / second, "recompiled_on_second": counters["stats"]["unique_graphs"] - graphs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--systems", default="eager,tensorjit,inductor")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TJ_THREADS", "2")))
    ap.add_argument("--json")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        try:
            r = run_one(args.one[0], args.one[1], args)
        except Exception as e:  # noqa: BLE001
            r = {"model": args.one[0], "system": args.one[1], "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        print("GEN-RESULT " + json.dumps(r))
        return 0
    rows = []
    for name in args.models.split(","):
        for system in args.systems.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--one", name, system, "--new-tokens", str(args.new_tokens),
                   "--prompt", str(args.prompt), "--threads", str(args.threads)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            line = next((l for l in p.stdout.splitlines() if l.startswith("GEN-RESULT ")), None)
            rows.append(json.loads(line[11:]) if line else {"model": name, "system": system, "error": (p.stderr.strip().splitlines() or ["?"])[-1]})
    print(f"{'model':8s} {'system':10s} {'tokens':>12s} {'graphs':>6s} {'first s':>8s} {'tok/s':>8s} {'vs eager':>9s} {'vs inductor':>11s}")
    for name in args.models.split(","):
        ref = next((r for r in rows if r["model"] == name and r["system"] == "eager" and "tokens" in r), None)
        ind = next((r for r in rows if r["model"] == name and r["system"] == "inductor" and "tokens" in r), None)
        for r in [r for r in rows if r["model"] == name]:
            if "error" in r:
                print(f"{name:8s} {r['system']:10s} FAILED: {r['error']}")
                continue
            same = "eager's" if ref and r["tokens"] == ref["tokens"] else "DIFFER"
            if r["system"] == "eager":
                same = f"{len(r['tokens'])} new"
            vs = lambda o: f"{r['tokens_per_s'] / o['tokens_per_s']:.2f}x" if o else "-"  # noqa: E731
            print(f"{name:8s} {r['system']:10s} {same:>12s} {r['graphs']:6d} {r['first_s']:8.1f} {r['tokens_per_s']:8.1f} {vs(ref):>9s} {vs(ind):>11s}"
                  + ("" if r["same_twice"] else "  (second run differs)") + (f"  (+{r['recompiled_on_second']} graphs on the second run)" if r["recompiled_on_second"] else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
