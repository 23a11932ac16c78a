#!/usr/bin/env python3
"""The model zoo: models built by transformers, torchvision and timm with
their own code (random weights, seeded; batch 1), each through
torch.compile(backend="tensorjit"), eager and Inductor, and through the
ONNX door (torch.onnx.export, then tensorjit.onnx.load) against ONNX
Runtime and OpenVINO (same file), at the same thread count, timed in turns
(five rounds, each engine a share of the calls in each), one process per model.

    bench/zoo.py                          # every model, a table
    bench/zoo.py --models resnet18,gpt2   # some
    bench/zoo.py --busy 2                 # beside 2 background compile jobs
    bench/zoo.py --json out.json          # the rows as JSON too
    bench/zoo.py --list                   # the models

Per model and door: passed (cosine >= 0.99999 and max |error| <= 1e-4 of
the output's largest magnitude, against eager), the median and p90 ms per
call (at least --calls calls, after a warm-up), the first call (compile)
time (warm caches unless --cold; Dynamo and AOTAutograd already started,
by a function of their own, so that the first backend does not pay for
both), and the speedups over eager, Inductor
and ONNX Runtime. A model that fails says where, in one line.
bench/setup --zoo installs what it needs."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = {
    # name: (library, what it is)
    "bert": ("transformers", "BertModel(BertConfig()), sequence 128"),
    "gpt2": ("transformers", "GPT2LMHeadModel(GPT2Config()), sequence 128, use_cache=False"),
    "llama": ("transformers", "LlamaForCausalLM, hidden 1024, intermediate 2816, 4 layers, 16 heads, 4 KV heads, vocab 32000; sequence 128"),
    "distilbert": ("transformers", "DistilBertModel(DistilBertConfig()), sequence 128"),
    "vit": ("transformers", "ViTModel(ViTConfig()), 224x224"),
    "resnet18": ("torchvision", "resnet18(), 224x224"),
    "resnet50": ("torchvision", "resnet50(), 224x224"),
    "mobilenet_v3_small": ("torchvision", "mobilenet_v3_small(), 224x224"),
    "efficientnet_b0": ("torchvision", "efficientnet_b0(), 224x224"),
    "convnext_tiny": ("torchvision", "convnext_tiny(), 224x224"),
    "deit_tiny_patch16_224": ("timm", "deit_tiny_patch16_224, 224x224"),
}


# Other models of the same libraries (--models others): not tuned for, a
# check that the backend was built for the libraries and not for the list.
# Decoders get small configs (4 layers) so the sweep stays minutes long.
OTHER_HF = {
    "roberta": lambda tf: (tf.RobertaModel(tf.RobertaConfig()), 50265),
    "albert": lambda tf: (tf.AlbertModel(tf.AlbertConfig(hidden_size=768, intermediate_size=3072, num_attention_heads=12)), 30000),
    "electra": lambda tf: (tf.ElectraModel(tf.ElectraConfig()), 30522),
    "mobilebert": lambda tf: (tf.MobileBertModel(tf.MobileBertConfig()), 30522),
    "deberta_v2": lambda tf: (tf.DebertaV2Model(tf.DebertaV2Config(hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                                                                   intermediate_size=3072)), 128100),
    "t5_encoder": lambda tf: (tf.T5EncoderModel(tf.T5Config()), 32128),
    "bart": lambda tf: (tf.BartModel(tf.BartConfig(encoder_layers=4, decoder_layers=4)), 50265),
    "opt": lambda tf: (tf.OPTForCausalLM(tf.OPTConfig(num_hidden_layers=4)), 50272),
    "gpt_neo": lambda tf: (tf.GPTNeoForCausalLM(tf.GPTNeoConfig(hidden_size=768, num_layers=4, num_heads=12,
                                                                 attention_types=[[["global", "local"], 2]])), 50257),
    "qwen2": lambda tf: (tf.Qwen2ForCausalLM(tf.Qwen2Config(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                                             num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)), 32000),
    "mistral": lambda tf: (tf.MistralForCausalLM(tf.MistralConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                                                   num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)), 32000),
    "gemma": lambda tf: (tf.GemmaForCausalLM(tf.GemmaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                                             num_attention_heads=16, num_key_value_heads=4, head_dim=64,
                                                             vocab_size=32000)), 32000),
    "phi": lambda tf: (tf.PhiForCausalLM(tf.PhiConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                                       num_attention_heads=16, vocab_size=32000)), 32000),
    "clip_vision": lambda tf: (tf.CLIPVisionModel(tf.CLIPVisionConfig()), None),
    "swin": lambda tf: (tf.SwinModel(tf.SwinConfig()), None),
}
OTHERS = list(OTHER_HF) + [
    # torchvision
    "vgg11", "densenet121", "squeezenet1_1", "shufflenet_v2_x1_0", "mnasnet1_0", "regnet_y_400mf", "googlenet",
    "mobilenet_v2", "swin_t", "vit_b_16", "resnext50_32x4d", "efficientnet_v2_s", "maxvit_t", "wide_resnet50_2",
    "seg:fcn_resnet50", "seg:deeplabv3_mobilenet_v3_large", "seg:lraspp_mobilenet_v3_large",
    # timm
    "timm:resnet50d", "timm:mobilevit_s", "timm:levit_128", "timm:poolformer_s12", "timm:swin_tiny_patch4_window7_224",
    "timm:regnetx_002", "timm:cspresnet50", "timm:dla34", "timm:ghostnet_100", "timm:mixer_b16_224",
    "timm:vit_small_patch16_224", "timm:beit_base_patch16_224", "timm:coat_lite_tiny", "timm:xcit_nano_12_p16_224",
    "timm:rexnet_100", "timm:lcnet_050", "timm:edgenext_small", "timm:efficientformer_l1", "timm:convmixer_768_32",
    "timm:hrnet_w18_small",
]


def build(name):
    """(model, inputs as keyword arguments), seeded; a weight matrix that its
    library initializes to zeros (torchvision's ViT head, timm's Mixer head)
    is drawn at random, so that the output is not zeros whatever runs it."""
    import torch
    model, kw = _build(name)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return model, kw


def _build(name):
    import torch
    torch.manual_seed(0)
    if name in OTHER_HF:
        import transformers as tf
        model, vocab = OTHER_HF[name](tf)
        if vocab is None:
            return model, {"pixel_values": torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))}
        kw = {"input_ids": torch.randint(0, vocab, (1, 128), generator=torch.Generator().manual_seed(1))}
        if hasattr(model.config, "use_cache"):
            kw["use_cache"] = False
        return model, kw
    if name.startswith("seg:"):  # torchvision's segmentation models: dilated backbones, atrous pyramids, bilinear upsampling
        import inspect
        import torchvision.models.segmentation as seg
        model = getattr(seg, name[len("seg:"):])(weights=None, weights_backbone=None)
        first = next(iter(inspect.signature(model.forward).parameters))  # x, or LRASPP's input
        return model, {first: torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))}
    if name.startswith("timm:"):
        lib, name = "timm", name[len("timm:"):]
    else:
        lib = MODELS[name][0] if name in MODELS else ("timm" if "_" in name else "torchvision")
        import torchvision.models as tv
        if lib == "timm" and hasattr(tv, name):
            lib = "torchvision"
    if lib == "transformers":
        import transformers as tf
        ids = lambda vocab: torch.randint(0, vocab, (1, 128), generator=torch.Generator().manual_seed(1))  # noqa: E731
        if name == "bert":
            return tf.BertModel(tf.BertConfig()), {"input_ids": ids(30522)}
        if name == "gpt2":
            return tf.GPT2LMHeadModel(tf.GPT2Config()), {"input_ids": ids(50257), "use_cache": False}
        if name == "llama":
            c = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                               num_key_value_heads=4, vocab_size=32000)
            return tf.LlamaForCausalLM(c), {"input_ids": ids(32000), "use_cache": False}
        if name == "distilbert":
            return tf.DistilBertModel(tf.DistilBertConfig()), {"input_ids": ids(30522)}
        if name == "vit":
            return tf.ViTModel(tf.ViTConfig()), {"pixel_values": torch.randn(1, 3, 224, 224)}
        raise KeyError(name)
    image = {"x": torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))}
    if lib == "torchvision":
        import torchvision.models as tv
        return getattr(tv, name)(), image
    import timm
    return timm.create_model(name, pretrained=False), image


def first_tensor(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state") and out.last_hidden_state is not None:
        return out.last_hidden_state
    if hasattr(out, "logits") and out.logits is not None:
        return out.logits
    if isinstance(out, dict):
        return first_tensor(next(iter(out.values())))
    return first_tensor(out[0])


def agreement(got, want):
    """(cosine, max |error| / max |want|) over the flattened outputs."""
    import torch
    g, w = got.detach().double().flatten(), want.detach().double().flatten()
    cos = float(torch.dot(g, w) / (g.norm() * w.norm()).clamp_min(1e-300))
    rel = float((g - w).abs().max() / w.abs().max().clamp_min(1e-300))
    return cos, rel


kRounds = 5  # the ONNX door's engines take turns this many times (run_onnx)


def timed(call, calls, seconds):
    """Per-call times (ms) after one warm-up: at least `calls`, until `seconds` pass."""
    call()
    ts = []
    start = time.perf_counter()
    while len(ts) < calls or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        call()
        ts.append((time.perf_counter() - t0) * 1e3)
        if len(ts) >= 200:
            break
    return ts


def summary(ts):
    s = sorted(ts)
    return {"median_ms": statistics.median(s), "p90_ms": s[min(len(s) - 1, int(0.9 * len(s)))], "calls": len(s)}


def run_one(name, args):
    """One model in this process: a dict of results per door."""
    import torch
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TJ_NUM_THREADS", str(args.threads))
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    model, kw = build(name)
    model.eval()
    r = {"model": name, "threads": args.threads}
    with torch.no_grad():
        want = first_tensor(model(**kw))
        eager = summary(timed(lambda: model(**kw), args.calls, args.seconds))
        r["eager"] = eager
        # Dynamo's and AOTAutograd's one-time start (imports, first frame) on
        # a function of its own, so that neither backend's first call below
        # pays it (both run AOTAutograd).
        torch.compile(lambda x: x + 1, backend="aot_eager")(torch.ones(2))
        for backend in [b for b in ("tensorjit", "inductor") if b in args.doors]:
            torch._dynamo.reset()
            row = {}
            try:
                if backend == "tensorjit":
                    import tensorjit._torch as tjt
                    c = torch.compile(model, backend=tjt.backend)
                else:
                    c = torch.compile(model)
                t0 = time.perf_counter()
                got = first_tensor(c(**kw))
                row["first_call_s"] = time.perf_counter() - t0
                row["cosine"], row["max_rel_err"] = agreement(got, want)
                row["passed"] = row["cosine"] >= 0.99999 and row["max_rel_err"] <= 1e-4
                row.update(summary(timed(lambda: c(**kw), args.calls, args.seconds)))
            except Exception as e:  # noqa: BLE001 - a failing model is a row of the table
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            r[backend] = row
        if "onnx" in args.doors:
            r.update(run_onnx(model, kw, want, args))
    return r


def run_onnx(model, kw, want, args):
    """torch.onnx.export, then tensorjit.onnx.load and ONNX Runtime on the same file."""
    import numpy as np
    import torch
    out = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        names = list(kw)
        tensors = {k: v for k, v in kw.items() if isinstance(v, torch.Tensor)}
        consts = {k: v for k, v in kw.items() if not isinstance(v, torch.Tensor)}

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *xs):
                return first_tensor(self.m(**dict(zip(tensors, xs)), **consts))

        # The TorchScript exporter, or where it cannot (aten::diff in
        # transformers' causal masks), the torch.export one (onnxscript).
        import warnings
        errors = []
        for dynamo in (False, True):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.onnx.export(Wrap().eval(), tuple(tensors.values()), path, input_names=list(tensors), output_names=["out"],
                                      dynamo=dynamo, opset_version=18 if dynamo else 17)
                out["onnx_exporter"] = "torch.export" if dynamo else "TorchScript"
                break
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        else:
            return {"onnx_export_error": "; ".join(errors)}
        feeds = {k: v.numpy() for k, v in tensors.items()}
        runners = {}  # door -> a call, once it has loaded and passed its first call
        row = {}
        try:
            import tensorjit
            t0 = time.perf_counter()
            m = tensorjit.onnx.load(path)
            (got,) = m(**feeds)
            row["first_call_s"] = time.perf_counter() - t0
            row["cosine"], row["max_rel_err"] = agreement(torch.from_numpy(np.asarray(got)), want)
            row["passed"] = row["cosine"] >= 0.99999 and row["max_rel_err"] <= 1e-4
            runners["onnx_tensorjit"] = lambda: m(**feeds)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        out["onnx_tensorjit"] = row
        row = {}
        try:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            t0 = time.perf_counter()
            (got,) = s.run(None, feeds)
            row["first_call_s"] = time.perf_counter() - t0
            row["cosine"], row["max_rel_err"] = agreement(torch.from_numpy(got), want)
            runners["onnx_ort"] = lambda: s.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        out["onnx_ort"] = row
        # OpenVINO on the same file, at the same thread count, tuned for
        # latency, computing in f32 as the others do (on a CPU with AMX it
        # would otherwise infer in bf16: cosine 0.99999, errors of 4e-3).
        row = {}
        try:
            import openvino as ov
            core = ov.Core()
            compiled = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": args.threads, "PERFORMANCE_HINT": "LATENCY",
                                                        "INFERENCE_PRECISION_HINT": "f32"})
            request = compiled.create_infer_request()
            t0 = time.perf_counter()
            got = request.infer(feeds)[compiled.output(0)]
            row["first_call_s"] = time.perf_counter() - t0
            row["cosine"], row["max_rel_err"] = agreement(torch.from_numpy(np.asarray(got)), want)
            runners["onnx_openvino"] = lambda: request.infer(feeds)
        except ImportError:
            row["error"] = "openvino is not installed (bench/setup --openvino)"
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        out["onnx_openvino"] = row
        # The doors timed in turns, kRounds of them, each a share of the
        # calls and seconds: this machine has phases of a minute or more in
        # which everything runs 1.6-1.8x slower, and doors timed one after
        # the other met them apart (a model's ratio moved by 30-70% between
        # runs); in turns, each door's median is over the same phases.
        times = {k: [] for k in runners}
        for _ in range(kRounds):
            for k, call in runners.items():
                times[k] += timed(call, max(1, -(-args.calls // kRounds)), args.seconds / kRounds)
        for k, ts in times.items():
            out[k].update(summary(ts))
    return out


def table(results):
    def ms(r):
        return f"{r['median_ms']:8.2f} {r['p90_ms']:8.2f}" if "median_ms" in r else f"{'-':>8s} {'-':>8s}"

    def ratio(a, b):
        return f"{b['median_ms'] / a['median_ms']:6.2f}x" if "median_ms" in a and "median_ms" in b else f"{'-':>7s}"

    lines = [f"{'model':24s} {'door':16s} {'pass':5s} {'cosine':>10s} {'rel.err':>8s} {'median':>8s} {'p90':>8s} {'first':>7s} "
             f"{'vs eager':>8s} {'vs ind.':>8s} {'vs ORT':>8s} {'vs OV':>8s}"]
    speed = {"eager": [], "inductor": []}
    for r in results:
        name = r["model"]
        if "error" in r:
            lines.append(f"{name:24s} {'-':16s} FAILED: {r['error']}")
            continue
        e = r.get("eager", {})
        lines.append(f"{name:24s} {'eager':16s} {'':5s} {'':>10s} {'':>8s} {ms(e)}")
        for door in ("tensorjit", "inductor", "onnx_tensorjit", "onnx_ort", "onnx_openvino"):
            if door not in r:
                continue
            d = r[door]
            if "error" in d:
                lines.append(f"{'':24s} {door:16s} FAIL  {d['error']}")
                continue
            ok = "yes" if d.get("passed") else ("no" if "passed" in d else "")
            vs_ort = ratio(d, r.get("onnx_ort", {})) if door == "onnx_tensorjit" else f"{'':>7s}"
            vs_ov = ratio(d, r.get("onnx_openvino", {})) if door == "onnx_tensorjit" else f"{'':>7s}"
            peer = door in ("onnx_ort", "onnx_openvino")
            lines.append(f"{'':24s} {door:16s} {ok:5s} {d['cosine']:10.7f} {d['max_rel_err']:8.1e} {ms(d)} {d['first_call_s']:6.1f}s "
                         f"{ratio(d, e) if not peer else '':>8s} {ratio(d, r.get('inductor', {})) if door == 'tensorjit' else '':>8s} {vs_ort:>8s} {vs_ov:>8s}")
            if door == "tensorjit" and d.get("passed"):
                speed["eager"].append(e["median_ms"] / d["median_ms"])
                if "median_ms" in r.get("inductor", {}):
                    speed["inductor"].append(r["inductor"]["median_ms"] / d["median_ms"])
        if "onnx_export_error" in r:
            lines.append(f"{'':24s} {'onnx':16s} export failed: {r['onnx_export_error']}")
    # Only where the torch.compile door ran (--doors onnx leaves it out).
    ran = [r for r in results if "tensorjit" in r]
    if ran:
        passed = sum(1 for r in ran if r["tensorjit"].get("passed"))
        lines.append(f"torch.compile(backend=tensorjit): {passed} of {len(ran)} passed")
    for k, v in speed.items():
        if v:
            lines.append(f"geomean speedup of tensorjit over {k} (passing models): {statistics.geometric_mean(v):.2f}x over {len(v)}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated; 'others' is {len(OTHERS)} other models of the same libraries; "
                    "other torchvision names, seg:NAME (torchvision's segmentation models) and timm:NAME work too")
    ap.add_argument("--doors", default="tensorjit,inductor,onnx", help="of tensorjit, inductor, onnx")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TJ_THREADS", "2")))
    ap.add_argument("--calls", type=int, default=5, help="at least this many timed calls per door")
    ap.add_argument("--seconds", type=float, default=2.0, help="and at least this long")
    ap.add_argument("--busy", type=int, default=0, help="background compile jobs while timing")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per model")
    ap.add_argument("--cold", action="store_true", help="each model's process with empty compile caches (tensorjit's and Inductor's): "
                    "the first call's time is a cold compile")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every model passes through torch.compile(backend=tensorjit)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.doors = args.doors.split(",")
    args.models = ",".join(",".join(OTHERS) if m == "others" else m for m in args.models.split(","))
    if args.list:
        for k, (lib, what) in MODELS.items():
            print(f"{k:24s} {lib:13s} {what}")
        print("others: " + ", ".join(OTHERS))
        return 0
    if args.one:
        try:
            r = run_one(args.one, args)
        except Exception as e:  # noqa: BLE001
            r = {"model": args.one, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        print("ZOO-RESULT " + json.dumps(r))
        return 0
    results = []
    import contextlib
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    busy = contextlib.nullcontext()
    if args.busy:
        from compare_numpy import BusyLoad
        tmp = tempfile.mkdtemp()
        busy = BusyLoad(args.busy, args.timeout * len(args.models.split(",")), tmp)
    with busy:
        for name in args.models.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--threads", str(args.threads), "--calls", str(args.calls),
                   "--seconds", str(args.seconds), "--doors", ",".join(args.doors)]
            print(f"[zoo] {name} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            env = dict(os.environ)
            cold = tempfile.mkdtemp() if args.cold else None
            if cold:
                env.update(TJ_CACHE_DIR=os.path.join(cold, "tj"), TORCHINDUCTOR_CACHE_DIR=os.path.join(cold, "inductor"))
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
                line = next((l for l in p.stdout.splitlines() if l.startswith("ZOO-RESULT ")), None)
                r = json.loads(line[len("ZOO-RESULT "):]) if line else {"model": name, "error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:] }"}
            except subprocess.TimeoutExpired:
                r = {"model": name, "error": f"timed out after {args.timeout:.0f} s"}
            finally:
                if cold:
                    import shutil
                    shutil.rmtree(cold, ignore_errors=True)
            print(f"[zoo] {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            results.append(r)
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.check and not all(r.get("tensorjit", {}).get("passed") for r in results):
        print("zoo: a model did not pass through torch.compile(backend=tensorjit)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
