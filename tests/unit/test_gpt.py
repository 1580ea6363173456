"""Chapter 14's GPT: equal to PyTorch's layers, causal, tied, and `generate` reproducible, cached = uncached, strict."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course import gpt
from transformer_course.grammar import Language

V, D, H, FF, L, MAX_LEN = 23, 32, 4, 64, 3, 40


def make_model(seed: int = 0, dropout: float = 0.0) -> tc.GPT:
    torch.manual_seed(seed)
    return tc.GPT(V, d_model=D, n_heads=H, n_layers=L, d_ff=FF, max_len=MAX_LEN, dropout=dropout).eval()


def random_ids(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (batch, length), generator=torch.Generator().manual_seed(seed))


def torch_causal_mask(length: int) -> torch.Tensor:
    """PyTorch's own causal mask: a float mask with -inf above the diagonal."""
    return nn.Transformer.generate_square_subsequent_mask(length)


def perturbed_torch_layer(seed: int) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
    with torch.no_grad():  # LayerNorms start at (1, 0): move them so that a swapped gain or bias would show
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return layer.eval()


# ------------------------------------------------------------------------------------------- the model


def test_a_block_equals_torch_encoder_layer_pre_ln_with_a_causal_mask():
    reference = perturbed_torch_layer(0)
    block = tc.EncoderLayer.from_torch(reference).eval()
    x = torch.randn(3, 9, D)
    expected = reference(x, src_mask=torch_causal_mask(9))
    torch.testing.assert_close(block(x, tc.causal_mask(9)), expected, atol=1e-5, rtol=1e-4)
    # The GPT's own blocks are this layer: pre-LN, GELU.
    ours = make_model().layers[0]
    assert ours.norm_first and isinstance(ours.ffn.activation, nn.GELU)


def test_gpt_equals_a_model_assembled_from_pytorch_modules():
    model = make_model()
    torch_layers = [perturbed_torch_layer(seed) for seed in range(L)]
    final_norm = nn.LayerNorm(D)
    with torch.no_grad():
        final_norm.weight.uniform_(0.5, 1.5)
        final_norm.bias.uniform_(-0.5, 0.5)
        for i, layer in enumerate(torch_layers):
            model.blocks.layers[i] = tc.EncoderLayer.from_torch(layer)
        model.blocks.norm = tc.LayerNorm.from_torch(final_norm)
    ids = random_ids(2, 11)
    with torch.no_grad():
        x = F.embedding(ids, model.token_embedding.weight) + model.positions.pe[:11]
        for layer in torch_layers:
            x = layer(x, src_mask=torch_causal_mask(11))
        expected = final_norm(x) @ model.token_embedding.weight.T  # tied output projection
        torch.testing.assert_close(model(ids), expected, atol=1e-5, rtol=1e-4)


def test_output_projection_is_the_token_embedding():
    model = make_model()
    assert model.lm_head.weight is model.token_embedding.weight
    blocks = L * (4 * (D * D + D) + (D * FF + FF) + (FF * D + D) + 2 * 2 * D)
    assert tc.count_parameters(model) == V * D + MAX_LEN * D + blocks + 2 * D  # the tied matrix counted once


def test_no_position_sees_the_future():
    model = make_model()
    ids = random_ids(2, 12)
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % V
    with torch.no_grad():
        before, after = model(ids), model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7])
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_cached_forward_in_pieces_equals_one_pass():
    model = make_model()
    ids = random_ids(3, 15)
    cache = model.new_cache()
    with torch.no_grad():
        pieces = [model(ids[:, :6], cache), model(ids[:, 6:7], cache), model(ids[:, 7:], cache)]
        assert cache.length == 15
        torch.testing.assert_close(torch.cat(pieces, dim=1), model(ids), atol=1e-5, rtol=1e-4)


def test_forward_refuses_bad_ids():
    model = make_model()
    with pytest.raises(ValueError, match="ids: ids in"):
        model(torch.tensor([[0, V]]))
    with pytest.raises(ValueError, match="exceed max_len=40"):
        model(torch.zeros(1, MAX_LEN + 1, dtype=torch.long))
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="cache has 2 layers"):
        model(torch.zeros(1, 3, dtype=torch.long), tc.KVCache(2))
    with pytest.raises(ValueError, match=r"ids is on meta but the model is on cpu: move one with .to\(\)"):
        model(torch.zeros(1, 3, dtype=torch.long, device="meta"))


# ------------------------------------------------------------------------------------------- generate

SETTINGS = [
    dict(temperature=0),
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=4),
    dict(temperature=1.5, top_p=0.8),
    dict(temperature=2.0, top_k=10, top_p=0.9),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("batch", [1, 4])
def test_generate_gives_the_same_tokens_with_and_without_the_cache(settings, batch):
    model = make_model(seed=batch)
    prompt = random_ids(batch, 5, seed=batch)
    out = {
        use_cache: tc.generate(model, prompt, 25, use_cache=use_cache, generator=torch.Generator().manual_seed(7),
                               **settings)
        for use_cache in (True, False)
    }  # fmt: skip
    assert out[True].shape == (batch, 30)
    assert torch.equal(out[True][:, :5], prompt)
    assert torch.equal(out[True], out[False])


