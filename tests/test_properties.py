"""Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens."""

import torch
from hypothesis import given
from hypothesis import strategies as st

import transformer_course as tc

ATOL = 1e-5
VOCAB = 13


def small_model(seed, norm_first=False, d_model=16, n_heads=2):
    torch.manual_seed(seed)
    return tc.Transformer(VOCAB, VOCAB + 2, d_model=d_model, n_heads=n_heads, n_layers=2, d_ff=32,
                          dropout=0.0, norm_first=norm_first).eval()  # fmt: skip


def tokens(seed, batch, length, low=1):
    """Random non-padding token ids (pad is 0)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, VOCAB, (batch, length), generator=g)


@given(
    seed=st.integers(0, 10_000),
    length=st.integers(2, 9),
    t=st.integers(0, 8),
    norm_first=st.booleans(),
)
def test_decoder_is_causal(seed, length, t, norm_first):
    """Changing target tokens after position t leaves the logits at positions 0..t unchanged."""
    t = min(t, length - 2)
    model = small_model(seed, norm_first)
    src = tokens(seed, 2, 6)
    tgt = tokens(seed + 1, 2, length)
    changed = tgt.clone()
    changed[:, t + 1 :] = tokens(seed + 2, 2, length - t - 1)
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1], atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), length=st.integers(1, 8), extra=st.integers(1, 5))
def test_source_padding_does_not_change_the_output(seed, length, extra):
    """Appending <pad> tokens to the source changes nothing: padded keys are masked out everywhere."""
    model = small_model(seed)
    src = tokens(seed, 2, length)
    padded = torch.cat([src, torch.zeros(2, extra, dtype=torch.long)], dim=1)
    tgt = tokens(seed + 1, 2, 4)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), batch=st.integers(2, 4))
def test_batch_rows_are_independent(seed, batch):
    """Each row of a padded batch gets the logits it would get alone."""
    model = small_model(seed)
    g = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint(1, 7, (batch,), generator=g).tolist()
    src = torch.zeros(batch, max(src_lengths), dtype=torch.long)
    for i, n in enumerate(src_lengths):
        src[i, :n] = tokens(seed + i, 1, n)[0]
    tgt = tokens(seed + 99, batch, 5)
    with torch.no_grad():
        together = model(src, tgt)
        for i, n in enumerate(src_lengths):
            alone = model(src[i : i + 1, :n], tgt[i : i + 1])
            torch.testing.assert_close(together[i : i + 1], alone, atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), length=st.integers(2, 8), fast=st.booleans())
def test_self_attention_is_permutation_equivariant(seed, length, fast):
    """Without positions, permuting the input rows permutes the output rows the same way."""
    torch.manual_seed(seed)
    mha = tc.use_fused_attention(tc.MultiHeadAttention(16, 4).eval(), fast)
    x = torch.randn(2, length, 16)
    perm = torch.randperm(length)
    with torch.no_grad():
        out = mha(x, x, x)
        out_perm = mha(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), length=st.integers(2, 8), norm_first=st.booleans())
def test_encoder_without_positions_is_permutation_equivariant(seed, length, norm_first):
    torch.manual_seed(seed)
    encoder = tc.Encoder(16, 2, 32, n_layers=2, dropout=0.0, norm_first=norm_first).eval()
    x = torch.randn(2, length, 16)
    perm = torch.randperm(length)
    with torch.no_grad():
        torch.testing.assert_close(encoder(x[:, perm]), encoder(x)[:, perm], atol=ATOL, rtol=0)


@given(
    seed=st.integers(0, 10_000),
    t_q=st.integers(1, 7),
    t_k=st.integers(1, 7),
    p_visible=st.floats(0.0, 1.0),
)
def test_attention_rows_sum_to_one_over_visible_keys(seed, t_q, t_k, p_visible):
    """Each query's weights sum to 1 over the keys it may see, are 0 on hidden keys; a fully hidden row is all 0."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (t_q, t_k, t_k))
    mask = torch.rand(2, 1, t_q, t_k, generator=g) < p_visible
    out, weights = tc.scaled_dot_product_attention(q, k, v, mask)
    visible_rows = mask.expand_as(weights).any(-1)
    torch.testing.assert_close(weights.sum(-1), visible_rows.float(), atol=ATOL, rtol=0)
    assert torch.all(weights[~mask.expand_as(weights)] == 0)
    assert torch.isfinite(out).all()
    assert torch.all(out[~visible_rows] == 0)
