#!/usr/bin/env python3
"""Weights stored in bf16 and int8, side by side in one run (docs/results.md).

    bench/run-weights                 # quiet
    bench/run-weights --busy 2        # the timings again beside 2 compile jobs

1. tensorjit: `tjc bench --weights all` on a Llama layer decoding one token
   (tinyllama: 176 MB of f32 weights; KV 512): f32, bf16 and int8 weights
   timed in interleaved rounds beside the stream bandwidth measured in each
   round, and each format's output against f32's. The arrays are dumped for 2.
2. The peers on the same layer, weights and inputs, in one process:
   PyTorch with the weights and activations in bf16 (eager and
   torch.compile: a bf16 product needs both operands in bf16), and ONNX
   Runtime with the layer exported from torch and its weights quantized to
   int8 per output channel by onnxruntime.quantization.quantize_dynamic
   (MatMulInteger on activations quantized per call), each against
   tensorjit's f32 output.
3. all-MiniLM-L6-v2 (build/minilm/minilm.onnx, exported by bench/minilm.py)
   on real sentences: each weight format's embeddings against f32's (cosine
   per sentence), tensorjit's and ONNX Runtime's int8.

Run it through bench/run-weights (it makes the venv: bench/setup --minilm).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_numpy import CONFIGS, ROOT, BusyLoad, layer_torch, onnx_export, timing  # noqa: E402


def tjc_bench(args, dump, busy):
    cmd = [args.tjc, "bench", "--model", "llama-layer", "--config", args.config, "--mode", "decode", "--kv-len", str(args.kv_len),
           "--weights", "all", "--seconds", str(args.seconds), "--json"] + (["--dump", dump] if dump else [])
    with tempfile.TemporaryDirectory() as folder:
        if busy:
            with BusyLoad(busy, 600, folder):
                r = subprocess.run(cmd, capture_output=True, text=True)
        else:
            r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tjc bench failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def rel(got, want):
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


def constants_as_initializers(path):
    """The exporter writes the layer's weights (tensors the function closes over, not module
    parameters) as Constant nodes; quantize_dynamic quantizes initializers only."""
    import onnx
    m = onnx.load(path)
    nodes = []
    for n in m.graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.save(m, path)


def peers(arrays, cfg, threads):
    """[(name, one call, its y, note)] on the dumped arrays."""
    import torch
    torch.set_num_threads(threads)
    x, pos = arrays["x"], int(arrays["pos"])
    systems = []
    tw = {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.bfloat16) for k, v in arrays.items() if v.dtype == np.float32}
    caches = (tw["k_cache"].clone(), tw["v_cache"].clone())
    with torch.inference_mode():
        y = layer_torch(torch, tw, tw["x"], pos, caches[0].clone(), caches[1].clone(), cfg)[0].float().numpy()

    def eager():
        with torch.inference_mode():
            layer_torch(torch, tw, tw["x"], pos, caches[0], caches[1], cfg)

    systems.append((f"torch {torch.__version__} bf16", eager, y, "eager; weights, activations and caches in bf16"))
    compiled = torch.compile(lambda w, x, kc, vc: layer_torch(torch, w, x, pos, kc, vc, cfg), dynamic=False)
    with torch.inference_mode():
        y = compiled(tw, tw["x"], caches[0].clone(), caches[1].clone())[0].float().numpy()

    def inductor():
        with torch.inference_mode():
            compiled(tw, tw["x"], caches[0], caches[1])

    systems.append((f"torch.compile {torch.__version__} bf16", inductor, y, "inductor"))

    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    with tempfile.TemporaryDirectory() as folder:
        f32 = os.path.join(folder, "layer.onnx")
        q8 = os.path.join(folder, "layer_int8.onnx")
        with open(f32, "wb") as f:
            f.write(onnx_export(torch, arrays, pos, cfg))
        constants_as_initializers(f32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(f32, q8, weight_type=QuantType.QInt8, per_channel=True)
        o = ort.SessionOptions()
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(q8, o, providers=["CPUExecutionProvider"])
        kinds = sorted({n.op_type for n in __import__("onnx").load(q8).graph.node if "Integer" in n.op_type or "Quant" in n.op_type})
        if not kinds:
            sys.exit("onnxruntime: quantize_dynamic left the layer in f32")
    names = {i.name for i in sess.get_inputs()}
    feeds = {k: v for k, v in {"x": x, "k_cache": arrays["k_cache"].copy(), "v_cache": arrays["v_cache"].copy()}.items() if k in names}
    y = sess.run(None, feeds)[0]
    systems.append((f"onnxruntime {ort.__version__} int8", lambda: sess.run(None, feeds), y,
                    "quantize_dynamic per channel: " + ", ".join(kinds)))
    return systems


def layer_rows(args):
    with tempfile.TemporaryDirectory() as dump:
        tj = tjc_bench(args, dump, 0)
        arrays = {f[:-4]: np.load(os.path.join(dump, f)) for f in os.listdir(dump) if f.endswith(".npy")}
    want = arrays["output0"].astype(np.float64)
    print(f"\n{args.config} layer, decoding one token at KV {args.kv_len}; tensorjit, in one process ({tj['weight_formats']['rounds']} "
          f"interleaved rounds, stream bandwidth {tj['weight_formats']['stream_gbps_median']:.1f} GB/s measured beside them):")
    print(f"  {'weights':8s} {'MB':>7s} {'median us':>10s} {'p90 us':>9s} {'vs f32':>7s} {'limit us':>9s} {'time/limit':>10s} {'max rel err':>12s}")
    for r in tj["weight_formats"]["formats"]:
        print(f"  {r['weights']:8s} {r['weight_mb']:7.1f} {r['median_us']:10.1f} {r['p90_us']:9.1f} {r['speedup_vs_f32']:6.2f}x "
              f"{r['limit_us']:9.1f} {r['time_over_limit']:9.2f}x {r['max_rel_err']:12.2e}")
    threads = os.cpu_count() or 1
    systems = peers(arrays, CONFIGS[args.config], threads)
    rows = [(name, timing(step, args.seconds), rel(y, want), note) for name, step, y, note in systems]
    tj_rows = {r["weights"]: r for r in tj["weight_formats"]["formats"]}
    print(f"  peers on the same weights and inputs ({threads} threads), quiet:")
    for name, (med, p90), err, note in rows:
        fmt = "bf16" if "bf16" in name else "int8"
        print(f"  {name:34s} median {med * 1e6:9.1f} us  p90 {p90 * 1e6:9.1f} us  max rel err {err:.2e}  "
              f"tensorjit {fmt} {med * 1e6 / tj_rows[fmt]['median_us']:.2f}x faster  ({note})")
    if args.busy:
        busy = tjc_bench(args, None, args.busy)
        print(f"  beside {args.busy} compile jobs: tensorjit " + ", ".join(
            f"{r['weights']} {r['median_us']:.1f} us (p90 {r['p90_us']:.1f})" for r in busy["weight_formats"]["formats"]))
        with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 600, folder):
            for name, step, _, _ in systems:
                med, p90 = timing(step, args.seconds)
                print(f"  {name:34s} median {med * 1e6:9.1f} us  p90 {p90 * 1e6:9.1f} us")


def minilm_rows(args):
    import minilm
    model = os.path.join(ROOT, "build", "minilm", "minilm.onnx")
    st = minilm.load_st()
    if not os.path.exists(model):
        os.makedirs(os.path.dirname(model), exist_ok=True)
        minilm.export(st, model)
    enc = st.tokenizer(minilm.SENTENCES, padding=True, return_tensors="np")
    with tempfile.TemporaryDirectory() as folder:
        inputs = minilm.write_inputs(folder, enc)
        got = {}
        for fmt in ("f32", "bf16", "int8"):
            out = os.path.join(folder, fmt)
            r = subprocess.run([args.tjc, "run", model, *inputs, "--weight-format", fmt, "--output", out], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"tjc run failed: {r.stderr[-2000:]}")
            got[fmt] = np.load(os.path.join(out, "embedding.npy"))
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
        q8 = os.path.join(folder, "minilm_int8.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(model, q8, weight_type=QuantType.QInt8, per_channel=True)
        sess = ort.InferenceSession(q8, providers=["CPUExecutionProvider"])
        feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
        ort_int8 = sess.run(None, feeds)[0]
    print(f"\nall-MiniLM-L6-v2, {len(minilm.SENTENCES)} sentences (padded to {enc['input_ids'].shape[1]} tokens): cosine per sentence "
          "against tensorjit's f32 embeddings")
    for name, e in (("tensorjit bf16", got["bf16"]), ("tensorjit int8", got["int8"]), (f"onnxruntime {ort.__version__} int8", ort_int8)):
        c = minilm.cosines(e, got["f32"])
        print(f"  {name:28s} min {c.min():.6f}  mean {c.mean():.6f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tinyllama", choices=sorted(CONFIGS))
    ap.add_argument("--kv-len", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--busy", type=int, default=0, help="time everything again beside N compile jobs (0 to 64)")
    ap.add_argument("--tjc", default=os.path.join(ROOT, "build", "tjc"))
    ap.add_argument("--no-minilm", action="store_true", help="skip the MiniLM embeddings")
    args = ap.parse_args()
    if not 0 <= args.busy <= 64:
        sys.exit("--busy: 0 to 64")
    layer_rows(args)
    if not args.no_minilm:
        minilm_rows(args)


if __name__ == "__main__":
    main()
