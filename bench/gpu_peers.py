#!/usr/bin/env python3
"""The Llama layer on a CUDA GPU in PyTorch: eager, torch.compile (default) and
torch.compile(mode="reduce-overhead", CUDA Graphs), per call, for the
scripts/gpu-check report beside tensorjit's `tjc bench --device cuda`.

    bench/gpu_peers.py --config llama3-8b --dtype bf16 --mode decode --kv-len 512
    bench/gpu_peers.py --config llama3-8b --dtype bf16 --mode prefill --tokens 128

The layer is the one of bench/compare_numpy.py (RMSNorm, grouped-query
attention with rotary embeddings over a KV cache written in place, SwiGLU
MLP; its pieces are compare_numpy.py's), its weights random with the config's shapes, on the GPU. Times are
CUDA-event times of one call, after warm-up: the median and the 90th
percentile over `--calls` calls. Prints one JSON object.
"""
import argparse
import json
import math
import statistics

from compare_numpy import torch_heads, torch_rope  # the layer's pieces, as the CPU comparison has them

CONFIGS = {  # dim, heads, kv heads, head dim, ffn
    "tiny": (128, 8, 2, 16, 344),
    "tinyllama": (2048, 32, 4, 64, 5632),
    "llama3-8b": (4096, 32, 8, 128, 14336),
}


def layer(torch, w, x, pos, kc, vc, cfg, eps=1e-5):
    d, hq, hkv, hd, ffn = cfg
    B, T, _ = x.shape
    S = kc.shape[2]
    group = hq // hkv

    def rms(v, g):
        v32 = v.float()
        return (v32 * torch.rsqrt((v32 * v32).mean(dim=-1, keepdim=True) + eps)).to(v.dtype) * g

    h = rms(x, w["attn_norm"])
    q, k, v = torch_heads(h @ w["wq"], hq, hd), torch_heads(h @ w["wk"], hkv, hd), torch_heads(h @ w["wv"], hkv, hd)
    c, s = w["rope_cos"][pos:pos + T], w["rope_sin"][pos:pos + T]
    q, k = torch_rope(torch, q, c, s), torch_rope(torch, k, c, s)
    kc[:, :, pos:pos + T] = k
    vc[:, :, pos:pos + T] = v
    allowed = torch.arange(S, device=x.device)[None, :] <= pos + torch.arange(T, device=x.device)[:, None]
    attn = torch.nn.functional.scaled_dot_product_attention(q, kc, vc, attn_mask=allowed, enable_gqa=group > 1)
    h1 = x + attn.transpose(1, 2).reshape(B, T, hq * hd) @ w["wo"]
    h2 = rms(h1, w["mlp_norm"])
    return h1 + (torch.nn.functional.silu(h2 @ w["w_gate"]) * (h2 @ w["w_up"])) @ w["w_down"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="llama3-8b", choices=sorted(CONFIGS))
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--mode", default="decode", choices=["decode", "prefill"])
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--kv-len", type=int, default=512)
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_peers.py: no CUDA device for torch")
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    cfg = CONFIGS[args.config]
    d, hq, hkv, hd, ffn = cfg
    T = 1 if args.mode == "decode" else args.tokens
    S = args.kv_len if args.mode == "decode" else args.tokens
    pos = S - T
    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape, scale):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dt)

    w = {"attn_norm": rand(d, scale=0.1) + 1, "mlp_norm": rand(d, scale=0.1) + 1,
         "wq": rand(d, hq * hd, scale=d ** -0.5), "wk": rand(d, hkv * hd, scale=d ** -0.5), "wv": rand(d, hkv * hd, scale=d ** -0.5),
         "wo": rand(hq * hd, d, scale=(hq * hd) ** -0.5), "w_gate": rand(d, ffn, scale=d ** -0.5), "w_up": rand(d, ffn, scale=d ** -0.5),
         "w_down": rand(ffn, d, scale=ffn ** -0.5)}
    angles = torch.arange(S + T, device="cuda")[:, None] * (10000.0 ** (-torch.arange(0, hd // 2, device="cuda") * 2.0 / hd))[None, :]
    w["rope_cos"], w["rope_sin"] = torch.cos(angles).to(dt), torch.sin(angles).to(dt)
    x = rand(1, T, d, scale=1.0)
    kc, vc = rand(1, hkv, S, hd, scale=1.0), rand(1, hkv, S, hd, scale=1.0)

    def timed(f):
        with torch.inference_mode():
            for _ in range(10):
                f()
            torch.cuda.synchronize()
            times = []
            for _ in range(args.calls):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1e3)
        times.sort()
        return {"median_us": statistics.median(times), "p90_us": times[int(0.9 * (len(times) - 1))]}

    eager = lambda: layer(torch, w, x, pos, kc, vc, cfg)  # noqa: E731
    rows = {"torch eager": timed(eager)}
    for name, mode in (("torch.compile", "default"), ("torch.compile reduce-overhead", "reduce-overhead")):
        fn = torch.compile(lambda x, kc, vc: layer(torch, w, x, pos, kc, vc, cfg), mode=mode)
        rows[name] = timed(lambda: fn(x, kc, vc))
    weight_bytes = sum(v.numel() * v.element_size() for k, v in w.items() if k.startswith("w"))
    print(json.dumps({"config": args.config, "dtype": args.dtype, "mode": args.mode, "tokens": T, "kv_len": S, "device": torch.cuda.get_device_name(),
                      "torch": torch.__version__, "weight_bytes": weight_bytes, "rows": rows}))


if __name__ == "__main__":
    main()
