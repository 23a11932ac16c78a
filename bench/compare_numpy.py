#!/usr/bin/env python3
"""The Llama layer in numpy, jax.jit, ONNX Runtime, PyTorch and torch.compile (those installed) against
tensorjit's compiled code, on the same inputs and weights, in one run.

    bench/compare_numpy.py --config tiny --mode decode --kv-len 64
    bench/compare_numpy.py --config tinyllama --mode prefill --tokens 128 --busy 4 --repeat 5

`tjc bench --dump DIR` writes the inputs, the weights and the compiled
outputs. Then, K times (`--repeat K`), in turn: a fresh `tjc bench --child`
process times tensorjit; with `--busy N` another one times it beside N
compile jobs; and a fresh process of this script runs the same layer written with
numpy (float32, one BLAS call per matmul), with jax.jit (caches donated) if
`import jax` works, with PyTorch eager ops (inference mode) and through
torch.compile (Inductor) if `import torch` works, and in ONNX Runtime
(ORT_ENABLE_ALL) if `import onnxruntime` works, on the torch layer exported
with torch.onnx.export (built op by op with onnx.helper when torch is not
installed); each checks that every output agrees with tensorjit's and times
every system: median and 90th percentile per call. `--busy N` times
everything again while N background jobs compile a C++ file over and over.
The systems take turns, so that the machine's drift over minutes (this
project's shared machines move by 10-30%) falls on each of them alike
rather than on whichever ran first. Every system runs at
the machine's thread count. The report gives, per system, the median of the
K medians and of the K p90s, quiet and busy, the worst busy run, each
against tensorjit, and the worst busy median over the quiet median. Run it
through bench/run-compare, which makes a venv with numpy first
(`bench/setup --jax`, `--ort`, `--torch` add those: the last a large
download).
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


def torch_heads(v, n, hd):
    """[B, T, n*hd] as [B, n, T, hd]."""
    B, T, _ = v.shape
    return v.view(B, T, n, hd).transpose(1, 2)


def torch_rope(torch, v, c, s):
    """Rotary embedding of the last dim's halves (cos c, sin s); also bench/gpu_peers.py's."""
    half = v.shape[-1] // 2
    v1, v2 = v[..., :half], v[..., half:]
    return torch.cat([v1 * c - v2 * s, v2 * c + v1 * s], dim=-1)


def layer_torch(torch, w, x, pos, kc, vc, cfg):
    """The same layer with PyTorch eager ops (w, x, kc, vc are torch tensors)."""
    d, hq, hkv, hd, ffn, eps = cfg
    B, T, _ = x.shape
    S = kc.shape[2]
    group = hq // hkv

    def rms(v, g):
        return v / torch.sqrt((v * v).mean(dim=-1, keepdim=True) + eps) * g

    def heads(v, n):
        return torch_heads(v, n, hd)

    def rope(v, c, s):
        return torch_rope(torch, v, c, s)

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


def timing(f, budget, min_runs=5):
    """Calls f for `budget` seconds (at least min_runs times): (median, 90th percentile) per call, in seconds."""
    times, start = [], time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.9))]


def trace_args(args):
    cmd = ["--model", "llama-layer", "--config", args.config, "--mode", args.mode]
    if args.mode == "prefill":
        cmd += ["--tokens", args.tokens]
    if args.kv_len:
        cmd += ["--kv-len", args.kv_len]
    return cmd


def tjc_child(args):
    """One fresh tjc process timing the compiled layer for --seconds: (median, 90th percentile) per call, in seconds."""
    out = subprocess.run([args.tjc, "bench", "--child", "--seconds", str(args.seconds)] + trace_args(args), check=True,
                         capture_output=True, text=True).stdout
    calls = json.loads(out.strip().splitlines()[-1])["calls"]
    return calls["median_us"] * 1e-6, calls["p90_us"] * 1e-6


def tjc_bench(args, dump):
    cmd = [args.tjc, "bench", "--json", "--seconds", str(args.seconds), "--dump", dump] + trace_args(args)
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


def peers(arrays, cfg, threads):
    """The other systems, each ready to time: [(name, one call, outputs of a first call, note)], and what is missing."""
    x, pos = arrays["x"], int(arrays["pos"])
    fresh = lambda: (arrays["k_cache"].copy(), arrays["v_cache"].copy())
    systems, missing = [], []

    y, kc, vc = layer(np, arrays, x, pos, *fresh(), cfg)
    caches = fresh()
    systems.append((f"numpy {np.__version__}", lambda: layer(np, arrays, x, pos, caches[0], caches[1], cfg), [y, kc, vc], ""))
    try:
        import torch
    except ImportError:
        torch = None
        missing.append("PyTorch: not installed (bench/setup --torch installs it)")
    if torch is not None:
        torch.set_num_threads(threads)
        tw = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
        tfresh = lambda: (tw["k_cache"].clone(), tw["v_cache"].clone())
        with torch.inference_mode():
            out = [t.numpy() for t in layer_torch(torch, tw, tw["x"], pos, *tfresh(), cfg)]
        tcaches = tfresh()

        def torch_step():
            with torch.inference_mode():
                layer_torch(torch, tw, tw["x"], pos, tcaches[0], tcaches[1], cfg)

        systems.append((f"torch {torch.__version__}", torch_step, out, f"eager, {torch.get_num_threads()} threads"))
        # torch.compile (Inductor, its C++ CPU backend): the same function; the
        # cache writes become in-place copies into the arguments.
        compiled = torch.compile(lambda w, x, kc, vc: layer_torch(torch, w, x, pos, kc, vc, cfg), dynamic=False)
        with torch.inference_mode():
            ccaches = tfresh()
            t0 = time.perf_counter()
            out = [t.numpy() for t in compiled(tw, tw["x"], *ccaches)]
            compile_s = time.perf_counter() - t0

        def compiled_step():
            with torch.inference_mode():
                compiled(tw, tw["x"], ccaches[0], ccaches[1])

        systems.append((f"torch.compile {torch.__version__}", compiled_step, out, f"inductor, first call {compile_s:.1f} s"))
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
        out = [np.asarray(jy), np.asarray(jkc), np.asarray(jvc)]
        jcaches = [jkc, jvc]

        def jax_step():
            o = f(jw, jx, jpos, jcaches[0], jcaches[1])
            o[0].block_until_ready()
            jcaches[0], jcaches[1] = o[1], o[2]

        systems.append((f"jax.jit {jax.__version__}", jax_step, out, "caches donated"))
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        missing.append("ONNX Runtime: not installed (bench/setup --ort installs it)")
    else:
        if torch is not None:
            model, how = onnx_export(torch, arrays, pos, cfg), "exported from the torch layer"
        else:
            model, how = layer_onnx(onnx, arrays, x.shape, arrays["k_cache"].shape[2], cfg).SerializeToString(), "built op by op"
        o = ort.SessionOptions()
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        state = fresh()
        feeds = {k: v for k, v in {"x": x, "pos": np.array(pos, dtype=np.int64), "k_cache": state[0], "v_cache": state[1]}.items()
                 if k in names}
        out = sess.run(None, feeds)

        def ort_step():
            o = sess.run(None, feeds)
            feeds["k_cache"], feeds["v_cache"] = o[1], o[2]

        systems.append((f"onnxruntime {ort.__version__}", ort_step, out, f"{how}, caches returned as new arrays"))
    return systems, missing


def onnx_export(torch, arrays, pos, cfg):
    """The torch layer through torch.onnx.export (TorchScript exporter, opset 17): the weights become
    initializers, `pos` a constant of the graph (one decode position, as each call here uses), the
    cache writes ScatterND into copies of the caches, which are outputs."""
    import io
    import warnings
    tw = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}

    class Layer(torch.nn.Module):
        def forward(self, x, kc, vc):
            return layer_torch(torch, tw, x, pos, kc.clone(), vc.clone(), cfg)

    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Layer(), (tw["x"], tw["k_cache"].clone(), tw["v_cache"].clone()), f, input_names=["x", "k_cache", "v_cache"],
                          output_names=["y", "k_out", "v_out"], opset_version=17, dynamo=False)
    return f.getvalue()


def child(args):
    """One fresh process: every peer timed quiet, then (--busy) beside the compile jobs; JSON on stdout."""
    arrays = {f[:-4]: np.load(os.path.join(args.child, f)) for f in os.listdir(args.child) if f.endswith(".npy")}
    got = [arrays["output0"], arrays["output1"], arrays["output2"]]
    systems, missing = peers(arrays, CONFIGS[args.config], os.cpu_count() or 1)
    r = {"systems": [], "missing": missing}
    for name, step, out, note in systems:
        r["systems"].append({"name": name, "rel": max_rel(got, out), "note": note, "quiet": timing(step, args.seconds)})
    if args.busy:
        with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 60 + 2 * args.seconds * len(systems), folder):
            for s, (_, step, _, _) in zip(r["systems"], systems):
                s["busy"] = timing(step, args.seconds)
    print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--mode", default="decode", choices=["prefill", "decode"])
    ap.add_argument("--tokens", default="16")
    ap.add_argument("--kv-len", default="")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--busy", type=int, default=0, help="time everything again beside N compile jobs (0 to 64)")
    ap.add_argument("--repeat", type=int, default=1, help="K fresh processes per system (1 to 20)")
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)  # a folder of arrays: time the peers in this process
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy must be in 0..64")
    if not 1 <= args.repeat <= 20:
        sys.exit("--repeat must be in 1..20")
    if args.child:
        return child(args)

    with tempfile.TemporaryDirectory() as dump:
        tj = tjc_bench(args, dump)  # the interpreter's time, and the outputs every peer is checked against
        tj_quiet, tj_busy, runs = [], [], []
        for _ in range(args.repeat):  # in turn: tensorjit quiet, tensorjit busy, the peers quiet then busy
            tj_quiet.append(tjc_child(args))
            if args.busy:
                with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 60 + 2 * args.seconds, folder):
                    tj_busy.append(tjc_child(args))
            runs.append(subprocess.run([sys.executable, os.path.abspath(__file__), "--child", dump, "--config", args.config,
                                        "--seconds", str(args.seconds), "--busy", str(args.busy)], check=True, capture_output=True,
                                       text=True))
    runs = [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs]
    table = [("tensorjit compiled", tj_quiet, tj_busy, "")]
    for i, s in enumerate(runs[0]["systems"]):
        per = [r["systems"][i] for r in runs]
        rel = max(p["rel"] for p in per)
        table.append((s["name"], [tuple(p["quiet"]) for p in per], [tuple(p["busy"]) for p in per if "busy" in p],
                      f"max rel diff {rel:.2e}" + (f", {s['note']}" if s["note"] else "")))

    mid = lambda v: sorted(v)[len(v) // 2]
    print(f"llama-layer {args.config} {args.mode} (f32), us per call; {args.repeat} fresh process(es) per system, "
          f"{os.cpu_count()} threads; outputs checked against tensorjit's")
    head = f"  {'':<28} {'median':>10} {'p90':>10} {'vs tj':>7}"
    if args.busy:
        head += f" | busy {args.busy}: {'median':>10} {'p90':>10} {'worst med':>10} {'worst p90':>10} {'vs tj':>7} {'worst/quiet':>11}"
    print(head)
    print(f"  {'tensorjit interpreter':<28} {tj['interpreter_us']:10.1f}")
    tq = mid([q[0] for q in table[0][1]])
    tb = mid([b[0] for b in table[0][2]]) if args.busy else 0
    worst_rel = 0.0
    for name, quiet, busy, note in table:
        qm, qp = mid([q[0] for q in quiet]), mid([q[1] for q in quiet])
        line = f"  {name:<28} {qm * 1e6:10.1f} {qp * 1e6:10.1f} {qm / tq:6.2f}x"
        if args.busy:
            bm, bp = mid([b[0] for b in busy]), mid([b[1] for b in busy])
            wm, wp = max(b[0] for b in busy), max(b[1] for b in busy)
            line += f" | {'':>7} {bm * 1e6:10.1f} {bp * 1e6:10.1f} {wm * 1e6:10.1f} {wp * 1e6:10.1f} {bm / tb:6.2f}x {wm / qm:10.2f}x"
        print(line + (f"   {note}" if note else ""))
    for r in runs:
        for s in r["systems"]:
            worst_rel = max(worst_rel, s["rel"])
    for m in runs[0]["missing"]:
        print(f"  {m}")
    if worst_rel > 1e-4:
        sys.exit(f"outputs disagree: max relative difference {worst_rel:.2e}")


if __name__ == "__main__":
    main()
