#!/usr/bin/env python3
"""Autotuned kernels against the rules' schedules (docs/results.md).

    bench/run-autotune                # quiet
    bench/run-autotune --busy 2       # each row again beside 2 compile jobs

Per row, `tjc bench --autotune --json`: in one process, the program with its
GEMVs' and attentions' schedules measured on this machine against the same
program with the emitter's rules, in interleaved rounds (median, p90); the
first compilation's measuring time; a second compilation, which takes every
choice from the tuning cache (measured: 0 expected). The tuning cache is a
fresh folder per run, so every row measures.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_numpy import ROOT, BusyLoad  # noqa: E402

ROWS = [
    ("tinyllama layer decode KV 512, f32", ["--model", "llama-layer", "--config", "tinyllama", "--mode", "decode", "--kv-len", "512"]),
    ("tinyllama layer decode KV 512, bf16", ["--model", "llama-layer", "--config", "tinyllama", "--mode", "decode", "--kv-len", "512",
                                             "--weights", "bf16"]),
    ("tinyllama layer decode KV 512, int8", ["--model", "llama-layer", "--config", "tinyllama", "--mode", "decode", "--kv-len", "512",
                                             "--weights", "int8"]),
    ("tinyllama layer prefill 128", ["--model", "llama-layer", "--config", "tinyllama", "--mode", "prefill", "--tokens", "128"]),
    ("minilm-size layer decode KV 128", ["--model", "llama-layer", "--config", "minilm-size", "--mode", "decode", "--kv-len", "128"]),
    ("tiny llama (2 layers) decode KV 64", ["--model", "llama", "--config", "tiny", "--mode", "decode", "--kv-len", "64"]),
]


def run_row(args, flags, busy):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TJ_CACHE_DIR=cache)
        cmd = [args.tjc, "bench", *flags, "--autotune", "--seconds", str(args.seconds), "--json"]
        if busy:
            with BusyLoad(busy, 900, cache):
                r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        else:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"tjc bench failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)["autotune"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--busy", type=int, default=0, help="each row again beside N compile jobs (0 to 64)")
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy: 0 to 64")
    print(f"{'row':38s} {'load':6s} {'rules us':>9s} {'p90':>8s} {'tuned us':>9s} {'p90':>8s} {'speedup':>8s} {'tunable':>7s} "
          f"{'tuning s':>8s} {'2nd: measured':>13s}  choices that differ from the rules'")
    for name, flags in ROWS:
        for busy in ([0, args.busy] if args.busy else [0]):
            a = run_row(args, flags, busy)
            first, second = a["first_compile"], a["second_compile"]
            changed = [c for c in second["choices"] if "(rule:" in c]
            print(f"{name:38s} {'busy ' + str(busy) if busy else 'quiet':6s} {a['rule_median_us']:9.1f} {a['rule_p90_us']:8.1f} "
                  f"{a['tuned_median_us']:9.1f} {a['tuned_p90_us']:8.1f} {a['speedup']:7.2f}x {first['tunable_kernels']:7d} "
                  f"{first['tuning_seconds']:8.2f} {second['measured']:13d}  {'; '.join(changed) or '-'}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
