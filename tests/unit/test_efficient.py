"""Chapter 13, transformer_course/efficient.py: the fused attention path and the KV cache.

The cache is checked against the uncached model: greedy decoding, beam search and the logits of every step
must agree, also past the buffer growth, when rows finish early and when beam search reorders rows.
"""

import copy
import functools

import pytest
import torch

import transformer_course as tc
from transformer_course import efficient
from transformer_course.efficient import KVCache, LayerCache, decode_cached

VOCAB, BOS, EOS, PAD = 20, 1, 2, 0


SEEDS = [0, 1, 2]


def make_model(seed: int, norm_first: bool, n_layers: int = 2) -> tc.Transformer:
    torch.manual_seed(seed)
    return tc.Transformer(
        VOCAB, VOCAB, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, dropout=0.0, norm_first=norm_first
    ).eval()


def make_src(seed: int, batch: int, length: int = 7) -> torch.Tensor:
    """Random source sentences (ids 3..VOCAB-1); rows after the first are padded to different lengths."""
    g = torch.Generator().manual_seed(100 + seed)
    src = torch.randint(3, VOCAB, (batch, length), generator=g)
    for row in range(1, batch):
        src[row, length - row % (length - 1) :] = PAD
    return src


class ForceEos:
    """A hook on the output layer that makes row `row` emit EOS at generation step `step` (counted from 1).

    Both decoding paths call the output layer once per step, so the hook changes them alike; it makes
    one row finish early while the others go on, so padding enters the decoded prefix.
    """

    def __init__(self, row: int, step: int):
        self.row, self.step, self.calls = row, step, 0

    def __call__(self, module, inputs, logits):
        self.calls += 1
        if self.calls == self.step:
            logits = logits.clone()
            logits[self.row, -1, EOS] = float("inf")
        return logits


def greedy_both(model, src, max_len, hook_factory=None):
    outputs = []
    for use_cache in (True, False):
        handle = model.lm_head.register_forward_hook(hook_factory()) if hook_factory else None
        try:
            outputs.append(tc.greedy_decode(model, src, max_len, BOS, EOS, use_cache=use_cache))
        finally:
            if handle is not None:
                handle.remove()
    return outputs


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("seed", SEEDS)
def test_greedy_cached_equals_uncached(seed, batch, norm_first):
    model = make_model(seed, norm_first)
    cached, uncached = greedy_both(model, make_src(seed, batch), max_len=20)
    assert torch.equal(cached, uncached)
    assert cached[:, 0].eq(BOS).all()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("seed", SEEDS)
