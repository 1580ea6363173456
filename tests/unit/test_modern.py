"""Chapter 19's decoder: RoPE's relative property, GQA/MQA against MHA, SwiGLU's size, the cache, the errors."""

import math

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course.modern import (
    GroupedQueryAttention,
    ModernBlock,
    cache_bytes_per_token,
    rotate_half,
    swiglu_hidden_size,
)


def small(**overrides) -> tc.ModernDecoder:
    sizes = dict(vocab_size=23, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_len=40, rope_theta=100.0)
    sizes.update(overrides)
    torch.manual_seed(0)
    return tc.ModernDecoder(tc.ModernConfig(**sizes)).eval()


def ids_of(batch=2, length=9, vocab=23, seed=1):
    return torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---- RoPE


def rotated(x, position, rope):
    """x (d,) rotated to `position`."""
    cos, sin = rope(position, 1)
    return tc.apply_rope(x[None, None, None], cos, sin)[0, 0, 0]


def test_rope_scores_depend_only_on_the_distance():
    rope = tc.RotaryEmbedding(8, theta=100.0)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    rope = rope.double()
    for distance in (0, 1, 3, 7):
        scores = [rotated(q, n + distance, rope) @ rotated(k, n, rope) for n in (0, 2, 5, 11, 20)]
        assert max(scores) - min(scores) < 1e-5, (distance, scores)
    # ... and it does depend on the distance: 0 and 3 give different scores.
    assert abs(rotated(q, 3, rope) @ rotated(k, 0, rope) - q @ k) > 1e-3


def test_rope_is_a_rotation_of_pairs():
    rope = tc.RotaryEmbedding(6, theta=10.0)
    x = torch.randn(2, 3, 5, 6)
    cos, sin = rope(4, 5)
    out = tc.apply_rope(x, cos, sin)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5)  # lengths kept
    # By hand: pair i is (x_i, x_{i+3}), turned by the angle m / 10^(2i/6) at position m.
    m, i = 6, 1  # the third position of the block starting at 4
    angle = m / 10.0 ** (2 * i / 6)
    a, b = x[..., 2, i], x[..., 2, i + 3]
    assert torch.allclose(out[..., 2, i], a * math.cos(angle) - b * math.sin(angle), atol=1e-5)
    assert torch.allclose(out[..., 2, i + 3], a * math.sin(angle) + b * math.cos(angle), atol=1e-5)
    cos0, sin0 = rope(0, 1)
    assert torch.equal(tc.apply_rope(x[:, :, :1], cos0, sin0), x[:, :, :1])  # position 0: no rotation
    assert torch.equal(rotate_half(rotate_half(x)), -x)  # two quarter turns are a half turn


# ---- grouped-query attention


def test_repeat_kv_gives_each_group_its_head():
    x = torch.randn(2, 3, 5, 4)
    assert torch.equal(tc.repeat_kv(x, 4), x.repeat_interleave(4, dim=1))  # heads 0-3 read KV head 0, ...
    assert tc.repeat_kv(x, 1) is x


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_is_mha_with_key_and_value_heads_copied(n_kv_heads):
    """GQA = MHA whose K/V heads repeat within a group; MQA (one KV head) is the limit."""
    gqa, mha = small(n_kv_heads=n_kv_heads), small(n_kv_heads=4)
    group, head_dim = 4 // n_kv_heads, 8
    with torch.no_grad():
        for ours, full in zip(gqa.parameters(), mha.parameters()):
            if ours.shape == full.shape:
                full.copy_(ours)
        for block, full in zip(gqa.blocks, mha.blocks):
            for name in ("w_k", "w_v"):
                w = getattr(block.attn, name).weight.view(n_kv_heads, head_dim, 32)  # (H_kv · d, D) -> (H_kv, d, D)
                getattr(full.attn, name).weight.copy_(w.repeat_interleave(group, dim=0).reshape(32, 32))
    ids = ids_of()
    assert torch.allclose(gqa(ids), mha(ids), atol=1e-5)


