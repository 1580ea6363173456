"""The package's models equal Hugging Face's, weights copied both ways (random configs, nothing downloaded)."""

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.utils import logging

import transformer_course as tc
from transformer_course import hf

logging.set_verbosity_error()
TOLERANCE = 1e-5  # float32


def llama(tie=False, n_kv_heads=2, n_layers=3, **overrides):
    config = dict(
        vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=n_layers, num_attention_heads=4,
        num_key_value_heads=n_kv_heads, max_position_embeddings=64, rope_theta=500.0, rms_norm_eps=1e-5,
        tie_word_embeddings=tie, bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )  # fmt: skip
    config.update(overrides)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**config)).eval()
    with torch.no_grad():  # RMSNorm gains start at 1: make them random so that a gain copied wrong shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            else:  # larger than the default N(0, 0.02): logits far from uniform, errors not hidden by small values
                p.normal_(0.0, 0.2)
    return model


def gpt2(activation="gelu_new", **overrides):
    config = dict(vocab_size=61, n_embd=32, n_layer=2, n_head=4, n_positions=32, activation_function=activation,
                  bos_token_id=None, eos_token_id=None)  # fmt: skip
    config.update(overrides)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**config)).eval()
    with torch.no_grad():  # random LayerNorm gains and biases, random Conv1D biases
        for name, p in model.named_parameters():
            if p.dim() == 1:  # a LayerNorm gain around 1, or a bias around 0
                p.copy_(float(name.endswith("weight")) + 0.3 * torch.randn_like(p))
            else:  # weights large enough that the GELU's inputs leave its linear part
                p.normal_(0.0, 0.2)
    return model


def ids_of(batch=2, length=20, seed=1):
    return torch.randint(61, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("n_kv_heads", [2, 1, 4])
def test_llama_logits_are_equal(tie, n_kv_heads):
    hf = llama(tie, n_kv_heads)
    ours = tc.from_hf(hf)
    assert isinstance(ours, tc.ModernDecoder)
    assert ours.config.n_kv_heads == n_kv_heads and ours.config.rope_theta == 500.0
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tie
    ids = ids_of()
    with torch.no_grad():
        assert torch.allclose(ours(ids), hf(ids).logits, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("tie", [False, True])
def test_llama_greedy_generation_gives_the_same_tokens(tie):
    hf = llama(tie)
    ours, prompt = tc.from_hf(hf), ids_of(batch=1, length=5)
    expected = hf.generate(prompt, max_new_tokens=25, do_sample=False, attention_mask=torch.ones_like(prompt))
    assert torch.equal(tc.generate(ours, prompt, 25, temperature=0), expected)
    assert torch.equal(tc.generate(ours, prompt, 25, temperature=0, use_cache=False), expected)


@pytest.mark.parametrize("activation", ["gelu_new", "gelu"])
def test_gpt2_logits_are_equal(activation):
    hf = gpt2(activation)
    ours = tc.from_hf(hf)
    assert isinstance(ours, tc.GPT)
    ids = ids_of()
    with torch.no_grad():
        assert torch.allclose(ours(ids), hf(ids).logits, atol=TOLERANCE, rtol=0)


def test_gpt2_greedy_generation_gives_the_same_tokens():
    hf = gpt2()
    ours, prompt = tc.from_hf(hf), ids_of(batch=1, length=4)
    expected = hf.generate(prompt, max_new_tokens=20, do_sample=False, attention_mask=torch.ones_like(prompt))
    assert torch.equal(tc.generate(ours, prompt, 20, temperature=0), expected)


def test_gpt2_needs_the_tanh_gelu():
    """GPT-2's gelu_new is not the exact GELU: converted without it, the logits move."""
    hf = gpt2()
    ours = tc.from_hf(hf)
    for layer in ours.layers:
        layer.ffn.activation = nn.GELU()
    with torch.no_grad():
        assert not torch.allclose(ours(ids_of()), hf(ids_of()).logits, atol=TOLERANCE)


@pytest.mark.parametrize("make", [lambda: llama(True), lambda: llama(False, 1), lambda: gpt2(), lambda: gpt2("gelu")])
def test_there_and_back(make):
    hf = make()
    back = tc.to_hf(tc.from_hf(hf))
    assert type(back) is type(hf)
    ids = ids_of()
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, hf(ids).logits, atol=TOLERANCE, rtol=0)
    ours_state, hf_state = back.state_dict(), hf.state_dict()
    assert all(torch.equal(ours_state[name], hf_state[name]) for name in hf_state)


def test_to_hf_from_a_fresh_package_model():
    torch.manual_seed(0)
    ours = tc.ModernDecoder(tc.ModernConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=40))
    hf = tc.to_hf(ours)
    assert hf.config.num_key_value_heads == 2 and hf.config.intermediate_size == 40
    with torch.no_grad():
        assert torch.allclose(ours.eval()(ids_of()), hf(ids_of()).logits, atol=TOLERANCE, rtol=0)