def test_greedy_cached_equals_uncached_when_a_row_finishes_early(seed, norm_first):
    model = make_model(seed, norm_first)
    cached, uncached = greedy_both(model, make_src(seed, 3), max_len=10, hook_factory=lambda: ForceEos(row=1, step=3))
    assert torch.equal(cached, uncached)
    # Row 1 ended at step 3 and was padded from then on; the others went on to max_len unless they ended too.
    assert cached[1, 3] == EOS and cached[1, 4:].eq(PAD).all()
    assert cached.shape[1] > 4


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("beam_size", [1, 3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_beam_search_cached_equals_uncached(seed, beam_size, norm_first):
    model = make_model(seed, norm_first)
    src = make_src(seed, 1)
    cached = tc.beam_search(model, src, beam_size, 12, BOS, EOS, use_cache=True)
    uncached = tc.beam_search(model, src, beam_size, 12, BOS, EOS, use_cache=False)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_cached_logits_equal_full_decode_past_the_buffer_growth(norm_first):
    # 40 positions: the cache's buffers start with room for 16 and are regrown twice on the way.
    model = make_model(0, norm_first)
    src = make_src(0, 3)
    tgt = torch.randint(3, VOCAB, (3, 40), generator=torch.Generator().manual_seed(7))
    tgt[:, 0] = BOS
    tgt[2, 30:] = PAD
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, src)
        cache = KVCache(len(model.decoder.layers))
        # A 5-token prompt in one call, then one token per call.
        steps = [decode_cached(model, tgt[:, :5], memory, src, cache)]
        steps += [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in range(5, tgt.shape[1])]
    assert cache.length == tgt.shape[1]
    assert all(layer.length == tgt.shape[1] for layer in cache.layers)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.layers[0].keys.shape == cache.layers[0].values.shape == (3, 4, 40, 8)


def test_append_keeps_earlier_positions_when_the_buffer_grows():
    layer = LayerCache()
    chunks = [torch.randn(2, 3, t, 4) for t in (5, 12, 1, 30)]
    for i, chunk in enumerate(chunks):
        k, v = layer.append(chunk, -chunk)
        expected = torch.cat(chunks[: i + 1], dim=2)
        assert torch.equal(k, expected)
        assert torch.equal(v, -expected)
        assert layer.length == expected.shape[2] <= layer.capacity
    # Room for 16, then regrown to twice the length that overflowed it: 2 * 17, then 2 * 48.
    assert layer.capacity == 96


def test_select_follows_the_selected_rows():
    model = make_model(0, False)
    src = make_src(0, 3)
    tgt = torch.randint(3, VOCAB, (3, 6), generator=torch.Generator().manual_seed(3))
    tgt[:, 0] = BOS
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        memory = model.encode(src)
        cache = KVCache(len(model.decoder.layers))
        decode_cached(model, tgt[:, :5], memory, src, cache)
        before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        cache.select(index)
        for (k, v), layer in zip(before, cache.layers):
            assert torch.equal(layer.keys, k[index])
            assert torch.equal(layer.values, v[index])
        # Decoding on from the reordered cache equals decoding the reordered batch from scratch.
        step = decode_cached(model, tgt[index], memory[index], src[index], cache)
        full = model.decode(tgt[index], memory[index], src[index])
    torch.testing.assert_close(step, full[:, 5:], atol=1e-5, rtol=0)


def test_decode_refuses_a_cache_that_already_holds_every_position():
    model = make_model(0, False)
    src, tgt = make_src(0, 1), torch.tensor([[BOS, 5, 6]])
    with torch.no_grad():
        memory = model.encode(src)
        cache = KVCache(len(model.decoder.layers))
        decode_cached(model, tgt, memory, src, cache)
        with pytest.raises(ValueError, match="already in the cache"):
            decode_cached(model, tgt, memory, src, cache)


def test_a_cache_for_another_depth_is_refused():
    model = make_model(0, False, n_layers=2)
    src, tgt = make_src(0, 1), torch.tensor([[BOS]])
    with pytest.raises(ValueError, match="cache has 3 layers"):
        decode_cached(model, tgt, model.encode(src), src, KVCache(3))


def test_a_cached_step_projects_with_the_three_weights_never_restacking_them(monkeypatch):
    # project_qkv concatenates W_Q, W_K and W_V at every call, a copy larger than the product for one token.
    model = make_model(0, norm_first=False)
    src, tgt = make_src(0, batch=2), make_src(1, batch=2, length=6)
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, src)  # uncached: project_qkv, allowed

        def restacks(self, x):
            raise AssertionError("project_qkv called during a cached step")

        monkeypatch.setattr(tc.MultiHeadAttention, "project_qkv", restacks)
        cache = KVCache(len(model.decoder.layers))
        steps = [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_fast_path_equals_teaching_path_and_skips_weights():
    mha = tc.MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = tc.padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]))
    slow = mha(x, x, x, mask)
    assert mha.attn_weights.shape == (2, 4, 5, 5)
    tc.use_fused_attention(mha)
    fast = mha(x, x, x, mask)
    assert mha.attn_weights is None
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)


def test_cached_decode_equals_full_decode():
    torch.manual_seed(0)
    model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 4, 5, 6, 7], [1, 8, 9, 3, 2]])
    memory = model.encode(src)
    full = model.decode(tgt, memory, src)
    cache = tc.KVCache(len(model.decoder.layers))
    steps = [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_fused_norms_equal_the_teaching_norms_and_their_gradients(kind, dtype):
    torch.manual_seed(0)
    teaching = tc.LayerNorm(16, eps=1e-3) if kind == "layer" else tc.RMSNorm(16, eps=1e-3)
    with torch.no_grad():  # a gain and a bias that are not the identity, inputs far from mean 0 and variance 1
        for p in teaching.parameters():
            p.copy_(torch.randn_like(p))
    teaching = teaching.to(dtype)
    fused = tc.use_fused_norms(copy.deepcopy(teaching))
    x = (torch.randn(3, 5, 16) * 40 + 7).to(dtype)
    outputs = []
    for norm in (teaching, fused):
        inputs = x.clone().requires_grad_()
        out = norm(inputs)
        out.float().pow(2).sum().backward()
        outputs.append((out, inputs.grad, norm.weight.grad))
    tolerance = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    for ours, theirs in zip(outputs[0], outputs[1]):
        assert ours.dtype == theirs.dtype == dtype
        torch.testing.assert_close(theirs.float(), ours.float(), **tolerance)


def test_fused_attention_zeroes_rows_with_no_visible_key_where_pytorch_does_not(monkeypatch):
    # PyTorch before 2.5 returned NaN for such a row: imitate it, and the package's own pass must make it 0.
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def older_sdpa(q, k, v, attn_mask=None, **kwargs):
        out = sdpa(q, k, v, attn_mask=attn_mask, **kwargs)
        return out.masked_fill(~attn_mask.any(dim=-1, keepdim=True), float("nan"))

    monkeypatch.setattr(efficient.F, "scaled_dot_product_attention", older_sdpa)
    q = torch.randn(1, 2, 3, 4)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    monkeypatch.setattr(efficient, "SDPA_ZEROES_MASKED_ROWS", False)
    out = tc.fused_attention(q, q, q, mask)
    assert torch.all(out[:, :, 1] == 0) and torch.isfinite(out).all()
    monkeypatch.setattr(efficient, "SDPA_ZEROES_MASKED_ROWS", True)  # the flag alone decides, on the CPU
    assert torch.isnan(tc.fused_attention(q, q, q, mask)[:, :, 1]).all()


def test_use_fused_norms_switches_every_norm_of_a_model_and_back():
    torch.manual_seed(0)
    model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, norm_first=True, dropout=0.0).eval()
    src, tgt = torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 4, 5, 6]])
    expected = model(src, tgt)
    norms = [m for m in model.modules() if isinstance(m, tc.LayerNorm)]
    assert len(norms) == 2 * 2 + 3 * 2 + 2  # two sub-layers per encoder layer, three per decoder layer, two finals
    tc.use_fused_norms(model)
    assert all(isinstance(vars(m).get("forward"), functools.partial) for m in norms)
    torch.testing.assert_close(model(src, tgt), expected, atol=1e-5, rtol=0)
    twin = copy.deepcopy(model)  # a copy's norms compute with the copy's own weights
    with torch.no_grad():
        twin.decoder.norm.weight.mul_(2)
    assert not torch.allclose(twin(src, tgt), expected, atol=1e-3)
    torch.testing.assert_close(model(src, tgt), expected, atol=1e-5, rtol=0)
    tc.use_fused_norms(model, on=False)
    assert not any("forward" in vars(m) for m in norms)
    torch.testing.assert_close(model(src, tgt), expected, atol=0, rtol=0)


