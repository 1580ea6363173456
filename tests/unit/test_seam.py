"""The package's inference seam and its doors (issue 21): one place for the cache, checks once at the door.

* The KV cache is a strategy of the attention module (`KVCache.attached` swaps `MultiHeadAttention.project`);
  the layers run their own `forward` in both paths, and afterwards every module has its own `project` back.
* `_validate.checked`: the outermost public call checks its arguments; the calls inside it do not check again.
* Renamed names keep working one release, with a DeprecationWarning: `keep_attention_weights`,
  `Transformer.generator`, and state_dicts saved with `generator.weight`.
* Rotary position embeddings added to `tc.GPT` from outside the package in three edits, through the seam:
  cached and uncached decoding stay equal.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course import _validate
from transformer_course.efficient import KVCache, decode_cached
from transformer_course.gpt import LMScorer

# ----------------------------------------------------------------------------------------- the door


def test_the_door_checks_the_outermost_call_only():
    calls = []

    def check(x):
        calls.append(x)
        if x < 0:
            raise ValueError("x must be >= 0")

    @_validate.checked(check)
    def inner(x):
        return x + 1

    @_validate.checked(check)
    def outer(x):
        return inner(x - 10)  # inner gets -9 or so: its check must not run inside the door

    assert inner(1) == 2 and calls == [1]
    calls.clear()
    assert outer(5) == -4 and calls == [5]
    with pytest.raises(ValueError, match="x must be >= 0"):
        outer(-1)
    # After an error inside or at the door, the next call is checked again.
    with pytest.raises(ValueError, match="x must be >= 0"):
        inner(-1)


def test_a_model_forward_checks_its_inputs_once(monkeypatch):
    # Count the checks that run while a Transformer translates: the door's (forward) and nothing inside it.
    counted: list[str] = []
    original = _validate.check_tensor

    def counting(x, name, *args, **kwargs):
        counted.append(name)
        return original(x, name, *args, **kwargs)

    for module in (tc.attention, tc.multihead, tc.masks, tc.embedding, tc.model):
        monkeypatch.setattr(module, "check_tensor", counting)
    torch.manual_seed(0)
    model = tc.Transformer(11, 11, d_model=16, n_heads=2, n_layers=2, d_ff=32).eval()
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4))
    model(src, tgt)
    assert counted == ["src", "tgt_in"]
    counted.clear()
    tc.MultiHeadAttention(16, 2)(torch.zeros(1, 3, 16), torch.zeros(1, 3, 16), torch.zeros(1, 3, 16))
    assert counted == ["query", "key", "value"]  # called directly, a layer is its own door


def test_a_layer_called_alone_still_refuses_bad_input():
    mha = tc.MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="query has 8 features, expected d_model=16"):
        mha(torch.zeros(1, 3, 8), torch.zeros(1, 3, 16), torch.zeros(1, 3, 16))
    with pytest.raises(ValueError, match=r"x must have 4 dimensions"):
        tc.merge_heads(torch.zeros(2, 3, 4))


def test_the_attention_scale_is_written_once():
    q, k, v = torch.randn(2, 5, 6), torch.randn(2, 7, 6), torch.randn(2, 7, 6)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(6), dim=-1) @ v  # by hand, the paper's formula
    assert tc.attention_scale(6) == pytest.approx(1 / math.sqrt(6))
    torch.testing.assert_close(tc.scaled_dot_product_attention(q, k, v)[0], expected)
    torch.testing.assert_close(tc.fused_attention(q, k, v), expected)


def test_changing_the_scale_changes_both_kernels_alike(monkeypatch):
    # The teaching path and the fused kernel read the scale from one function: change it, and both follow.
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 8)
    monkeypatch.setattr(tc.attention, "attention_scale", lambda d_k: 0.5)
    monkeypatch.setattr(tc.efficient, "attention_scale", lambda d_k: 0.5)
    expected = torch.softmax(0.5 * q @ k.transpose(-2, -1), dim=-1) @ v
    torch.testing.assert_close(tc.scaled_dot_product_attention(q, k, v)[0], expected)
    torch.testing.assert_close(tc.fused_attention(q, k, v), expected)


# ----------------------------------------------------------------------------------------- the cache seam


def _translator(seed: int = 0) -> tc.Transformer:
    torch.manual_seed(seed)
    return tc.Transformer(13, 13, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()


def test_attached_cache_swaps_project_and_gives_it_back():
    model = _translator()
    attentions = [m for m in model.decoder.modules() if isinstance(m, tc.MultiHeadAttention)]
    cache = KVCache(2)
    with cache.attached(model.decoder.layers):
        assert all("project" in vars(m) for m in attentions)
    assert not any("project" in vars(m) for m in attentions)
    with pytest.raises(RuntimeError, match="boom"), cache.attached(model.decoder.layers):
        raise RuntimeError("boom")
    assert not any("project" in vars(m) for m in attentions)  # given back after an error too
    with pytest.raises(ValueError, match="cache has 3 layers, the model has 2"):
        KVCache(3).attached(model.decoder.layers).__enter__()


def test_cached_decoding_runs_the_layers_own_forward(monkeypatch):
    # The cache changes what the attention module projects, not the layers: every DecoderLayer.forward runs.
    model = _translator()
    src, tgt = torch.randint(1, 13, (2, 5)), torch.randint(1, 13, (2, 6))
    calls = []
    original = tc.DecoderLayer.forward
    monkeypatch.setattr(tc.DecoderLayer, "forward", lambda self, *a: calls.append(1) or original(self, *a))
    with torch.no_grad():
        memory = model.encode(src)
        cache = KVCache(2)
        steps = [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in range(6)]
        full = model.decode(tgt, memory, src)
    assert len(calls) == 2 * 6 + 2
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------- renamed names


def test_keep_attention_weights_is_a_deprecated_alias():
    mha = tc.MultiHeadAttention(8, 2)
    with pytest.warns(DeprecationWarning, match="use_fused_attention"):
        tc.keep_attention_weights(mha, False)
    assert mha.attention is not tc.scaled_dot_product_attention
    with pytest.warns(DeprecationWarning):
        tc.keep_attention_weights(mha, True)
    assert mha.attention is tc.scaled_dot_product_attention
    with pytest.raises(TypeError, match="on must be a bool"):
        tc.use_fused_attention(mha, "yes")


def test_generator_is_a_deprecated_name_of_lm_head():
    model = _translator()
    with pytest.warns(DeprecationWarning, match="lm_head"):
        assert model.generator is model.lm_head


def test_a_state_dict_saved_with_generator_loads_into_lm_head():
    model, other = _translator(0), _translator(1)
    old = {("generator.weight" if k == "lm_head.weight" else k): v for k, v in model.state_dict().items()}
    assert "generator.weight" in old and "lm_head.weight" not in old
    other.load_state_dict(old)
    assert torch.equal(other.lm_head.weight, model.lm_head.weight)


# ----------------------------------------------------------------------------------------- configs


def test_gpt_config_is_validated_once_and_rebuilds_the_model():
    config = tc.GPTConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12, dropout=0.0)
    torch.manual_seed(0)
    model = tc.GPT.from_config(config)
    assert model.config == config and len(model.layers) == 2 and model.max_len == 12
    with pytest.raises(ValueError, match="d_model=16 is not divisible by n_heads=3"):
        tc.GPTConfig(vocab_size=20, d_model=16, n_heads=3)
    with pytest.raises(ValueError, match=r"dropout=1.5 must be in \[0, 1\)"):
        tc.GPTConfig(vocab_size=20, dropout=1.5)
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        tc.GPT.from_config({"vocab_size": 20})
    with pytest.raises(AttributeError):
        config.d_model = 32  # frozen


# ----------------------------------------------------------------------------------------- RoPE in three edits


class RotaryAttention(tc.MultiHeadAttention):
    """Edit 1: rotate queries and keys by their positions where both paths meet, in `attend`.

    `attend` receives the queries of the last T_q positions and the keys of all T_k positions, in the full pass
    (T_q = T_k) as in a cached step (the cache stores the keys unrotated), so the angles are known from the
    shapes alone; rotating every key again costs O(T_k · d_k), the order of the attention step itself.
    """

    def attend(self, q, k, v, mask=None):
        t_q, t_k = q.shape[2], k.shape[2]
        cos, sin = self.rope(0, t_k)  # (T_k, d_k)
        q = tc.apply_rope(q, cos[t_k - t_q :], sin[t_k - t_q :])
        return super().attend(q, tc.apply_rope(k, cos, sin), v, mask)


class NoPositions(nn.Module):
    """Edit 3: RoPE carries the positions, so nothing is added to the embeddings."""

    def forward(self, x, offset=0):
        return x


def add_rope(model: tc.GPT) -> tc.GPT:
    for layer in model.layers:  # edit 2: every block's attention becomes rotary, keeping its weights
        layer.self_attn.__class__ = RotaryAttention
        layer.self_attn.rope = tc.RotaryEmbedding(layer.self_attn.d_k)
    model.positions = NoPositions()  # edit 3
    return model


def test_rope_added_in_three_edits_decodes_equally_with_and_without_the_cache():
    torch.manual_seed(0)
    model = add_rope(tc.GPT(30, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40, dropout=0.0)).eval()
    ids = torch.randint(0, 30, (3, 4))
    cached = tc.generate(model, ids, 12, temperature=0)
    uncached = tc.generate(model, ids, 12, temperature=0, use_cache=False)
    assert torch.equal(cached, uncached)
    # And the logits of every step agree, not only their argmax.
    with torch.no_grad():
        full = model(cached)
        cache = model.new_cache()
        steps = [model(cached[:, :4], cache)] + [model(cached[:, t : t + 1], cache) for t in range(4, cached.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_rope_makes_attention_depend_on_relative_positions_only():
    # The rotated model sees no absolute position: a sequence shifted right behind a prefix attends the same way.
    torch.manual_seed(0)
    attn = RotaryAttention(16, 2).eval()
    attn.rope = tc.RotaryEmbedding(attn.d_k)
    x = torch.randn(1, 5, 16)
    mask = tc.causal_mask(5)
    alone = attn(x, x, x, mask)
    with_prefix = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    # Queries of the last 5 positions over the keys of those same 5 (the prefix hidden): the same outputs.
    hide_prefix = torch.cat([torch.zeros(5, 3, dtype=torch.bool), mask], dim=1)  # (5, 8)
    q, _, _ = attn.project(x, x, x)
    _, k_all, v_all = attn.project(with_prefix, with_prefix, with_prefix)
    shifted = attn.attend(q, k_all, v_all, hide_prefix)
    torch.testing.assert_close(shifted, alone, atol=1e-5, rtol=1e-5)


def test_the_rope_test_would_catch_unrotated_keys():
    # The equality above is not automatic: rotate only the queries and a shifted sequence attends differently.
    class QueriesOnly(RotaryAttention):
        def attend(self, q, k, v, mask=None):
            cos, sin = self.rope(0, k.shape[2])
            t_q = q.shape[2]
            return tc.MultiHeadAttention.attend(self, tc.apply_rope(q, cos[-t_q:], sin[-t_q:]), k, v, mask)

    torch.manual_seed(0)
    attn = QueriesOnly(16, 2).eval()
    attn.rope = tc.RotaryEmbedding(attn.d_k)
    x = torch.randn(1, 5, 16)
    with_prefix = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    hide_prefix = torch.cat([torch.zeros(5, 3, dtype=torch.bool), tc.causal_mask(5)], dim=1)
    q, _, _ = attn.project(x, x, x)
    _, k_all, v_all = attn.project(with_prefix, with_prefix, with_prefix)
    assert not torch.allclose(attn.attend(q, k_all, v_all, hide_prefix), attn(x, x, x, tc.causal_mask(5)), atol=1e-4)


# ----------------------------------------------------------------------------------------- the GPU path


@pytest.fixture
def fake_gpu(monkeypatch):
    """Every tensor reports a CUDA device and torch._assert_async only records what it is given: the record.
    A test calls monkeypatch.undo() once it is done with the fake device."""
    queued = []
    monkeypatch.setattr(torch, "_assert_async", lambda cond, message: queued.append((bool(cond), message)))

    class FakeDevice:
        type = "cuda"

    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: FakeDevice()))
    return queued


def test_token_ids_off_the_cpu_are_checked_without_reading_them(fake_gpu, monkeypatch):
    # On a GPU, reading the ids would make the host wait at every call: a forward's check is queued instead.
    _validate.check_token_ids(torch.tensor([[1, 2, 40]]), "ids", 30)
    monkeypatch.undo()
    assert fake_gpu == [(False, "ids: expected ids in [0, 29] (vocab_size=30)")]


def test_a_door_that_runs_once_per_call_reads_the_ids_off_the_cpu_too(fake_gpu, monkeypatch):
    # Decoding and generation run once per call: there the ValueError is worth one wait, even on a GPU.
    with pytest.raises(ValueError, match=r"ids: ids in \[1, 40\], expected ids in \[0, 29\]"):
        _validate.check_token_ids(torch.tensor([[1, 2, 40]]), "ids", 30, wait=True)
    monkeypatch.undo()
    assert fake_gpu == []


@pytest.mark.parametrize(
    ("module", "call"),
    [
        ("decoding", lambda model, ids: tc.greedy_decode(model, ids, 4, 1, 2)),
        ("decoding", lambda model, ids: tc.beam_search(model, ids, 2, 4, 1, 2)),
        ("decoding", lambda model, ids: tc.decoding.sequence_log_prob(model, ids, ids)),
        ("gpt", lambda model, ids: tc.generate(model, ids, 2)),
    ],
    ids=["greedy_decode", "beam_search", "sequence_log_prob", "generate"],
)
def test_decoding_and_generation_wait_for_their_ids(monkeypatch, module, call):
    # Each checks its ids with wait=True; the model's forward inside runs within the door and checks nothing.
    waits = []
    original = _validate.check_token_ids

    def recording(ids, name, vocab_size, wait=False):
        waits.append((name, wait))
        return original(ids, name, vocab_size, wait)

    monkeypatch.setattr(getattr(tc, module), "check_token_ids", recording)
    for other in ("model", "gpt", "embedding"):  # a forward's own check, were it reached, would show up too
        monkeypatch.setattr(getattr(tc, other), "check_token_ids", recording)
    torch.manual_seed(0)
    if module == "gpt":
        model = tc.GPT(12, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=8)
    else:
        model = tc.Transformer(12, 12, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    call(model, torch.tensor([[3, 4, 5]]))
    assert waits and all(wait for _, wait in waits), waits


# ----------------------------------------------------------------------------------------- checked once


@pytest.mark.parametrize(
    "build",
    [
        lambda: tc.Transformer(20, 20, d_model=16, n_heads=2, n_layers=6, d_ff=32),
        lambda: tc.GPT(20, d_model=16, n_heads=2, n_layers=6, d_ff=32, max_len=8),
    ],
    ids=["Transformer", "GPT"],
)
def test_building_a_model_checks_d_model_once(monkeypatch, build):
    # A 6+6-layer Transformer used to check d_model 65 times, in every module it builds; now its door checks it.
    counted = []
    original = _validate.check_positive_int

    def counting(value, name):
        counted.append(name)
        return original(value, name)

    for module in (tc.multihead, tc.ffn, tc.norm, tc.embedding, tc.encoder, tc.model, tc.gpt):
        monkeypatch.setattr(module, "check_positive_int", counting)
    build()
    assert counted.count("d_model") == 1 and counted.count("n_heads") == 1


def test_a_layer_built_alone_checks_its_own_arguments():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        tc.EncoderLayer(10, 4, 32)
    with pytest.raises(ValueError, match="activation='swish' is not one of"):
        tc.Decoder(16, 2, 32, n_layers=2, activation="swish")
    with pytest.raises(ValueError, match="eps=0 must be positive"):
        tc.EncoderLayer(16, 2, 32, eps=0)


def test_layers_take_a_block_config_whole():
    block = tc.encoder.BlockConfig(d_model=16, n_heads=2, d_ff=32, dropout=0.0, norm_first=True, activation="gelu")
    torch.manual_seed(0)
    layer = tc.EncoderLayer.from_config(block)
    stack = tc.Decoder.from_config(block, n_layers=3)
    assert layer.norm_first and layer.ffn.w_1.out_features == 32 and isinstance(layer.ffn.activation, nn.GELU)
    assert len(stack.layers) == 3 and isinstance(stack.norm, tc.LayerNorm)
    assert tc.GPTConfig(20, d_model=16, n_heads=2, d_ff=32).block.activation == "gelu"
    with pytest.raises(ValueError, match="d_model=16 is not divisible by n_heads=3"):
        tc.encoder.BlockConfig(d_model=16, n_heads=3)


def test_bert_config_is_checked_once_and_rebuilds_the_model():
    config = tc.BERTConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12, pad_id=3)
    model = tc.BERT.from_config(config)
    assert model.config == config and model.config.block.activation == "gelu" and len(model.encoder.layers) == 2
    with pytest.raises(ValueError, match=r"pad_id=20 must be a token id in \[0, 19\]"):
        tc.BERTConfig(vocab_size=20, pad_id=20)
    with pytest.raises(TypeError, match="config must be a BERTConfig"):
        tc.BERT.from_config(tc.GPTConfig(20))


def test_a_chunk_of_several_positions_after_a_cached_prefix_sees_the_right_causal_rows():
    # Prompt-style use: 3 positions, then a chunk of 4 at once, then single steps; every logit equals the full pass.
    model = _translator()
    src, tgt = torch.randint(1, 13, (2, 5)), torch.randint(1, 13, (2, 9))
    with torch.no_grad():
        memory = model.encode(src)
        cache = KVCache(2)
        chunks = [
            decode_cached(model, tgt[:, :3], memory, src, cache),
            decode_cached(model, tgt[:, :7], memory, src, cache),
        ]
        chunks += [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in (7, 8)]
        full = model.decode(tgt, memory, src)
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-5, rtol=1e-5)


def test_a_bare_stack_decodes_through_an_attached_cache():
    # Without a model's door around it, the layers inside `attached` must not check the new positions' mask
    # against their own keys alone (the cached ones count too).
    torch.manual_seed(0)
    encoder = tc.Encoder(16, 2, 32, n_layers=2, dropout=0.0, norm_first=True).eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        full = encoder(x, tc.causal_mask(6))
        cache = KVCache(2)
        with cache.attached(encoder.layers):
            first = encoder(x[:, :4], tc.causal_mask(4))
            rest = torch.cat([encoder(x[:, t : t + 1], tc.causal_mask(t + 1)[t:]) for t in (4, 5)], dim=1)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="query has 8 features"):  # outside the block, checked again
        encoder.layers[0].self_attn(torch.zeros(1, 2, 8), torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))


def test_stacks_and_layers_are_doors_whose_errors_name_their_own_arguments():
    encoder, decoder = tc.Encoder(8, 2, 16, 2), tc.Decoder(8, 2, 16, 2)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="x has 7 features, expected d_model=8"):
        encoder(torch.randn(2, 4, 7))
    with pytest.raises(ValueError, match="memory has 7 features, expected d_model=8"):
        decoder(x, torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="x has batch size 2 but memory has 3"):
        decoder.layers[0](x, torch.randn(3, 5, 8))
    with pytest.raises(ValueError, match=r"tgt_mask has shape \(5, 5\)"):
        decoder(x, memory, tc.causal_mask(5))
    with pytest.raises(ValueError, match=r"memory_mask has shape \(4, 4\)"):
        decoder(x, memory, tc.causal_mask(4), torch.ones(4, 4, dtype=torch.bool))


def test_from_config_does_not_check_the_config_again(monkeypatch):
    block = tc.BlockConfig(d_model=16, n_heads=2, d_ff=32)
    counted = []
    original = tc.multihead.check_head_sizes

    def counting(*args):
        counted.append(args)
        return original(*args)

    monkeypatch.setattr(tc.encoder, "check_head_sizes", counting)
    monkeypatch.setattr(tc.multihead, "check_head_sizes", counting)
    tc.EncoderLayer.from_config(block)
    tc.Encoder.from_config(block, 3)
    assert counted == []
    with pytest.raises(ValueError, match="n_layers=0 must be a positive integer"):
        tc.Encoder.from_config(block, 0)


# ----------------------------------------------------------------------------------------- the adversarial pass
# Inputs a hostile but realistic user tried on the new design, which were accepted silently or failed unclearly.


def _gpt_pair():
    torch.manual_seed(0)
    make = lambda: tc.GPT(12, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16, dropout=0.0).eval()  # noqa: E731
    return make(), make(), torch.randint(0, 12, (2, 5))


def test_a_cache_filled_by_another_model_is_refused():
    model, other, ids = _gpt_pair()
    cache = other.new_cache()
    other(ids, cache)
    with pytest.raises(ValueError, match="cache was filled by another model's layers"):
        model(ids[:, :1], cache)


def test_a_cache_of_another_batch_or_source_is_refused():
    model, _, ids = _gpt_pair()
    cache = model.new_cache()
    model(ids, cache)
    with pytest.raises(ValueError, match="cache holds 2 rows but ids has 3"):
        model(torch.zeros(3, 1, dtype=torch.long), cache)
    translator = _translator()
    src, tgt = torch.randint(1, 13, (2, 5)), torch.randint(1, 13, (2, 4))
    cache = KVCache(2)
    decode_cached(translator, tgt[:, :2], translator.encode(src), src, cache)
    other_src = src.flip(1)
    with pytest.raises(ValueError, match="memory is not the encoder output this cache was filled with"):
        decode_cached(translator, tgt[:, :3], translator.encode(other_src), other_src, cache)
    with pytest.raises(ValueError, match=r"src: ids in \[13, 13\]"):
        decode_cached(translator, tgt, translator.encode(src), torch.full((2, 5), 13), KVCache(2))
    with pytest.raises(ValueError, match="memory has 7 features"):
        decode_cached(translator, tgt, torch.randn(2, 5, 7), src, KVCache(2))


def test_cache_misuse_gets_named_errors():
    model, _, ids = _gpt_pair()
    cache = model.new_cache()
    model(ids, cache)
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 1\]"):
        cache.select(torch.tensor([5]))
    with pytest.raises(TypeError, match="rows must be a 1-D integer tensor"):
        cache.select([0, 1])
    with pytest.raises(TypeError, match="layers must be the model's layers"):
        cache.attached(model).__enter__()
    with pytest.raises(ValueError, match="a cache is already attached"), cache.attached(model.layers):
        cache.attached(model.layers).__enter__()
    assert not any("project" in vars(m) for m in model.modules())  # the outer block gave every module back


def test_self_attention_inside_attached_is_told_apart_by_its_place_not_by_identity():
    model, _, _ = _gpt_pair()
    cache, x = model.new_cache(), torch.randn(1, 2, 16)
    with torch.no_grad(), cache.attached(model.layers):
        model.layers[0].self_attn(x, x.clone(), x.clone())
    assert cache.layers[0].length == 2 and cache.layers[0].memory is None


def test_the_lm_scorer_checks_its_arguments():
    model, _, ids = _gpt_pair()
    with pytest.raises(TypeError, match="use_cache must be a bool"):
        LMScorer(model, use_cache="no")
    with pytest.raises(TypeError, match="model must be a GPT or another language model"):
        LMScorer(None)
    scorer = LMScorer(model)
    scorer(ids)
    with pytest.raises(ValueError, match="call with the sequence grown by at least one token"):
        scorer(ids)


def test_small_functions_refuse_what_they_cannot_use():
    with pytest.raises(TypeError, match="d_k must be an int, got bool"):
        tc.attention_scale(True)
    with pytest.raises(ValueError, match="d_k=0 must be a positive integer"):
        tc.attention_scale(0)
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        _validate.check_token_ids(torch.tensor([0.5, 2.9]), "ids", 10)
    with pytest.raises(TypeError, match=r"config must be a BlockConfig \(a model's config.block\)"):
        tc.EncoderLayer.from_config(tc.GPTConfig(20))
    with pytest.raises(TypeError, match=r"bert must be a transformer_course\.BERT"):
        tc.BERTClassifier(None, 2)
    model, _, ids = _gpt_pair()
    with pytest.raises(ValueError, match="is 0 in float32"):
        tc.generate(model, ids, 2, temperature=1e-320)
    assert tc.generate(model, ids, 2, temperature=1e-40).shape == (2, 7)  # tiny but not 0: the argmax


def test_a_config_or_model_built_inside_a_forward_is_checked():
    # A forward's door covers the functions it calls, not a model built inside it (in a hook, say).
    model, _, ids = _gpt_pair()
    errors = []

    def build(*args):
        for make in (lambda: tc.GPTConfig(0), lambda: tc.GPT(12, d_model=16, n_heads=5)):
            try:
                make()
            except ValueError as error:
                errors.append(str(error))

    handle = model.blocks.register_forward_hook(build)
    model(ids)
    handle.remove()
    assert errors == ["vocab_size=0 must be a positive integer", "d_model=16 is not divisible by n_heads=5"]


def test_the_old_output_name_cannot_shadow_the_new_one():
    model = _translator()
    state = model.state_dict()
    state["generator.weight"] = torch.zeros_like(state["lm_head.weight"])
    with pytest.raises(ValueError, match=r"holds both generator\.weight and lm_head\.weight"):
        model.load_state_dict(state)
    new_layer = nn.Linear(16, 13, bias=False)
    with pytest.warns(DeprecationWarning, match="lm_head"):
        model.generator = new_layer
    assert model.lm_head is new_layer and "generator.weight" not in model.state_dict()