def test_generate_is_reproducible_with_a_generator():
    model = make_model()
    prompt = random_ids(4, 3)

    def sample(seed):
        return tc.generate(model, prompt, 20, temperature=1.5, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(sample(3), sample(3))
    assert not torch.equal(sample(3), sample(4))


def test_temperature_zero_is_greedy_decoding():
    model = make_model()
    ids = random_ids(2, 4)
    expected = ids
    with torch.no_grad():
        for _ in range(10):
            expected = torch.cat([expected, model(expected)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    assert torch.equal(tc.generate(model, ids, 10, temperature=0), expected)


def test_generate_restores_the_training_mode_and_keeps_dropout_off():
    model = make_model(dropout=0.5).train()
    prompt = random_ids(2, 3)
    a = tc.generate(model, prompt, 8, temperature=0)
    b = tc.generate(model, prompt, 8, temperature=0)
    assert torch.equal(a, b) and model.training


BAD_ARGUMENTS = [
    (dict(temperature=-0.5), ValueError, "temperature=-0.5"),
    (dict(temperature=float("nan")), ValueError, "temperature=nan"),
    (dict(temperature=float("inf")), ValueError, "temperature=inf"),
    (dict(temperature="hot"), TypeError, "temperature must be a number"),
    (dict(top_k=0), ValueError, "top_k=0"),
    (dict(top_k=2.5), TypeError, "top_k must be an int"),
    (dict(top_p=0.0), ValueError, "top_p=0.0"),
    (dict(top_p=1.2), ValueError, "top_p=1.2"),
    (dict(top_p=-0.1), ValueError, "top_p=-0.1"),
    (dict(max_new_tokens=0), ValueError, "max_new_tokens=0"),
    (dict(max_new_tokens=1.0), TypeError, "max_new_tokens must be an int"),
    (dict(ids=torch.zeros(1, MAX_LEN + 1, dtype=torch.long)), ValueError, "ids has 41 positions"),
    (dict(ids=torch.zeros(1, 30, dtype=torch.long), max_new_tokens=11), ValueError, "exceed the model's max_len=40"),
    (dict(ids=torch.zeros(1, 0, dtype=torch.long)), ValueError, "ids is empty"),
    (dict(ids=torch.zeros(1, 3)), TypeError, "ids must be an integer tensor"),
    (dict(ids=torch.zeros(3, dtype=torch.long)), ValueError, "ids must have 2 dimensions"),
    (dict(ids=torch.tensor([[1, V]])), ValueError, "ids: ids in"),
    (dict(generator=0), TypeError, "generator must be a torch.Generator"),
    (dict(model=nn.Linear(2, 2)), TypeError, "model must be a transformer_course.GPT"),
]


@pytest.mark.parametrize(("change", "error", "words"), BAD_ARGUMENTS, ids=[w for _, _, w in BAD_ARGUMENTS])
def test_every_bad_argument_raises_before_any_work(change, error, words):
    model = make_model()
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    kwargs = dict(model=model, ids=random_ids(1, 3), max_new_tokens=5) | change
    with pytest.raises(error, match=words.replace("(", r"\(").replace("[", r"\[")):
        tc.generate(**kwargs)
    assert calls == []  # refused before the model ran once


# ------------------------------------------------------------------------------------------- sampling


def test_top_k_keeps_the_k_largest_logits():
    logits = torch.tensor([[1.0, 4.0, 2.0, 3.0, 0.0]])
    kept = gpt.top_k_logits(logits, 2)
    assert kept.isfinite().tolist() == [[False, True, False, True, False]]
    assert torch.equal(kept[kept.isfinite()], torch.tensor([4.0, 3.0]))
    assert torch.equal(gpt.top_k_logits(logits, 9), logits)  # k above the vocabulary keeps everything


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    logits = probs.log()
    # Sorted: 0.5, 0.3 (0.8), 0.15 (0.95), 0.05 (1.0)
    assert gpt.top_p_logits(logits, 0.5).isfinite().tolist() == [[False, True, False, False]]
    assert gpt.top_p_logits(logits, 0.6).isfinite().tolist() == [[False, True, False, True]]
    assert gpt.top_p_logits(logits, 0.9).isfinite().tolist() == [[False, True, True, True]]
    assert gpt.top_p_logits(logits, 0.01).isfinite().sum() == 1  # the most likely token always stays


def test_sampling_follows_softmax_of_logits_over_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(40_000, 4)
    g = torch.Generator().manual_seed(0)
    for temperature in (0.5, 1.0, 2.0):
        draws = gpt.sample_next(logits, temperature, generator=g).squeeze(1)
        frequencies = torch.bincount(draws, minlength=4).double() / len(draws)
        expected = torch.softmax(logits[0].double() / temperature, dim=0)
        assert (frequencies - expected).abs().max() < 0.01, temperature
    assert gpt.sample_next(logits[:3], 0.0).squeeze(1).tolist() == [0, 0, 0]


def test_dividing_by_temperature_zero_is_what_the_greedy_branch_avoids():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    assert (logits / 0.0).softmax(dim=-1).isnan().all()  # inf - inf: the pitfall of chapter 14


# ------------------------------------------------------------------------------------------- training


def test_lm_loss_is_the_cross_entropy_of_the_shifted_targets_without_padding():
    ids = torch.tensor([[1, 5, 6, 2, 0, 0], [1, 7, 8, 9, 10, 2]])
    logits = torch.randn(2, 5, 12)
    by_hand, count = 0.0, 0
    for b in range(2):
        for t in range(5):
            target = int(ids[b, t + 1])
            if target != 0:
                by_hand -= torch.log_softmax(logits[b, t], dim=-1)[target].item()
                count += 1
    assert gpt.lm_loss(logits, ids, pad_id=0).item() == pytest.approx(by_hand / count, rel=1e-5)


def test_a_short_training_run_approaches_the_floor():
    language = Language.english()
    torch.manual_seed(0)
    model = tc.GPT(len(language.vocab), d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=10, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    every_sentence = language.encode_lm(language.sentences)
    before = gpt.evaluate_lm(model, every_sentence, 0)
    history = gpt.train_lm(model, lambda: language.encode_lm(language.sample(64, g)), 150, pad_id=0)
    after = gpt.evaluate_lm(model, every_sentence, 0)
    assert before > math.log(len(language.vocab)) - 0.1  # an untrained model: about uniform over the vocabulary
    assert language.floor < after < 1.85 < before
    assert history.steps == 150 and len(history.losses) == 150 and not model.training


def test_evaluate_lm_refuses_a_batch_with_nothing_to_predict():
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8)
    with pytest.raises(ValueError, match="no token to predict"):
        tc.gpt.evaluate_lm(model, torch.tensor([[3, 0, 0, 0], [5, 0, 0, 0]]), pad_id=0)


def test_evaluate_lm_gives_back_each_submodules_own_mode():
    # A frozen block stays in eval mode: model.train(was_training) would switch its dropout back on.
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=8).train()
    model.layers[0].eval()
    loss = tc.gpt.evaluate_lm(model, torch.tensor([[1, 2, 3, 4], [4, 3, 2, 0]]), pad_id=0)
    assert loss > 0 and model.training and model.layers[1].training and not model.layers[0].training


def test_generate_with_nan_weights_raises_instead_of_writing_token_0():
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8)
    with torch.no_grad():
        model.layers[0].ffn.w_1.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match=r"logits are NaN after 2 token\(s\): its parameters hold NaN"):
        tc.generate(model, torch.tensor([[1, 2]]), 3, temperature=0)