def test_the_cache_holds_n_kv_heads_and_bytes_fall_with_them():
    per_token = {}
    for n_kv_heads in (4, 2, 1):
        model = small(n_kv_heads=n_kv_heads)
        cache = model.new_cache()
        model(ids_of(batch=1), cache)
        assert cache.layers[0].keys.shape == (1, n_kv_heads, 9, 8)
        per_token[n_kv_heads] = cache_bytes_per_token(cache)
    # 2 (K and V) × 2 layers × H_kv heads × 8 features × 4 bytes
    assert per_token == {4: 2 * 2 * 4 * 8 * 4, 2: 2 * 2 * 2 * 8 * 4, 1: 2 * 2 * 1 * 8 * 4}


def test_cached_keys_are_stored_rotated():
    model = small()
    ids = ids_of(batch=1, length=6)
    cache = model.new_cache()
    model(ids, cache)
    block = model.blocks[0]
    x = block.attn_norm(model.token_embedding(ids))
    k = block.attn.w_k(x).view(1, 6, 2, 8).transpose(1, 2)  # (B, T, H_kv · d) -> (B, H_kv, T, d)
    cos, sin = model.rope(0, 6)
    assert torch.allclose(cache.layers[0].keys, tc.apply_rope(k, cos, sin), atol=1e-6)
    assert not torch.allclose(cache.layers[0].keys, k, atol=1e-3)  # not the raw keys
    v = block.attn.w_v(x).view(1, 6, 2, 8).transpose(1, 2)
    assert torch.allclose(cache.layers[0].values, v, atol=1e-6)  # values are not rotated


@pytest.mark.parametrize("chunks", [(9,), (1,) * 9, (4, 1, 3, 1)])
def test_cached_equals_uncached(chunks):
    model, ids = small(), ids_of()
    full = model(ids)
    cache, start, parts = model.new_cache(), 0, []
    for size in chunks:
        parts.append(model(ids[:, start : start + size], cache))
        start += size
    assert torch.allclose(torch.cat(parts, dim=1), full, atol=1e-5)


def test_generate_samples_from_the_modern_decoder_with_and_without_the_cache():
    model, prompt = small(), ids_of(length=3)
    runs = [
        tc.generate(model, prompt, 12, generator=torch.Generator().manual_seed(5), use_cache=use_cache)
        for use_cache in (True, False)
    ]
    assert runs[0].shape == (2, 15) and torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :3], prompt)


def test_the_block_runs_the_full_pass_and_the_cached_step_itself():
    config = tc.ModernConfig(vocab_size=5, d_model=16, n_heads=4, n_kv_heads=1, d_ff=24, n_layers=1)
    torch.manual_seed(0)
    block, rope = ModernBlock(config), tc.RotaryEmbedding(4)
    x = torch.randn(1, 5, 16)
    cache = tc.KVCache(1).layers[0]
    steps = [block(x[:, t : t + 1], rope(t, 1), cache) for t in range(5)]
    assert torch.allclose(torch.cat(steps, dim=1), block(x, rope(0, 5)), atol=1e-5)


# ---- SwiGLU


def test_swiglu_hidden_size_follows_llama():
    assert swiglu_hidden_size(4096) == 11008  # Llama 7B
    assert swiglu_hidden_size(5120) == 13824  # Llama 13B
    assert swiglu_hidden_size(8192, multiple_of=4096) == 24576  # Llama 2 70B's rounding
    assert swiglu_hidden_size(96, multiple_of=1) == 256  # 2/3 · 4 · 96
    assert tc.ModernConfig(vocab_size=3, d_model=64).d_ff == 256  # int(170.67) = 170, up to 256


def test_swiglu_keeps_the_parameters_of_a_4d_feed_forward():
    d = 96
    swiglu = tc.SwiGLU(d, swiglu_hidden_size(d, multiple_of=1))
    ffn = tc.PositionwiseFeedForward(d, 4 * d, bias=False)
    assert tc.count_parameters(swiglu) == tc.count_parameters(ffn) == 8 * d * d


