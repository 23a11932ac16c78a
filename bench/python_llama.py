"""The tiny Llama decode layer (d=128, 8 heads over 2 KV heads, KV cache of
64) from Python, side by side in one run:
  - tensorjit.jit of the layer written in Python (tests/python/test_llama.py),
    with the weights passed as arrays, and frozen (freeze=);
  - the same frozen function's call made from C++ (its arguments converted
    once): what Python adds is the difference;
  - the C++ compiled call of the same layer written in C++ (tjc bench --config
    tiny --mode decode);
  - torch.compile (Inductor) of the layer written in torch, and jax.jit of it
    in jax.numpy (bench/compare_numpy.py's layer; caches donated), when
    installed. Both hold the weights as constants, as freeze= does.
Per call, medians and p90, the rows timed in turn over five rounds; --busy N
times every row again beside N compile jobs; --overhead runs
bench/python_overhead.py instead.
    bench/run-python-llama [--busy N] [--overhead]"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "python"))
sys.path.insert(0, os.path.join(root, "bench"))
import tensorjit as tj  # noqa: E402
from compare_numpy import BusyLoad, layer  # noqa: E402
from python_overhead import measure, parse_args  # noqa: E402
from test_llama import CFG, llama_layer  # noqa: E402

S = 64
args = parse_args(__doc__)
threads = int(os.environ.get("TJ_THREADS", "2"))

rng = np.random.default_rng(0)
d, ffn, hd = CFG["d"], CFG["ffn"], CFG["head_dim"]
q, kv = CFG["heads"] * hd, CFG["kv_heads"] * hd
shapes = dict(attn_norm=(d,), wq=(d, q), wk=(d, kv), wv=(d, kv), wo=(q, d), mlp_norm=(d,), w_gate=(d, ffn), w_up=(d, ffn), w_down=(ffn, d))
w = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for k, s in shapes.items()}
freq = 10000.0 ** (-2.0 * np.arange(hd // 2) / hd)
ang = np.arange(CFG["max_pos"])[:, None] * freq[None, :]
cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
kc = np.zeros((1, CFG["kv_heads"], S, hd), np.float32)
vc = np.zeros_like(kc)
x = rng.standard_normal((1, 1, d)).astype(np.float32)
pos = np.array(10, dtype=np.int64)
rows = [("tensorjit.jit (Python layer)", lambda: llama_layer(x, pos, kc, vc, w, cos, sin))]
frozen = tj.jit(llama_layer.__wrapped__, freeze=("w", "rope_cos", "rope_sin"), name="llama_frozen")
same = np.abs(frozen(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0] - llama_layer(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0]).max()
print(f"max |frozen - not frozen| = {same:.2e}")
rows.append(("tensorjit.jit, weights frozen", lambda: frozen(x, pos, kc, vc, w, cos, sin)))
rows.append(("the same frozen call from C++", ("cpp", frozen, [x, pos, kc, vc])))

tjc = os.path.join(root, "build", "tjc")
if os.path.exists(tjc):
    def tjc_bench():
        r = subprocess.run([tjc, "bench", "--config", "tiny", "--mode", "decode", "--kv-len", str(S), "--seconds", str(args.seconds), "--json"],
                           capture_output=True, text=True, check=True)
        j = json.loads(r.stdout)
        return j["compiled_us"] * 1e-6, j["compiled_p90_us"] * 1e-6
    rows.append(("C++ layer, compiled (tjc bench)", ("once", tjc_bench)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
    print("torch: not installed (bench/setup --torch)")
if torch is not None:
    torch.set_num_threads(threads)
    tw = {k: torch.from_numpy(v) for k, v in w.items()}
    tcos, tsin = torch.from_numpy(cos), torch.from_numpy(sin)
    H, Hkv = CFG["heads"], CFG["kv_heads"]

    def torch_layer(x, pos, k_cache, v_cache):
        B, T, D = x.shape
        rms = lambda t, g: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + CFG["eps"]) * g
        heads = lambda t, n: t.view(B, T, n, hd).transpose(1, 2)
        h = rms(x, tw["attn_norm"])
        q, k, v = heads(h @ tw["wq"], H), heads(h @ tw["wk"], Hkv), heads(h @ tw["wv"], Hkv)
        c, s = tcos[pos:pos + T], tsin[pos:pos + T]
        rope = lambda t: torch.cat([t[..., :hd // 2] * c - t[..., hd // 2:] * s, t[..., hd // 2:] * c + t[..., :hd // 2] * s], -1)
        q, k = rope(q), rope(k)
        k_cache[:, :, pos:pos + T] = k
        v_cache[:, :, pos:pos + T] = v
        mask = torch.arange(S)[None, :] <= pos + torch.arange(T)[:, None]
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask, enable_gqa=True)
        h1 = x + a.transpose(1, 2).reshape(B, T, H * hd) @ tw["wo"]
        h2 = rms(h1, tw["mlp_norm"])
        return h1 + (F.silu(h2 @ tw["w_gate"]) * (h2 @ tw["w_up"])) @ tw["w_down"]

    compiled = torch.compile(torch_layer)
    tx, tk, tv = torch.from_numpy(x), torch.from_numpy(kc.copy()), torch.from_numpy(vc.copy())
    with torch.no_grad():
        ours = llama_layer(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0]
        theirs = compiled(tx, 10, tk, tv).numpy()
        print(f"max |tensorjit - torch.compile| = {np.abs(ours - theirs).max():.2e}")

    def torch_step():
        with torch.no_grad():
            compiled(tx, 10, tk, tv)
    rows.append((f"torch.compile {torch.__version__.split('+')[0]} (Inductor)", torch_step))

try:
    import jax
except ImportError:
    jax = None
    print("jax: not installed (bench/setup --jax)")
if jax is not None:
    cpu = jax.devices("cpu")[0]
    jw = {k: jax.device_put(v, cpu) for k, v in w.items()}
    jw["rope_cos"], jw["rope_sin"] = jax.device_put(cos, cpu), jax.device_put(sin, cpu)
    cfg = (d, CFG["heads"], CFG["kv_heads"], hd, ffn, CFG["eps"])
    update = lambda cache, rows, p: jax.lax.dynamic_update_slice(cache, rows, (0, 0, p, 0))
    jf = jax.jit(lambda x, p, k, v: layer(jax.numpy, jw, x, p, k, v, cfg, update), donate_argnums=(2, 3))
    jstate = [jax.device_put(x, cpu), jax.device_put(np.int32(10), cpu), jax.device_put(kc.copy(), cpu), jax.device_put(vc.copy(), cpu)]
    y, jstate[2], jstate[3] = jf(*jstate)
    ours = llama_layer(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0]
    print(f"max |tensorjit - jax.jit| = {np.abs(ours - np.asarray(y)).max():.2e}")

    def jax_step():  # a decode loop's step: the donated caches come back
        y, jstate[2], jstate[3] = jf(*jstate)
        y.block_until_ready()
    rows.append((f"jax.jit {jax.__version__} (caches donated)", jax_step))


runs = [("quiet", measure(rows, args.seconds))]
if args.busy:
    with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 120 + 8 * args.seconds * len(rows), folder):
        runs.append((f"busy {args.busy}", measure(rows, args.seconds)))
base = "tensorjit.jit, weights frozen"
for label, r in runs:
    print(f"\n{'tiny Llama decode layer (' + label + ')':44s} {'median us':>10s} {'p90 us':>8s} {'vs frozen':>10s}")
    for name, _ in rows:
        med, p90 = r[name]
        print(f"{name:44s} {med * 1e6:10.2f} {p90 * 1e6:8.2f} {med / r[base][0]:9.2f}x")
    py, cpp = r[base], r["the same frozen call from C++"]
    print(f"{'Python over C++, frozen (target <= 5 us)':44s} {(py[0] - cpp[0]) * 1e6:10.2f} {(py[1] - cpp[1]) * 1e6:8.2f}")
    print(f"{'frozen / C++ (target <= 1.2x)':44s} {py[0] / cpp[0]:9.2f}x")