def test_a_tiny_temperature_samples_the_argmax_instead_of_failing():
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8)
    prompt = torch.tensor([[1, 2], [3, 4]])
    tiny = tc.generate(model, prompt, 4, temperature=1e-40, generator=torch.Generator().manual_seed(0))
    assert torch.equal(tiny, tc.generate(model, prompt, 4, temperature=0))


def test_generate_gives_back_each_submodules_own_mode():
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=8).train()
    model.layers[0].eval()  # a frozen block
    tc.generate(model, torch.tensor([[1, 2]]), 2)
    assert model.training and model.layers[1].training and not model.layers[0].training


def test_a_cache_of_the_wrong_type_is_refused_by_name():
    model = tc.GPT(vocab_size=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8)
    with pytest.raises(TypeError, match=r"cache must be a KVCache from model.new_cache\(\), got dict"):
        model(torch.tensor([[1, 2]]), {})


@pytest.mark.parametrize("n_layers", [2, 8])
def test_gpt2_initialisation_scales_the_residual_projections(n_layers):
    """GPT-2's rule (nanoGPT's too): N(0, 0.02) weights, zero biases, and the two projections that write into the
    residual stream at 0.02 / √(2 · n_layers). Each matrix holds at least 65k entries: its std is within 1 %."""
    torch.manual_seed(0)
    model = tc.GPT(64, d_model=256, n_heads=4, n_layers=n_layers, d_ff=1024, max_len=16)
    residual = 0.02 / math.sqrt(2 * n_layers)
    for layer in model.layers:
        for projection in (layer.self_attn.w_o, layer.ffn.w_2):
            assert math.isclose(projection.weight.std().item(), residual, rel_tol=0.05)
            assert torch.count_nonzero(projection.bias) == 0
        for other in (layer.self_attn.w_q, layer.self_attn.w_k, layer.self_attn.w_v, layer.ffn.w_1):
            assert math.isclose(other.weight.std().item(), 0.02, rel_tol=0.05)
    assert math.isclose(model.token_embedding.weight.std().item(), 0.02, rel_tol=0.05)