def test_a_fused_norm_still_checks_its_input_when_called_alone():
    norm = tc.use_fused_norms(tc.LayerNorm(8))
    with pytest.raises(ValueError, match=r"x has 7 features, expected d_model=8"):
        norm(torch.randn(2, 7))
    with pytest.raises(TypeError, match=r"on must be a bool"):
        tc.use_fused_norms(norm, on=1)
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module"):
        tc.use_fused_norms([norm])


# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


ATOL = 1e-5


B, T, S, D, H, FF = 3, 5, 7, 16, 4, 32


def test_fused_attention_equals_teaching_path():
    q, k, v = (torch.randn(B, H, T, 8) for _ in range(3))
    mask = tc.padding_mask(torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0]]))
    torch.testing.assert_close(
        tc.fused_attention(q, k, v, mask), tc.scaled_dot_product_attention(q, k, v, mask)[0], atol=ATOL, rtol=0
    )


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


q4 = torch.randn(2, 2, 4, 8)


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("fused mask that does not broadcast", lambda: tc.fused_attention(q4, q4, q4, torch.ones(3, 1, 4, 4).bool()),
     ValueError, r"mask has shape \(3, 1, 4, 4\)"),
    ("fused dropout below zero", lambda: tc.fused_attention(q4, q4, q4, dropout_p=-0.1), ValueError,
     r"dropout_p=-0.1 must be in \[0, 1\)"),
    ("append keys of another head size", lambda: filled_layer_cache().append(torch.randn(1, 2, 1, 5),
     torch.randn(1, 2, 1, 5)), ValueError, r"k has shape \(1, 2, 1, 5\).*the cache holds \(B, H, length, d_k\) = "
     r"\(1, 2, 3, 4\)"),
    ("append keys and values of two lengths", lambda: LayerCache().append(torch.randn(1, 2, 3, 4),
     torch.randn(1, 2, 2, 4)), ValueError, r"k \(1, 2, 3, 4\) and v \(1, 2, 2, 4\) must share one shape"),
    ("append 3-D keys", lambda: LayerCache().append(torch.randn(2, 3, 4), torch.randn(2, 3, 4)), ValueError,
     r"k must have 4 dimensions, got shape \(2, 3, 4\)"),
    ("project inputs of another width", lambda: LayerCache().project(tc.MultiHeadAttention(8, 2),
     *[torch.randn(1, 1, 6)] * 3), ValueError, r"query has 6 features, expected d_model=8"),
    ("project with a Linear as attn", lambda: LayerCache().project(torch.nn.Linear(2, 2), *[torch.randn(1, 1, 2)] * 3),
     TypeError, r"attn must be a MultiHeadAttention, got Linear"),
]  # fmt: skip


def filled_layer_cache() -> LayerCache:
    """A LayerCache holding 3 positions of (B, H, d_k) = (1, 2, 4)."""
    cache = LayerCache()
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    return cache


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