def test_other_models_are_refused_by_name():
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32))  # fmt: skip
    with pytest.raises(TypeError, match=r"hf_model must be a GPT2LMHeadModel or a LlamaForCausalLM.*got BertModel"):
        tc.from_hf(bert)
    with pytest.raises(TypeError, match=r"model must be a transformer_course\.GPT or ModernDecoder, got Linear"):
        tc.to_hf(nn.Linear(2, 2))


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: llama(attention_bias=True), "attention_bias=True; the package's model needs attention_bias=False"),
        (lambda: llama(mlp_bias=True), "mlp_bias=True"),
        (lambda: llama(hidden_act="gelu"), "hidden_act='gelu'"),
        (lambda: llama(head_dim=16), "head_dim=16"),
        (
            lambda: llama(rope_parameters=dict(rope_type="linear", factor=2.0, rope_theta=500.0)),
            "rope_type='linear'",
        ),
        (lambda: llama(rope_scaling=dict(rope_type="linear", factor=2.0)), "rope_type='linear'"),  # 4.x's keyword
        (lambda: gpt2("relu"), "activation_function='relu'"),
        (lambda: gpt2(layer_norm_epsilon=1e-6), "layer_norm_epsilon=1e-06"),
        (lambda: gpt2(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True"),
        (lambda: gpt2(tie_word_embeddings=False), "tie_word_embeddings=False"),
    ],
)
def test_options_the_package_lacks_are_refused_by_name(make, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        tc.from_hf(make())


@pytest.mark.parametrize(
    "scaling",
    [
        {"type": "dynamic", "factor": 2.0},  # transformers before 4.45
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},  # 4.45 to 4.x
    ],
)
def test_a_scaled_rope_is_refused_in_the_config_layout_of_transformers_4(scaling):
    """transformers 4 keeps the scaling in config.rope_scaling, beside rope_theta: refused there too, by name."""
    config = SimpleNamespace(rope_theta=500.0, rope_scaling=scaling)
    with pytest.raises(ValueError, match=f"rope_type='{scaling.get('type') or scaling['rope_type']}'"):
        hf._rope_theta(config)
    assert hf._rope_theta(SimpleNamespace(rope_theta=500.0, rope_scaling=None)) == 500.0


def test_from_hf_leaves_the_random_state_alone():
    hf = llama()
    torch.manual_seed(3)
    tc.from_hf(hf)
    after = torch.rand(3)
    torch.manual_seed(3)
    assert torch.equal(after, torch.rand(3))


def test_the_package_does_not_import_transformers_at_import_time():
    """`transformers` is imported only inside functions: no module of the package imports it at its top level."""
    for path in Path(tc.__file__).parent.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(name.split(".")[0] in ("transformers", "tokenizers") for name in names), path


def test_the_benchmark_section_compares_with_the_same_weights():
    from transformer_course.course.benchmark._modern import modern

    table = modern(vocab_size=50, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, batch=1, length=8,
                   new_tokens=4, repeats=1, device="cpu")  # fmt: skip
    forward, generation, *caches = table.rows
    assert forward["max_abs_diff"] <= TOLERANCE and generation["identical"] is True
    assert forward["speed_ratio"] > 0 and generation["speed_ratio"] > 0
    assert [row["bytes_per_token"] for row in caches] == [2 * 4 * 8 * 4, 2 * 2 * 8 * 4, 2 * 1 * 8 * 4]


def test_a_bfloat16_llama_keeps_its_rope_angles_in_float32():
    # A checkpoint loaded in bfloat16: transformers builds its frequencies in float32 whatever the default dtype;
    # from_hf casts the package's model to bfloat16, and its frequencies must not be rounded with the weights.
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        hf = llama(max_position_embeddings=4096, rope_theta=10000.0)
    finally:
        torch.set_default_dtype(default)
    ours = tc.from_hf(hf)
    assert ours.token_embedding.weight.dtype == torch.bfloat16 and ours.rope.inv_freq.dtype == torch.float32
    positions = torch.arange(4096)[None]
    x = torch.zeros(1, 4096, 8, dtype=torch.bfloat16)  # only its dtype and device are read
    cos_hf, sin_hf = hf.model.rotary_emb(x, positions)  # (1, T, d), computed in float32, then cast
    cos, sin = ours.rope(0, 4096)
    assert cos.dtype == torch.float32
    assert torch.equal(cos.to(torch.bfloat16), cos_hf[0]) and torch.equal(sin.to(torch.bfloat16), sin_hf[0])
    cast = tc.ModernDecoder(ours.config).to(torch.float16)  # .half() and .to(dtype) alike
    assert cast.rope.inv_freq.dtype == torch.float32
    assert torch.equal(cast.rope(4000, 5)[0], tc.RotaryEmbedding(8, 10000.0)(4000, 5)[0])
