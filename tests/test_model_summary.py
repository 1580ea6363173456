"""tc.summary: a layer-by-layer table of a Transformer's forward pass, with output shapes and parameter counts."""

import pytest
import torch

import transformer_course as tc


def small_model(share):
    tc.set_seed(0)
    return tc.Transformer(30, 30 if share else 20, d_model=16, n_heads=2, n_layers=2, d_ff=24, share_embeddings=share)


SRC = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])  # (B=2, S=4), one padded
TGT_IN = torch.tensor([[1, 5, 6, 7, 0], [1, 8, 9, 0, 0]])  # (B=2, T=5)


def test_top_level_rows_shapes_and_counts():
    model = small_model(share=False)
    result = tc.summary(model, SRC, TGT_IN, max_depth=1)
    rows = {row.name: row for row in result.rows}
    assert list(rows) == ["src_embed", "tgt_embed", "positions", "encoder", "decoder", "lm_head"]
    assert rows["src_embed"].shapes == ((2, 4, 16),)
    assert rows["positions"].shapes == ((2, 4, 16), (2, 5, 16))  # one table, applied to the source then the target
    assert rows["lm_head"].shapes == ((2, 5, 20),)
    assert rows["encoder"].params == tc.count_parameters(model.encoder)
    assert rows["src_embed"].params == 30 * 16 and rows["lm_head"].params == 20 * 16
    assert all(row.tied_to is None for row in result.rows)
    assert sum(row.params for row in result.rows) == result.total == tc.count_parameters(model)


def test_tied_weights_are_marked_and_counted_once():
    model = small_model(share=True)
    result = tc.summary(model, SRC, SRC[:, :3])
    rows = {row.name: row for row in result.rows}
    assert rows["tgt_embed"].tied_to == "src_embed" and rows["lm_head"].tied_to == "src_embed"
    assert rows["src_embed"].tied_to is None
    top = [row for row in result.rows if row.depth == 1]
    assert sum(row.params for row in top if row.tied_to is None) == result.total
    assert "tied to src_embed" in str(result)


def test_depth_two_lists_every_layer_and_skips_containers():
    model = small_model(share=False)
    result = tc.summary(model, SRC, TGT_IN, max_depth=2)
    names = [row.name for row in result.rows]
    assert "encoder.layers.0" in names and "decoder.layers.1" in names
    assert "encoder.layers" not in names  # an nn.ModuleList never runs: it is not a row and adds no depth
    layer = next(row for row in result.rows if row.name == "decoder.layers.1")
    assert layer.depth == 2 and layer.kind == "DecoderLayer" and layer.shapes == ((2, 5, 16),)
    assert layer.params == tc.count_parameters(model.decoder.layers[1])
    assert max(row.depth for row in result.rows) == 2


def test_the_model_is_left_as_it_was():
    model = small_model(share=False)
    model.train()
    hooks_before = sum(len(m._forward_hooks) for m in model.modules())
    text = str(tc.summary(model, SRC, TGT_IN))
    assert model.training
    assert sum(len(m._forward_hooks) for m in model.modules()) == hooks_before
    assert text.splitlines()[0].split() == ["module", "type", "output", "shape", "params"]
    assert (
        text.splitlines()[-1]
        == f"total: {tc.count_parameters(model):,} trainable parameters (tied tensors counted once)"
    )


def test_bad_depth_is_rejected():
    with pytest.raises(ValueError, match="max_depth=0 must be a positive integer"):
        tc.summary(small_model(share=False), SRC, TGT_IN, max_depth=0)
