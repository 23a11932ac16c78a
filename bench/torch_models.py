#!/usr/bin/env python3
"""Models written here in PyTorch (random weights), exported to ONNX and run
by tensorjit, compiled and interpreted, against PyTorch's own outputs:

- a small CNN: Conv (padding, stride, groups), BatchNorm, ReLU, MaxPool,
  AveragePool, global pooling, Flatten, Linear; dynamic batch;
- a Llama-style decoder stack: RMSNorm, rotary embeddings, causal attention
  with grouped KV heads, SwiGLU MLP, residuals; dynamic batch and sequence;
- the CNN again in f16 (exported from module.half()), against f32.

    bench/torch_models.py            # both models, two input shapes each
    bench/torch_models.py --keep DIR # and keep the .onnx files in DIR

Run it through bench/run-minilm's venv (bench/setup --minilm has torch).
"""
import contextlib
import copy
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2)
        self.b2 = nn.BatchNorm2d(32)
        self.c3 = nn.Conv2d(32, 32, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu(self.b2(self.c2(x)))
        x = F.avg_pool2d(self.c3(x), 2, ceil_mode=True)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.w = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Layer(nn.Module):
    def __init__(self, d=64, heads=4, kv_heads=2, ffn=172):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, heads * self.hd, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, d, bias=False)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-1, -2) / self.hd ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        s = s.masked_fill(mask, float("-inf"))
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o(a)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, layers=2, d=64, heads=4):
        super().__init__()
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.hd = d // heads

    def forward(self, x):
        t = x.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        f = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([f, f], dim=-1)
        cos, sin = emb.cos(), emb.sin()
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


def run(tjc, model, feeds, out, interpret):
    args = []
    for k, a in feeds.items():
        p = os.path.join(out, k + ".npy")
        np.save(p, a)
        args += ["--input", f"{k}={p}"]
    r = subprocess.run([tjc, "run", model, *args, "--output", out] + (["--interpret"] if interpret else []), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tjc run {model} failed:\n{r.stderr}")
    return np.load(os.path.join(out, "y.npy"))


def check(name, module, shapes, dynamic, tjc, folder, half=False):
    """half: the module exported in f16 and run on f16 inputs, against the
    f32 module on the same (f16) values."""
    module.eval()
    torch.manual_seed(0)
    reference = copy.deepcopy(module).float() if half else module
    if half:
        module = module.half()
    example = torch.randn(*shapes[0])
    if half:
        example = example.half()
    path = os.path.join(folder, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), path, input_names=["x"], output_names=["y"], dynamic_axes={"x": dynamic, "y": {0: "batch"}},
                          opset_version=17, dynamo=False)
    worst = 0.0
    for shape in shapes:
        x = torch.randn(*shape)
        if half:
            x = x.half()
        with torch.no_grad():
            want = reference(x.float()).numpy()
        for interpret in (False, True):
            got = run(tjc, path, {"x": x.numpy()}, folder, interpret)
            rel = np.abs(got.astype(np.float32) - want).max() / max(np.abs(want).max(), 1e-30)
            worst = max(worst, rel)
            print(f"  {name} {list(shape)} {'interpreted' if interpret else 'compiled':12s} max rel diff {rel:.2e}")
    return worst


def main():
    tjc = os.path.join(ROOT, "build", "tjc")
    torch.manual_seed(0)
    cnn = SmallCNN()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for b in (cnn.b1, cnn.b2):
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 2.0)
    llama = Llama()
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    if keep:
        os.makedirs(keep, exist_ok=True)
    with (contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory()) as folder:
        print("PyTorch models through ONNX, against PyTorch:")
        w1 = check("cnn", cnn, [(2, 3, 32, 32), (5, 3, 32, 32)], {0: "batch"}, tjc, folder)
        w2 = check("llama", llama, [(1, 16, 64), (3, 7, 64)], {0: "batch", 1: "seq"}, tjc, folder)
        # f16: each op rounded to 11 bits, against f32 (2^-11 is 4.9e-4).
        w3 = check("cnn_f16", copy.deepcopy(cnn), [(2, 3, 32, 32), (5, 3, 32, 32)], {0: "batch"}, tjc, folder, half=True)
    ok = max(w1, w2) < 1e-4 and w3 < 4e-3
    print(f"worst max rel diff {max(w1, w2):.2e} (f32), {w3:.2e} (f16): {'ok' if ok else 'ABOVE 1e-4 (f32) or 4e-3 (f16)'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