def test_swiglu_by_hand():
    torch.manual_seed(0)
    ffn, x = tc.SwiGLU(6, 10), torch.randn(2, 3, 6)
    gate = x @ ffn.w_gate.weight.T
    hidden = gate * torch.sigmoid(gate) * (x @ ffn.w_up.weight.T)
    assert torch.allclose(ffn(x), hidden @ ffn.w_down.weight.T, atol=1e-6)


# ---- the model


def test_tied_and_untied_heads():
    tied, untied = small(tie_weights=True), small(tie_weights=False)
    assert tied.lm_head.weight is tied.token_embedding.weight
    assert untied.lm_head.weight is not untied.token_embedding.weight
    assert tc.count_parameters(untied) - tc.count_parameters(tied) == 23 * 32
    assert not any(m.bias is not None for m in untied.modules() if isinstance(m, nn.Linear))


def test_the_attention_scale_is_one_over_root_head_dim():
    attn = GroupedQueryAttention(tc.ModernConfig(vocab_size=3, d_model=64, n_heads=4))
    assert attn.scale == 1 / 4


BAD_CONFIGS = [
    (dict(n_kv_heads=3), ValueError, "n_kv_heads=3 must divide n_heads=4"),
    (dict(n_heads=5), ValueError, "d_model=32 is not divisible by n_heads=5"),
    (dict(d_model=36, n_heads=4, n_kv_heads=4), ValueError, "head_dim=9 must be even"),
    (dict(n_kv_heads=0), ValueError, "n_kv_heads=0 must be a positive integer"),
    (dict(d_ff=2.5), TypeError, "d_ff must be an int"),
    (dict(rope_theta=0), ValueError, "rope_theta=0 must be a positive number"),
    (dict(eps=-1e-6), ValueError, "eps=-1e-06 must be a positive number"),
    (dict(tie_weights=1), TypeError, "tie_weights must be a bool"),
    (dict(vocab_size=0), ValueError, "vocab_size=0 must be a positive integer"),
]


@pytest.mark.parametrize(("change", "error", "words"), BAD_CONFIGS)
def test_bad_configs_are_named(change, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        small(**change)


def test_bad_inputs_are_named():
    model = small()
    with pytest.raises(TypeError, match=r"config must be a transformer_course\.ModernConfig, got dict"):
        tc.ModernDecoder(dict(vocab_size=3))
    with pytest.raises(ValueError, match=r"ids: ids in \[0, 23\], expected ids in \[0, 22\]"):
        model(torch.tensor([[0, 23]]))
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="ids is empty"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="41 positions exceed max_len=40"):
        model(torch.zeros(1, 41, dtype=torch.long))
    with pytest.raises(ValueError, match="cache has 3 layers, the model has 2 blocks"):
        model(ids_of(), tc.KVCache(3))
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        model(ids_of(), [])
    with pytest.raises(ValueError, match="cache is empty"):
        cache_bytes_per_token(model.new_cache())
    with pytest.raises(ValueError, match="exceed the model's max_len=40"):
        tc.generate(model, ids_of(length=30), 11)
    with pytest.raises(TypeError, match=r"model must be a transformer_course\.GPT or another language model"):
        tc.generate(nn.Linear(2, 2), ids_of(), 3)


def test_the_config_is_frozen():
    config = tc.ModernConfig(vocab_size=3)
    with pytest.raises(AttributeError):
        config.d_model = 8
    assert (config.n_kv_heads, config.head_dim) == (4, 64)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_rope_frequencies_stay_float32_when_the_model_is_cast(dtype):
    torch.manual_seed(0)
    config = tc.ModernConfig(vocab_size=20, d_model=32, n_layers=1, n_heads=2, max_len=4096)
    reference = tc.RotaryEmbedding(config.head_dim, config.rope_theta)(4000, 8)
    model = tc.ModernDecoder(config).to(dtype)
    assert model.token_embedding.weight.dtype == dtype and model.rope.inv_freq.dtype == torch.float32
    cos, sin = model.rope(4000, 8)
    assert torch.equal(cos, reference[0]) and torch.equal(sin, reference[1])
    with torch.no_grad():
        assert model(torch.randint(20, (1, 5))).dtype == dtype  # the attention casts cos and sin to its dtype
