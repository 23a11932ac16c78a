#!/usr/bin/env python3
"""The Llama layer in numpy, jax.jit, ONNX Runtime, PyTorch and torch.compile (those installed) against
tensorjit's compiled code, on the same inputs and weights, in one run.

    bench/compare_numpy.py --config tiny --mode decode --kv-len 64
    bench/compare_numpy.py --config tinyllama --mode prefill --tokens 128 --busy 4

`tjc bench --dump DIR` writes the inputs, the weights and the compiled
outputs; this script runs the same layer written with numpy (float32, one
BLAS call per matmul), with jax.jit (caches donated) if `import jax` works,
as an ONNX model built op by op for ONNX Runtime if `import onnxruntime`
works, and with PyTorch eager ops (inference mode) and through torch.compile
(Inductor) if `import torch` works, checks
that every output agrees with tensorjit's, and prints the median times side
by side. `--busy N` then times everything again (tensorjit in a fresh `tjc
bench`) while N background jobs compile a C++ file over and over, and adds
the busy figures and factors. Run it through bench/run-compare, which makes
a venv with numpy first (`bench/setup --jax`, `--ort`, `--torch` add those:
the last a large download).
"""
import argparse
import json
import os
import signal
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


def write_in_place(cache, rows, pos):
    cache[:, :, pos:pos + rows.shape[2]] = rows  # like tensorjit's donated cache
    return cache


def layer(xp, w, x, pos, kc, vc, cfg, write=write_in_place):
    """One decoder layer, as the tensorjit model defines it (x @ W with W [in, out]),
    for numpy or jax.numpy (`write` puts the new K/V rows into a cache)."""
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
    positions = pos + xp.arange(T)
    c, s = w["rope_cos"][positions], w["rope_sin"][positions]
    q, k = rope(q, c, s), rope(k, c, s)
    kc, vc = write(kc, k, pos), write(vc, v, pos)
    kx = xp.repeat(kc, group, axis=1) if group > 1 else kc
    vx = xp.repeat(vc, group, axis=1) if group > 1 else vc
    scores = (q @ kx.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(hd))
    mask = xp.where(xp.arange(S)[None, :] <= pos + xp.arange(T)[:, None], 0.0, -np.inf).astype(x.dtype)
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


