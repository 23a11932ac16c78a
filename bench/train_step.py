"""A training step of the tiny Llama (2 layers, d=128, 8 heads over 2 KV
heads, SwiGLU 344, RoPE, vocab 256; batch 8 x 64 tokens; AdamW), side by
side in one run at the same thread count:
  - tensorjit's compiled step (forward, backward and AdamW in one graph):
    `tjc train --json`, whose every step is timed;
  - PyTorch eager, torch.compile (Inductor) of the model and
    torch.compile(backend="tensorjit") of it (forward and backward graphs
    compiled by tensorjit through AOTAutograd), each with
    torch.optim.AdamW; the losses of the first steps are checked against
    eager's.
The systems run in turn over five rounds (each round: a tjc process of N
steps after its warm compile, then N steps of each torch form); per-step
medians and p90 over the pooled steps. --busy N runs everything again
beside N compile jobs.
    bench/run-train-step [--steps N] [--busy N]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "bench"))
from compare_numpy import BusyLoad  # noqa: E402

D, H, HKV, HD, FFN, V, LAYERS, B, T = 128, 8, 2, 16, 344, 256, 2, 8, 64


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.w


def rope(x, cos, sin):
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q, self.k, self.v = nn.Linear(D, H * HD, bias=False), nn.Linear(D, HKV * HD, bias=False), nn.Linear(D, HKV * HD, bias=False)
        self.o = nn.Linear(H * HD, D, bias=False)
        self.gate, self.up, self.down = nn.Linear(D, FFN, bias=False), nn.Linear(D, FFN, bias=False), nn.Linear(FFN, D, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.n1(x)
        q = rope(self.q(h).view(b, t, H, HD).transpose(1, 2), cos, sin)
        k = rope(self.k(h).view(b, t, HKV, HD).transpose(1, 2), cos, sin)
        v = self.v(h).view(b, t, HKV, HD).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, H * HD))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.norm = RMSNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        freq = 10000.0 ** (-2.0 * torch.arange(HD // 2) / HD)
        ang = torch.arange(T)[:, None] * freq[None, :]
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def torch_steps(step, n, data):
    times, losses = [], []
    for i in range(n):
        tokens, targets = data[i % len(data)]
        t0 = time.perf_counter()
        losses.append(step(tokens, targets))
        times.append(time.perf_counter() - t0)
    return times, losses


def make_step(model, backend):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    if backend == "tensorjit":
        sys.path.insert(0, os.path.join(root, "build", "python"))
        import tensorjit._torch as tjt
        fwd = torch.compile(model, backend=tjt.backend)
    else:
        fwd = torch.compile(model) if backend else model

    def step(tokens, targets):
        opt.zero_grad(set_to_none=True)
        loss = fwd(tokens, targets)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def tjc_steps(n):
    tjc = os.path.join(root, "build", "tjc")
    r = subprocess.run([tjc, "train", "--steps", str(n), "--batch", str(B), "--seq", str(T), "--layers", str(LAYERS), "--warmup", "0",
                        "--lr", "1e-3", "--sample", "0", "--svg", "", "--json"], capture_output=True, text=True, check=True, cwd=root)
    j = json.loads(r.stdout)
    return j["step_seconds"][1:], j["loss"]


def stats(times):
    t = sorted(times)
    return t[len(t) // 2], t[min(len(t) - 1, int(len(t) * 0.9))]


def measure(n, rounds=5):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, V, (B, T), generator=gen), torch.randint(0, V, (B, T), generator=gen)) for _ in range(8)]
    steps = {}
    for name, backend in (("torch eager", None), ("torch.compile", "inductor"), ("torch.compile(backend=tensorjit)", "tensorjit")):
        torch.manual_seed(0)
        steps[name] = make_step(Model(), backend)
    # The same initial weights and data: the first losses agree (compiles the graphs).
    first = {name: torch_steps(step, 3, data)[1] for name, step in steps.items()}
    for name, losses in first.items():
        diff = max(abs(a - b) for a, b in zip(losses, first["torch eager"]))
        if diff > 1e-4:
            print(f"{name}: losses {losses} differ from eager's {first['torch eager']}", file=sys.stderr)
    pooled = {"tensorjit (tjc train)": []}
    pooled.update({name: [] for name in steps})
    for _ in range(rounds):
        pooled["tensorjit (tjc train)"] += tjc_steps(n)[0]
        for name, step in steps.items():
            pooled[name] += torch_steps(step, n, data)[0]
    return {k: stats(v) for k, v in pooled.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="steps per system per round")
    ap.add_argument("--busy", type=int, default=0, help="then again beside N compile jobs (0 to 64)")
    args = ap.parse_args()
    if not 1 <= args.steps <= 10000 or not 0 <= args.busy <= 64:
        sys.exit("--steps must be in 1..10000 and --busy in 0..64")
    torch.set_num_threads(int(os.environ.get("TJ_THREADS", "2")))
    runs = [("quiet", measure(args.steps))]
    if args.busy:
        with tempfile.TemporaryDirectory() as folder, BusyLoad(args.busy, 1800, folder):
            runs.append((f"busy {args.busy}", measure(args.steps)))
    base = "tensorjit (tjc train)"
    for label, r in runs:
        print(f"\n{'training step, batch 8 x 64 (' + label + ')':40s} {'median ms':>10s} {'p90 ms':>8s} {'tokens/s':>10s} {'vs tensorjit':>13s}")
        for name, (med, p90) in r.items():
            print(f"{name:40s} {med * 1e3:10.2f} {p90 * 1e3:8.2f} {B * T / med:10.0f} {med / r[base][0]:12.2f}x")


if __name__ == "__main__":
    main()
