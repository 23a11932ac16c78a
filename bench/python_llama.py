"""The tiny Llama decode layer (d=128, 8 heads over 2 KV heads, KV cache of
64) from Python, side by side in one run:
  - tensorjit.jit of the layer written in Python (tests/python/test_llama.py),
    with the weights passed as arrays, and frozen (freeze=);
  - the C++ compiled call of the same layer (tjc bench --config tiny --mode decode);
  - torch.compile (Inductor) of the layer written in torch, when torch is installed.
Per call, medians and p90 (bench/compare_numpy.py's timing).
    bench/run-python-llama   (builds, then runs this in the bench venv)"""
import json
import os
import subprocess
import sys

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "python"))
sys.path.insert(0, os.path.join(root, "bench"))
import tensorjit as tj  # noqa: E402
from compare_numpy import timing  # noqa: E402
from test_llama import CFG, llama_layer  # noqa: E402

S = 64


def per_call(fn, seconds=1.0):
    """(median, p90) per call in microseconds."""
    med, p90 = timing(fn, seconds)
    return med * 1e6, p90 * 1e6



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
rows = []

med, p90 = per_call(lambda: llama_layer(x, pos, kc, vc, w, cos, sin))
rows.append(("tensorjit.jit (Python layer)", med, p90))
frozen = tj.jit(llama_layer.__wrapped__, freeze=("w", "rope_cos", "rope_sin"), name="llama_frozen")
same = np.abs(frozen(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0] - llama_layer(x, pos, kc.copy(), vc.copy(), w, cos, sin)[0]).max()
print(f"max |frozen - not frozen| = {same:.2e}")
med, p90 = per_call(lambda: frozen(x, pos, kc, vc, w, cos, sin))
rows.append(("tensorjit.jit, weights frozen", med, p90))

tjc = os.path.join(root, "build", "tjc")
if os.path.exists(tjc):
    r = subprocess.run([tjc, "bench", "--config", "tiny", "--mode", "decode", "--kv-len", str(S), "--seconds", "1", "--json"],
                       capture_output=True, text=True, check=True)
    j = json.loads(r.stdout)
    rows.append(("C++ compiled call (tjc bench)", j["compiled_us"], j["compiled_p90_us"]))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
if torch is not None:
    torch.set_num_threads(int(os.environ.get("TJ_THREADS", "2")))
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
        med, p90 = per_call(lambda: compiled(tx, 10, tk, tv))
    rows.append(("torch.compile (Inductor, torch layer)", med, p90))

base = rows[0][1]
print(f"{'tiny Llama decode layer, per call':40s} {'median us':>10s} {'p90 us':>8s} {'vs tensorjit.jit':>17s}")
for name, med, p90 in rows:
    print(f"{name:40s} {med:10.2f} {p90:8.2f} {med / base:16.2f}x")