def layer_onnx(onnx, w, x_shape, S, cfg):
    """The same layer as an ONNX model (opset 18) for ONNX Runtime, built op by
    op with onnx.helper; the weights are initializers; the updated caches are
    outputs (ONNX has no in-place update)."""
    from onnx import TensorProto, helper, numpy_helper
    d, hq, hkv, hd, ffn, eps = cfg
    B, T, _ = x_shape
    group, half = hq // hkv, hd // 2
    nodes, inits, count = [], [], [0]

    def const(name, value):
        if name not in {t.name for t in inits}:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind, inputs, **attrs):
        count[0] += 1
        out = f"v{count[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    i64 = lambda *v: np.array(v, dtype=np.int64)
    for k in ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down", "rope_cos", "rope_sin"):
        const(k, np.ascontiguousarray(w[k]).astype(np.float32))
    const("eps", np.float32(eps)), const("last", i64(-1)), const("zero_f", np.float32(0)), const("ninf", np.float32(-np.inf))
    const("scale", np.float32(1.0 / np.sqrt(hd))), const("one_i", np.int64(1)), const("zero_i", np.int64(0))

    def rms(v, g):
        ms = op("ReduceMean", [op("Mul", [v, v]), "last"], keepdims=1)
        return op("Mul", [op("Div", [v, op("Sqrt", [op("Add", [ms, "eps"])])]), g])

    def heads(v, n):
        return op("Transpose", [op("Reshape", [v, const(f"shape_heads{n}", i64(B, T, n, hd))])], perm=[0, 2, 1, 3])

    positions = op("Add", ["pos", op("Range", ["zero_i", const("T", np.int64(T)), "one_i"])])
    c, sn = op("Gather", ["rope_cos", positions]), op("Gather", ["rope_sin", positions])
    const("axis3", i64(3)), const("h0", i64(0)), const("h1", i64(half)), const("h2", i64(hd))

    def rope(v):
        v1, v2 = op("Slice", [v, "h0", "h1", "axis3"]), op("Slice", [v, "h1", "h2", "axis3"])
        return op("Concat", [op("Sub", [op("Mul", [v1, c]), op("Mul", [v2, sn])]), op("Add", [op("Mul", [v2, c]), op("Mul", [v1, sn])])],
                  axis=-1)

    h = rms("x", "attn_norm")
    q, k, v = rope(heads(op("MatMul", [h, "wq"]), hq)), rope(heads(op("MatMul", [h, "wk"]), hkv)), heads(op("MatMul", [h, "wv"]), hkv)
    const("axis2", i64(2)), const("start0", i64(0)), const("endS", i64(S))
    pos1 = op("Unsqueeze", ["pos", const("ax0", i64(0))])
    posT = op("Add", [pos1, const("T1", i64(T))])

    def update(cache, rows, out):
        before, after = op("Slice", [cache, "start0", pos1, "axis2"]), op("Slice", [cache, posT, "endS", "axis2"])
        nodes.append(helper.make_node("Concat", [before, rows, after], [out], axis=2))
        return out

    kc, vc = update("k_cache", k, "k_out"), update("v_cache", v, "v_out")

    def repeat(cache):
        if group == 1:
            return cache
        e = op("Expand", [op("Unsqueeze", [cache, const("ax2", i64(2))]), const("rep_shape", i64(B, hkv, group, S, hd))])
        return op("Reshape", [e, const("kv_shape", i64(B, hq, S, hd))])

    kx, vx = repeat(kc), repeat(vc)
    scores = op("Mul", [op("MatMul", [q, op("Transpose", [kx], perm=[0, 1, 3, 2])]), "scale"])
    cols = op("Range", ["zero_i", const("S", np.int64(S)), "one_i"])
    rows = op("Unsqueeze", [positions, const("ax1", i64(1))])
    mask = op("Where", [op("LessOrEqual", [cols, rows]), "zero_f", "ninf"])
    p = op("Softmax", [op("Add", [scores, mask])], axis=-1)
    attn = op("Reshape", [op("Transpose", [op("MatMul", [p, vx])], perm=[0, 2, 1, 3]), const("attn_shape", i64(B, T, hq * hd))])
    h1 = op("Add", ["x", op("MatMul", [attn, "wo"])])
    h2 = rms(h1, "mlp_norm")
    gate = op("MatMul", [h2, "w_gate"])
    m = op("MatMul", [op("Mul", [op("Mul", [gate, op("Sigmoid", [gate])]), op("MatMul", [h2, "w_up"])]), "w_down"])
    nodes.append(helper.make_node("Add", [h1, m], ["y"]))
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "llama_layer",
        [helper.make_tensor_value_info("x", f32, [B, T, d]), helper.make_tensor_value_info("pos", TensorProto.INT64, []),
         helper.make_tensor_value_info("k_cache", f32, [B, hkv, S, hd]), helper.make_tensor_value_info("v_cache", f32, [B, hkv, S, hd])],
        [helper.make_tensor_value_info("y", f32, [B, T, d]), helper.make_tensor_value_info("k_out", f32, [B, hkv, S, hd]),
         helper.make_tensor_value_info("v_out", f32, [B, hkv, S, hd])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


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


def tjc_bench(args, dump=None):
    cmd = [args.tjc, "bench", "--model", "llama-layer", "--config", args.config, "--mode", args.mode, "--json",
           "--seconds", str(args.seconds)]
    if dump:
        cmd += ["--dump", dump]
    if args.mode == "prefill":
        cmd += ["--tokens", args.tokens]
    if args.kv_len:
        cmd += ["--kv-len", args.kv_len]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


class BusyLoad:
    """N jobs compiling a C++ file over and over (like a parallel build), each in a
    session of its own, killed on exit and bounded in time."""

    def __init__(self, jobs, seconds, folder):
        self.procs = []
        for i in range(jobs):
            obj = os.path.join(folder, f"busy{i}.o")
            loop = (f"end=$(( $(date +%s) + {int(seconds)} )); while [ $(date +%s) -lt $end ]; do "
                    f"c++ -O2 -std=c++20 -I'{ROOT}/include' -I'{ROOT}/src' -c '{ROOT}/src/ir/ops/table.cpp' -o '{obj}' >/dev/null 2>&1; done")
            self.procs.append(subprocess.Popen(["sh", "-c", loop], start_new_session=True))
        time.sleep(1)  # the jobs under way

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--mode", default="decode", choices=["prefill", "decode"])
    ap.add_argument("--tokens", default="16")
    ap.add_argument("--kv-len", default="")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--busy", type=int, default=0, help="time everything again beside N compile jobs (0 to 64)")
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy must be in 0..64")
    cfg = CONFIGS[args.config]

    with tempfile.TemporaryDirectory() as dump:
        tj = tjc_bench(args, dump)
        arrays = {f[:-4]: np.load(os.path.join(dump, f)) for f in os.listdir(dump) if f.endswith(".npy")}

    x, pos = arrays["x"], int(arrays["pos"])
    fresh = lambda: (arrays["k_cache"].copy(), arrays["v_cache"].copy())
    got = [arrays["output0"], arrays["output1"], arrays["output2"]]
    systems = []  # (name, one call, max rel diff against tensorjit's outputs, note)

    y, kc, vc = layer(np, arrays, x, pos, *fresh(), cfg)
    caches = fresh()
    systems.append((f"numpy {np.__version__}", lambda: layer(np, arrays, x, pos, caches[0], caches[1], cfg),
                    max_rel(got, [y, kc, vc]), ""))
    missing = []
    try:
        import torch
    except ImportError:
        missing.append("PyTorch: not installed (bench/setup --torch installs it)")
    else:
        tw = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
        tfresh = lambda: (tw["k_cache"].clone(), tw["v_cache"].clone())
        with torch.inference_mode():
            ty, tkc, tvc = layer_torch(torch, tw, tw["x"], pos, *tfresh(), cfg)
        tcaches = tfresh()

        def torch_step():
            with torch.inference_mode():
                layer_torch(torch, tw, tw["x"], pos, tcaches[0], tcaches[1], cfg)

        systems.append((f"torch {torch.__version__}", torch_step, max_rel(got, [ty.numpy(), tkc.numpy(), tvc.numpy()]),
                        f"eager, {torch.get_num_threads()} threads"))
        # torch.compile (Inductor, its C++ CPU backend): the same function; the
        # cache writes become in-place copies into the arguments.
        compiled = torch.compile(lambda w, x, kc, vc: layer_torch(torch, w, x, pos, kc, vc, cfg), dynamic=False)
        with torch.inference_mode():
            ccaches = tfresh()
            t0 = time.perf_counter()
            cy, ckc, cvc = compiled(tw, tw["x"], *ccaches)
            compile_s = time.perf_counter() - t0

        def compiled_step():
            with torch.inference_mode():
                compiled(tw, tw["x"], ccaches[0], ccaches[1])

        systems.append((f"torch.compile {torch.__version__}", compiled_step,
                        max_rel(got, [cy.numpy(), ckc.numpy(), cvc.numpy()]), f"inductor, first call {compile_s:.1f} s"))
    try:
        import jax
    except ImportError:
        missing.append("jax: not installed (bench/setup --jax installs it)")
    else:
        cpu = jax.devices("cpu")[0]
        jw = {k: jax.device_put(np.ascontiguousarray(v), cpu) for k, v in arrays.items() if k not in ("x", "pos", "k_cache", "v_cache")}
        update = lambda cache, rows, pos: jax.lax.dynamic_update_slice(cache, rows, (0, 0, pos, 0))
        f = jax.jit(lambda w, x, pos, kc, vc: layer(jax.numpy, w, x, pos, kc, vc, cfg, update), donate_argnums=(3, 4))
        jx, jpos = jax.device_put(x, cpu), jax.device_put(np.int32(pos), cpu)
        state = fresh()
        jy, jkc, jvc = f(jw, jx, jpos, jax.device_put(state[0], cpu), jax.device_put(state[1], cpu))
        jrel = max_rel(got, [np.asarray(jy), np.asarray(jkc), np.asarray(jvc)])
        jcaches = [jkc, jvc]

        def jax_step():
            out = f(jw, jx, jpos, jcaches[0], jcaches[1])
            out[0].block_until_ready()
            jcaches[0], jcaches[1] = out[1], out[2]

        systems.append((f"jax.jit {jax.__version__}", jax_step, jrel, "caches donated"))

    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        missing.append("ONNX Runtime: not installed (bench/setup --ort installs it)")
    else:
        model = layer_onnx(onnx, arrays, x.shape, arrays["k_cache"].shape[2], cfg)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        state = fresh()
        feeds = {"x": x, "pos": np.array(pos, dtype=np.int64), "k_cache": state[0], "v_cache": state[1]}
        oy, okc, ovc = sess.run(None, feeds)
        orel = max_rel(got, [oy, okc, ovc])

        def ort_step():
            out = sess.run(None, feeds)
            feeds["k_cache"], feeds["v_cache"] = out[1], out[2]

        systems.append((f"onnxruntime {ort.__version__}", ort_step, orel, "caches returned as new arrays"))

    quiet = {name: median_seconds(fn, args.seconds) for name, fn, _, _ in systems}
    busy, tj_busy = {}, None
    if args.busy:
        with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 60 + 10 * args.seconds * (len(systems) + 3), folder):
            tj_busy = tjc_bench(args)["compiled_us"]
            busy = {name: median_seconds(fn, args.seconds) for name, fn, _, _ in systems}

    print(f"llama-layer {args.config} {args.mode} (f32), median per call; outputs checked against tensorjit's")
    head = f"  {'':<30} {'quiet us':>12} {'vs tensorjit':>13}"
    if args.busy:
        head += f" {'busy (' + str(args.busy) + ') us':>14} {'vs tensorjit':>13} {'busy/quiet':>11}"
    print(head)
    tq = tj["compiled_us"]

    def row(name, q, b, note=""):
        line = f"  {name:<30} {q:12.1f} {q / tq:12.2f}x"
        if args.busy:
            line += f" {b:14.1f} {b / tj_busy:12.2f}x {b / q:10.2f}x"
        print(line + (f"   {note}" if note else ""))

    row("tensorjit interpreter", tj["interpreter_us"], tj["interpreter_us"], "(busy: the quiet figure)")
    row("tensorjit compiled", tq, tj_busy or tq)
    worst = 0.0
    for name, _, rel, note in systems:
        row(name, quiet[name] * 1e6, busy.get(name, quiet[name]) * 1e6, f"max rel diff {rel:.2e}" + (f", {note}" if note else ""))
        worst = max(worst, rel)
    for m in missing:
        print(f"  {m}")
    if worst > 1e-4:
        sys.exit(f"outputs disagree: max relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
