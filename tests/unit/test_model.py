"""Parameter counts reproduce the paper's Table 3 (base 65M, big 213M) with a shared 37 000-token vocabulary."""

import pytest
import torch

import transformer_course as tc


def build_on_meta(**kwargs):
    # The meta device allocates no memory: the 213M-parameter model is built in milliseconds.
    with torch.device("meta"):
        return tc.Transformer(37_000, 37_000, share_embeddings=True, **kwargs)


@pytest.mark.parametrize(
    ("row", "kwargs", "paper_millions"),
    [
        ("base", dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048), 65),
        ("big", dict(d_model=1024, n_heads=16, n_layers=6, d_ff=4096), 213),
    ],
)
def test_table3_parameter_counts(row, kwargs, paper_millions):
    count = tc.count_parameters(build_on_meta(**kwargs))
    assert abs(count / 1e6 - paper_millions) / paper_millions < 0.07, f"{row}: {count / 1e6:.1f}M"


def test_count_by_formula_and_tying():
    """Count the base model by hand from the architecture: tying removes two vocabulary matrices."""
    d, ff, n, v = 512, 2048, 6, 37_000
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    encoder = n * (attention + ffn + 2 * norm)
    decoder = n * (2 * attention + ffn + 3 * norm)
    assert tc.count_parameters(build_on_meta(d_model=d, n_heads=8, n_layers=n, d_ff=ff)) == v * d + encoder + decoder
    with torch.device("meta"):
        untied = tc.Transformer(v, v, share_embeddings=False)
    assert tc.count_parameters(untied) == 3 * v * d + encoder + decoder


def test_tied_weights_are_one_tensor():
    model = tc.Transformer(20, 20, d_model=8, n_heads=2, n_layers=1, d_ff=16, share_embeddings=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.lm_head.weight
    with torch.no_grad():
        model.lm_head.weight[3, 0] = 42.0
    assert model.src_embed.weight[3, 0] == 42.0
