#!/usr/bin/env python3
"""The Llama layer in numpy (and PyTorch, when it is installed) against
tensorjit's compiled code, on the same inputs and weights, in one run.

    bench/compare_numpy.py --config tiny --mode decode --kv-len 64
    bench/compare_numpy.py --config tinyllama --mode prefill --tokens 128

`tjc bench --dump DIR` writes the inputs, the weights and the compiled
outputs; this script runs the same layer written with numpy (float32, one
BLAS call per matmul) and, if `import torch` works, with PyTorch eager ops
(float32, inference mode, its default threads), checks that the outputs
agree, and prints the median times side by side with tjc's own figures. Run
it through bench/run-compare, which makes a venv with numpy first
(`bench/setup --torch` adds PyTorch: a large download).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {  # d, heads, kv heads, head dim, ffn, eps (must match src/models/llama.cpp)
    "tiny": (128, 8, 2, 16, 344, 1e-5),
    "tinyllama": (2048, 32, 4, 64, 5632, 1e-5),
    "llama3-8b": (4096, 32, 8, 128, 14336, 1e-5),
}


def layer(xp, w, x, pos, kc, vc, cfg):
    """One decoder layer, as the tensorjit model defines it (x @ W with W [in, out])."""
    d, hq, hkv, hd, ffn, eps = cfg
    B, T, _ = x.shape
    S = kc.shape[2]
    group = hq // hkv

    def rms(v, g):
        return v / xp.sqrt((v * v).mean(axis=-1, keepdims=True) + eps) * g

    def mm(a, m):  # 2-D products, numpy's fastest path to BLAS
        return (a.reshape(-1, a.shape[-1]) @ m).reshape(*a.shape[:-1], m.shape[1])

    def heads(v, n):
        return v.reshape(B, T, n, hd).transpose(0, 2, 1, 3)

    def rope(v, c, s):
        half = hd // 2
        v1, v2 = v[..., :half], v[..., half:]
        return xp.concatenate([v1 * c - v2 * s, v2 * c + v1 * s], axis=-1)

    h = rms(x, w["attn_norm"])
    q, k, v = heads(mm(h, w["wq"]), hq), heads(mm(h, w["wk"]), hkv), heads(mm(h, w["wv"]), hkv)
    positions = pos + np.arange(T)
    c, s = w["rope_cos"][positions], w["rope_sin"][positions]
    q, k = rope(q, c, s), rope(k, c, s)
    kc[:, :, pos:pos + T] = k  # in place, like tensorjit's donated cache
    vc[:, :, pos:pos + T] = v
    kx = xp.repeat(kc, group, axis=1) if group > 1 else kc
    vx = xp.repeat(vc, group, axis=1) if group > 1 else vc
    scores = (q @ kx.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(hd))
    mask = np.where(np.arange(S)[None, :] <= pos + np.arange(T)[:, None], 0.0, -np.inf).astype(x.dtype)
    scores = scores + mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = xp.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    attn = (p @ vx).transpose(0, 2, 1, 3).reshape(B, T, hq * hd)
    h1 = x + mm(attn, w["wo"])
    h2 = rms(h1, w["mlp_norm"])
    gate = mm(h2, w["w_gate"])
    m = mm(gate / (1 + xp.exp(-gate)) * mm(h2, w["w_up"]), w["w_down"])
    return h1 + m, kc, vc


def layer_torch(torch, w, x, pos, kc, vc, cfg):
    """The same layer with PyTorch eager ops (w, x, kc, vc are torch tensors)."""
    d, hq, hkv, hd, ffn, eps = cfg
    B, T, _ = x.shape
    S = kc.shape[2]
    group = hq // hkv

    def rms(v, g):
        return v / torch.sqrt((v * v).mean(dim=-1, keepdim=True) + eps) * g

    def heads(v, n):
        return v.view(B, T, n, hd).transpose(1, 2)

    def rope(v, c, s):
        half = hd // 2
        v1, v2 = v[..., :half], v[..., half:]
        return torch.cat([v1 * c - v2 * s, v2 * c + v1 * s], dim=-1)

    h = rms(x, w["attn_norm"])
    q, k, v = heads(h @ w["wq"], hq), heads(h @ w["wk"], hkv), heads(h @ w["wv"], hkv)
    positions = torch.arange(pos, pos + T)
    c, s = w["rope_cos"][positions], w["rope_sin"][positions]
    q, k = rope(q, c, s), rope(k, c, s)
    kc[:, :, pos:pos + T] = k
    vc[:, :, pos:pos + T] = v
    kx = kc.repeat_interleave(group, dim=1) if group > 1 else kc
    vx = vc.repeat_interleave(group, dim=1) if group > 1 else vc
    scores = (q @ kx.transpose(-1, -2)) * (1.0 / np.sqrt(hd))
    allowed = torch.arange(S)[None, :] <= pos + torch.arange(T)[:, None]
    scores = scores.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    attn = (p @ vx).transpose(1, 2).reshape(B, T, hq * hd)
    h1 = x + attn @ w["wo"]
    h2 = rms(h1, w["mlp_norm"])
    gate = h2 @ w["w_gate"]
    m = (torch.nn.functional.silu(gate) * (h2 @ w["w_up"])) @ w["w_down"]
    return h1 + m, kc, vc


def max_rel(got, want):
    return max(float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)) for a, b in zip(got, want))


def median_seconds(f, budget=2.0, min_runs=3):
    times, start = [], time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--mode", default="decode", choices=["prefill", "decode"])
    ap.add_argument("--tokens", default="16")
    ap.add_argument("--kv-len", default="")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    args = ap.parse_args()
    cfg = CONFIGS[args.config]

    with tempfile.TemporaryDirectory() as dump:
        cmd = [args.tjc, "bench", "--model", "llama-layer", "--config", args.config, "--mode", args.mode, "--json",
               "--dump", dump, "--seconds", str(args.seconds)]
        if args.mode == "prefill":
            cmd += ["--tokens", args.tokens]
        if args.kv_len:
            cmd += ["--kv-len", args.kv_len]
        tj = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        arrays = {f[:-4]: np.load(os.path.join(dump, f)) for f in os.listdir(dump) if f.endswith(".npy")}

    x, pos = arrays["x"], int(arrays["pos"])
    fresh = lambda: (arrays["k_cache"].copy(), arrays["v_cache"].copy())
    y, kc, vc = layer(np, arrays, x, pos, *fresh(), cfg)
    got = [arrays["output0"], arrays["output1"], arrays["output2"]]
    rel = max_rel(got, [y, kc, vc])
    caches = fresh()
    t_np = median_seconds(lambda: layer(np, arrays, x, pos, caches[0], caches[1], cfg), args.seconds)

    print(f"llama-layer {args.config} {args.mode} (f32): tensorjit compiled vs numpy max rel diff {rel:.2e}")
    print(f"  tensorjit interpreter {tj['interpreter_us']:12.1f} us")
    print(f"  tensorjit compiled    {tj['compiled_us']:12.1f} us")
    print(f"  numpy {np.__version__:<15} {t_np * 1e6:12.1f} us   compiled is {t_np * 1e6 / tj['compiled_us']:.2f}x faster")
    worst = rel
    try:
        import torch
    except ImportError:
        print("  PyTorch: not installed (bench/setup --torch installs it)")
    else:
        tw = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
        tfresh = lambda: (tw["k_cache"].clone(), tw["v_cache"].clone())
        with torch.inference_mode():
            ty, tkc, tvc = layer_torch(torch, tw, tw["x"], pos, *tfresh(), cfg)
            trel = max_rel(got, [ty.numpy(), tkc.numpy(), tvc.numpy()])
            tcaches = tfresh()
            t_pt = median_seconds(lambda: layer_torch(torch, tw, tw["x"], pos, tcaches[0], tcaches[1], cfg), args.seconds)
        print(f"  torch {torch.__version__:<15} {t_pt * 1e6:12.1f} us   compiled is {t_pt * 1e6 / tj['compiled_us']:.2f}x faster"
              f"   (max rel diff {trel:.2e}, {torch.get_num_threads()} threads)")
        worst = max(worst, trel)
    if worst > 1e-4:
        sys.exit(f"outputs disagree: max relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
