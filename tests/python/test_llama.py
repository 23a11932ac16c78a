"""The Llama decode layer of the C++ models (src/models/llama.cpp: RMSNorm,
rotary embeddings, grouped-query attention over a KV cache written in
place, SwiGLU), written in Python with tensorjit and checked against the
same layer in plain numpy, for a prefill and then decode steps; the decode
steps share one compilation."""
import numpy as np

import tensorjit as tj

CFG = dict(d=128, heads=8, kv_heads=2, head_dim=16, ffn=344, max_pos=64, eps=1e-5)


@tj.jit
def llama_layer(x, pos, k_cache, v_cache, w, rope_cos, rope_sin):
    B, T, D = x.shape
    H, Hkv, hd = CFG["heads"], CFG["kv_heads"], CFG["head_dim"]

    def heads(t, n):
        return t.reshape(B, T, n, hd).transpose(0, 2, 1, 3)

    h = tj.rms_norm(x, w["attn_norm"], CFG["eps"])
    q, k, v = heads(h @ w["wq"], H), heads(h @ w["wk"], Hkv), heads(h @ w["wv"], Hkv)
    positions = tj.arange(T) + pos
    c, s = tj.take(rope_cos, positions), tj.take(rope_sin, positions)

    def rope(t):  # HF's rotate_half
        t1, t2 = t[..., : hd // 2], t[..., hd // 2:]
        return tj.concatenate([t1 * c - t2 * s, t2 * c + t1 * s], axis=-1)

    k_cache = tj.kv_write(k_cache, rope(k), pos)
    v_cache = tj.kv_write(v_cache, v, pos)
    a = tj.flash_attention(rope(q), k_cache, v_cache, 1 / np.sqrt(hd), causal_offset=pos)
    h1 = x + a.transpose(0, 2, 1, 3).reshape(B, T, H * hd) @ w["wo"]
    h2 = tj.rms_norm(h1, w["mlp_norm"], CFG["eps"])
    return h1 + (tj.silu(h2 @ w["w_gate"]) * (h2 @ w["w_up"])) @ w["w_down"], k_cache, v_cache


def numpy_layer(x, pos, kc, vc, w, cos, sin):
    B, T, D = x.shape
    H, Hkv, hd = CFG["heads"], CFG["kv_heads"], CFG["head_dim"]
    rms = lambda t, g: t / np.sqrt((t * t).mean(-1, keepdims=True) + CFG["eps"]) * g
    heads = lambda t, n: t.reshape(B, T, n, hd).transpose(0, 2, 1, 3)
    h = rms(x, w["attn_norm"])
    q, k, v = heads(h @ w["wq"], H), heads(h @ w["wk"], Hkv), heads(h @ w["wv"], Hkv)
    c, s = cos[pos:pos + T], sin[pos:pos + T]
    rope = lambda t: np.concatenate([t[..., :hd // 2] * c - t[..., hd // 2:] * s, t[..., hd // 2:] * c + t[..., :hd // 2] * s], -1)
    q, k = rope(q), rope(k)
    kc, vc = kc.copy(), vc.copy()
    kc[:, :, pos:pos + T], vc[:, :, pos:pos + T] = k, v
    kr, vr = np.repeat(kc, H // Hkv, axis=1), np.repeat(vc, H // Hkv, axis=1)
    scores = q @ kr.transpose(0, 1, 3, 2) / np.sqrt(hd)
    visible = np.arange(kc.shape[2])[None, :] <= pos + np.arange(T)[:, None]
    scores = np.where(visible, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    a = (p / p.sum(-1, keepdims=True)) @ vr
    h1 = x + a.transpose(0, 2, 1, 3).reshape(B, T, H * hd) @ w["wo"]
    h2 = rms(h1, w["mlp_norm"])
    g = h2 @ w["w_gate"]
    return h1 + (g / (1 + np.exp(-g)) * (h2 @ w["w_up"])) @ w["w_down"], kc, vc


def test_prefill_then_decode_matches_numpy():
    rng = np.random.default_rng(4)
    d, ffn, hd = CFG["d"], CFG["ffn"], CFG["head_dim"]
    q, kv = CFG["heads"] * hd, CFG["kv_heads"] * hd
    shapes = dict(attn_norm=(d,), wq=(d, q), wk=(d, kv), wv=(d, kv), wo=(q, d), mlp_norm=(d,), w_gate=(d, ffn), w_up=(d, ffn), w_down=(ffn, d))
    w = {k: (rng.standard_normal(s) / np.sqrt(s[0]) if len(s) == 2 else 1 + 0.1 * rng.standard_normal(s)).astype(np.float32)
         for k, s in shapes.items()}
    freq = 10000.0 ** (-2.0 * np.arange(hd // 2) / hd)
    angles = np.arange(CFG["max_pos"])[:, None] * freq[None, :]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    S = CFG["max_pos"]
    kc = np.zeros((1, CFG["kv_heads"], S, hd), np.float32)
    vc = np.zeros_like(kc)
    nk, nv = kc.copy(), vc.copy()
    pos = 0
    for T in (5, 1, 1, 1):  # a prefill of 5 tokens, then 3 decode steps
        x = rng.standard_normal((1, T, d)).astype(np.float32)
        want, nk, nv = numpy_layer(x, pos, nk, nv, w, cos, sin)
        got, kc, vc = llama_layer(x, np.array(pos, dtype=np.int64), kc, vc, w, cos, sin)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
        np.testing.assert_allclose(kc, nk, rtol=1e-5, atol=1e-5)
        pos += T
    # two shapes (T = 5, then 1): two compilations; the decode steps hit
    assert llama_layer.stats["compilations"] == 2, llama_layer.stats
    assert llama_layer.stats["hits"] == 2
