"""Chapter 12, transformer_course/decoding.py: greedy decoding and beam search, their edges and errors.

max_len=1, NaN logits, every submodule's mode, and arguments checked before any work: a spy counts the
calls of `encode` and `decode` and a hook the calls of the model's modules, and both must stay at zero.
"""

import math

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course import decoding
from transformer_course.translate import one_pass_decode

VOCAB, PAD, BOS, EOS, MAX_LEN = 12, 0, 1, 2, 16


def tiny(seed=0, **kwargs):
    torch.manual_seed(seed)
    defaults = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.1, max_len=MAX_LEN)
    return tc.Transformer(VOCAB, VOCAB, **{**defaults, **kwargs}).eval()


SRC = torch.tensor([[3, 4, 5, 6]])


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_max_len_one_gives_the_start_token_alone(use_cache, beam_size):
    model = tiny()
    beam = tc.beam_search(model, SRC, beam_size, 1, BOS, EOS, use_cache=use_cache)
    greedy = tc.greedy_decode(model, SRC, 1, BOS, EOS, use_cache=use_cache)
    assert beam.tolist() == greedy.tolist() == [[BOS]]


@pytest.mark.parametrize("max_len", [2, 3, 5])
def test_short_budgets_agree_with_greedy(max_len):
    model = tiny()
    beam, greedy = tc.beam_search(model, SRC, 1, max_len, BOS, EOS), tc.greedy_decode(model, SRC, max_len, BOS, EOS)
    assert beam.tolist() == greedy.tolist()


def nan_weights(model):
    with torch.no_grad():
        model.decoder.layers[1].ffn.w_1.weight[0, 0] = float("nan")
    return model


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize(
    "decode",
    [
        lambda m, c: tc.greedy_decode(m, SRC, 8, BOS, EOS, use_cache=c),
        lambda m, c: tc.beam_search(m, SRC, 3, 8, BOS, EOS, use_cache=c),
    ],
    ids=["greedy", "beam"],
)
def test_nan_weights_raise_a_clear_error(decode, use_cache):
    model = nan_weights(tiny())
    with pytest.raises(FloatingPointError, match=r"logits are NaN .*decoder\.layers\.1\.ffn\.w_1\.weight"):
        decode(model, use_cache)


def test_nan_from_finite_weights_says_so():
    """Logits that turn NaN although every weight is finite (an overflow) are refused too, and said to be."""
    model = tiny()
    model.lm_head.register_forward_hook(lambda module, inputs, out: out.masked_fill(out > -1e9, float("nan")))
    with pytest.raises(FloatingPointError, match="parameters are finite"):
        tc.greedy_decode(model, SRC, 5, BOS, EOS)


def mixed_modes(model):
    """Training, except a frozen encoder and one dropout in eval mode: a state `model.train(True)` would lose."""
    model.train()
    model.encoder.eval()
    model.decoder.layers[0].ffn.dropout.eval()
    return {name: m.training for name, m in model.named_modules()}


CALLS = {
    "greedy": lambda m: tc.greedy_decode(m, SRC, 6, BOS, EOS),
    "greedy uncached": lambda m: tc.greedy_decode(m, SRC, 6, BOS, EOS, use_cache=False),
    "beam": lambda m: tc.beam_search(m, SRC, 2, 6, BOS, EOS),
    "log prob": lambda m: tc.sequence_log_prob(m, SRC, torch.tensor([[BOS, 3, 4, EOS]])),
    "one pass": lambda m: one_pass_decode(m, SRC, 5, BOS),
    "summary": lambda m: tc.summary(m, SRC, torch.tensor([[BOS, 3]])),
}


@pytest.mark.parametrize("call", list(CALLS.values()), ids=list(CALLS))
def test_every_submodule_gets_its_own_mode_back(call):
    model = tiny()
    before = mixed_modes(model)
    seen = []
    for module in model.modules():
        module.register_forward_hook(lambda module, inputs, out: seen.append(module.training))
    call(model)
    assert seen and not any(seen), "some module ran in training mode (dropout on) while decoding"
    assert {name: m.training for name, m in model.named_modules()} == before


def test_modes_come_back_after_an_error_too():
    model = nan_weights(tiny())
    before = mixed_modes(model)
    with pytest.raises(FloatingPointError):
        tc.greedy_decode(model, SRC, 6, BOS, EOS)
    assert {name: m.training for name, m in model.named_modules()} == before


class Scripted:
    """A hook on the output layer that makes the model predict `tokens` one after another."""

    def __init__(self, tokens):
        self.tokens, self.step = tokens, 0

    def __call__(self, module, inputs, logits):
        logits = torch.zeros_like(logits)
        logits[..., self.tokens[min(self.step, len(self.tokens) - 1)]] = 10.0
        self.step += 1
        return logits


class ScriptedRows:
    """Like Scripted, one script per batch row."""

    def __init__(self, scripts):
        self.scripts, self.step = scripts, 0

    def __call__(self, module, inputs, logits):
        logits = torch.zeros_like(logits)
        for row, tokens in enumerate(self.scripts):
            logits[row, ..., tokens[min(self.step, len(tokens) - 1)]] = 10.0
        self.step += 1
        return logits


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_finished_row_is_padded_while_the_others_go_on(use_cache):
    model = tiny()
    model.lm_head.register_forward_hook(ScriptedRows([[5, EOS, 6, 7, 8], [5, 6, 7, EOS, 9]]))
    out = tc.greedy_decode(model, SRC.repeat(2, 1), 10, BOS, EOS, use_cache=use_cache)
    assert out.tolist() == [[BOS, 5, EOS, PAD, PAD], [BOS, 5, 6, 7, EOS]]


@pytest.mark.parametrize("use_cache", [True, False])
def test_bos_equal_to_eos_starts_and_stops(use_cache):
    """One id for start and end (as GPT-2's <|endoftext|>): the start is never taken for the end."""
    model = tiny()
    model.lm_head.register_forward_hook(Scripted([5, 6, BOS, 7]))
    assert tc.greedy_decode(model, SRC, 10, BOS, BOS, use_cache=use_cache).tolist() == [[BOS, 5, 6, BOS]]


def test_eos_equal_to_pad_stops_where_the_model_predicts_padding():
    """A task without an end token (the benchmark's copy task) ends a row where the model predicts padding."""
    model = tiny()
    model.lm_head.register_forward_hook(Scripted([5, 6, PAD, 7]))
    assert tc.greedy_decode(model, SRC, 10, BOS, PAD).tolist() == [[BOS, 5, 6, PAD]]


BAD = [
    # (id, call on (model, src), exception, message)
    ("model None", lambda m, s: tc.greedy_decode(None, s, 5, BOS, EOS), TypeError,
     "model must be a transformer_course.Transformer, got NoneType"),
    ("model a torch transformer",
     lambda m, s: tc.beam_search(nn.Transformer(16, 2, 1, 1, 32, batch_first=True), s, 2, 5, BOS, EOS),
     TypeError, "model must be a transformer_course.Transformer, got Transformer"),
    ("src a list", lambda m, s: tc.greedy_decode(m, [[3, 4]], 5, BOS, EOS), TypeError,
     "src must be a torch.Tensor, got list"),
    ("src uint8", lambda m, s: tc.greedy_decode(m, s.to(torch.uint8), 5, BOS, EOS), TypeError,
     r"src must be an integer tensor of token ids \(torch.long or torch.int\), got dtype torch.uint8"),
    ("src float", lambda m, s: tc.greedy_decode(m, s.float(), 5, BOS, EOS), TypeError,
     "src must be an integer tensor of token ids"),
    ("src 1-D", lambda m, s: tc.greedy_decode(m, s[0], 5, BOS, EOS), ValueError,
     r"src must have 2 dimensions, got shape \(4,\)"),
    ("src without tokens", lambda m, s: tc.greedy_decode(m, s[:, :0], 5, BOS, EOS), ValueError,
     r"src is empty: expected shape \(B, T\) with T >= 1"),
    ("src without rows", lambda m, s: tc.greedy_decode(m, s[:0], 5, BOS, EOS), ValueError, "src has no rows"),
    ("src id too large", lambda m, s: tc.greedy_decode(m, torch.tensor([[3, VOCAB]]), 5, BOS, EOS), ValueError,
     r"src: ids in \[3, 12\], expected ids in \[0, 11\] \(vocab_size=12\)"),
    ("src id negative", lambda m, s: tc.beam_search(m, torch.tensor([[-1, 3]]), 2, 5, BOS, EOS), ValueError,
     r"src: ids in \[-1, 3\]"),
    ("src on another device", lambda m, s: tc.greedy_decode(m, s.to("meta"), 5, BOS, EOS), ValueError,
     "src is on meta but the model is on cpu"),
    ("src longer than the positional table",
     lambda m, s: tc.greedy_decode(m, torch.full((1, MAX_LEN + 1), 3), 5, BOS, EOS), ValueError,
     r"src has 17 positions, more than the model's positional table, config.max_len=16"),
    ("max_len zero", lambda m, s: tc.greedy_decode(m, s, 0, BOS, EOS), ValueError,
     "max_len=0 must be a positive integer"),
    ("max_len float", lambda m, s: tc.beam_search(m, s, 2, 5.0, BOS, EOS), TypeError, "max_len must be an int"),
    ("max_len bool", lambda m, s: tc.greedy_decode(m, s, True, BOS, EOS), TypeError, "max_len must be an int"),
    ("max_len beyond the positional table", lambda m, s: tc.greedy_decode(m, s, 600, BOS, EOS), ValueError,
     r"max_len=600 \(tokens to generate, bos included\) exceeds the model's positional table, config.max_len=16"),
    ("beam max_len beyond the positional table", lambda m, s: tc.beam_search(m, s, 2, 17, BOS, EOS), ValueError,
     r"max_len=17 .* config.max_len=16"),
    ("bos outside the vocabulary", lambda m, s: tc.greedy_decode(m, s, 5, VOCAB, EOS), ValueError,
     r"bos_id=12 must be a token id in \[0, 11\]"),
    ("bos a string", lambda m, s: tc.greedy_decode(m, s, 5, "<sos>", EOS), TypeError,
     "bos_id must be an int token id, got str"),
    ("eos negative", lambda m, s: tc.beam_search(m, s, 2, 5, BOS, -1), ValueError,
     r"eos_id=-1 must be a token id in \[0, 11\]"),
    ("eos a tensor", lambda m, s: tc.greedy_decode(m, s, 5, BOS, torch.tensor(2)), TypeError,
     "eos_id must be an int token id, got Tensor"),
    ("bos equal to pad", lambda m, s: tc.greedy_decode(m, s, 5, PAD, EOS), ValueError,
     "bos_id=0 is the model's pad_id: the decoder would mask the start token as padding"),
    ("beam bos equal to pad", lambda m, s: tc.beam_search(m, s, 2, 5, PAD, EOS), ValueError,
     "bos_id=0 is the model's pad_id"),
    ("use_cache a string", lambda m, s: tc.greedy_decode(m, s, 5, BOS, EOS, use_cache="no"), TypeError,
     "use_cache must be a bool, got str"),
    ("beam_size zero", lambda m, s: tc.beam_search(m, s, 0, 5, BOS, EOS), ValueError,
     "beam_size=0 must be a positive integer"),
    ("beam_size float", lambda m, s: tc.beam_search(m, s, 2.0, 5, BOS, EOS), TypeError, "beam_size must be an int"),
    ("beam of a batch", lambda m, s: tc.beam_search(m, s.repeat(2, 1), 2, 5, BOS, EOS), ValueError,
     r"src must be \(1, S\), got \(2, 4\)"),
    ("length_penalty a string", lambda m, s: tc.beam_search(m, s, 2, 5, BOS, EOS, length_penalty="0.6"), TypeError,
     "length_penalty must be a float, got str"),
    ("length_penalty None", lambda m, s: tc.beam_search(m, s, 2, 5, BOS, EOS, length_penalty=None), TypeError,
     "length_penalty must be a float, got NoneType"),
    ("length_penalty NaN", lambda m, s: tc.beam_search(m, s, 2, 5, BOS, EOS, length_penalty=math.nan), ValueError,
     "length_penalty=nan must be a finite number"),
    ("length_penalty infinite", lambda m, s: tc.beam_search(m, s, 2, 5, BOS, EOS, length_penalty=math.inf),
     ValueError, "length_penalty=inf must be a finite number"),
    ("log prob tgt of one token", lambda m, s: tc.sequence_log_prob(m, s, torch.tensor([[BOS]])), ValueError,
     "tgt must hold bos and at least one token"),
    ("log prob batch mismatch", lambda m, s: tc.sequence_log_prob(m, s, torch.tensor([[BOS, 3]] * 2)), ValueError,
     "src and tgt must share the batch size, got 1 and 2"),
    ("log prob tgt id too large", lambda m, s: tc.sequence_log_prob(m, s, torch.tensor([[BOS, VOCAB]])), ValueError,
     r"tgt: ids in \[1, 12\], expected ids in \[0, 11\]"),
    ("log prob tgt uint8", lambda m, s: tc.sequence_log_prob(m, s, torch.tensor([[BOS, 3]], dtype=torch.uint8)),
     TypeError, "tgt must be an integer tensor of token ids"),
    ("log prob model None", lambda m, s: tc.sequence_log_prob(None, s, torch.tensor([[BOS, 3]])), TypeError,
     "model must be a transformer_course.Transformer, got NoneType"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_arguments_are_refused_before_any_work(call, exc, message, monkeypatch):
    model = tiny()
    model.train()
    runs = []
    for module in model.modules():
        module.register_forward_pre_hook(lambda module, inputs: runs.append(type(module).__name__))
    for name in ("encode", "decode"):
        real = getattr(model, name)
        monkeypatch.setattr(model, name, lambda *a, real=real, **k: runs.append("call") or real(*a, **k))
    with pytest.raises(exc, match=message):
        call(model, SRC)
    assert runs == [], f"the model ran before the bad argument was found: {runs[:5]}"
    assert all(m.training for m in model.modules()), "the model's mode changed"


def test_the_bad_arguments_are_distinct():
    assert len({c[0] for c in BAD}) == len(BAD) >= 30


class TableScorer:
    """Fixed next-token probabilities by prefix, for a search on a known tree.

    After <bos>: eos with p=0.4, token 3 with p=0.6. After <bos> 3: eos with p=0.6, token 4 with p=0.4.
    With three tokens at most: the short hypothesis <bos> eos scores log 0.4 = -0.92 over 1 token, the long
    <bos> 3 eos log 0.6 + log 0.6 = -1.02 over 2 tokens (-0.51 each). The raw sum (length_penalty 0) prefers
    the short one; divided by the length (length_penalty 1), the long one.
    """

    def __call__(self, ys):
        probs = torch.full((ys.shape[0], 6), 1e-9)
        for i, row in enumerate(ys.tolist()):
            last = row[-1]
            if last == BOS:
                probs[i, EOS], probs[i, 3] = 0.4, 0.6
            elif last == 3:
                probs[i, EOS], probs[i, 4] = 0.6, 0.4
            else:
                probs[i, EOS] = 1.0
        return probs.log()

    def select(self, rows):
        pass


@pytest.mark.parametrize(("length_penalty", "expected"), [(0.0, [BOS, EOS]), (1.0, [BOS, 3, EOS])])
def test_length_penalty_changes_the_winner(length_penalty, expected):
    start = torch.tensor([[BOS]])
    out = decoding.run_beam(TableScorer(), start, 4, 3, EOS, PAD, length_penalty)
    assert out.tolist() == [expected]


# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_well():
    for seed in range(5):
        torch.manual_seed(seed)
        model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0).eval()
        src = torch.randint(3, 12, (1, 5))
        greedy = tc.greedy_decode(model, src, 8, 1, 2)
        assert torch.equal(tc.beam_search(model, src, 1, 8, 1, 2), greedy)
        beam = tc.beam_search(model, src, 4, 8, 1, 2)
        assert beam[0, 0] == 1
        greedy_ended = (greedy[0] == 2).any()
        beam_ended = (beam[0] == 2).any()
        if greedy_ended and beam_ended:
            assert tc.sequence_log_prob(model, src, beam) >= tc.sequence_log_prob(model, src, greedy) - 1e-5


def test_decoding_restores_training_mode():
    model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=1, d_ff=32).train()
    tc.greedy_decode(model, torch.tensor([[3, 4]]), 4, 1, 2)
    assert model.training


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


def tiny_model(**kwargs):
    defaults = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=10)
    return tc.Transformer(10, 10, **{**defaults, **kwargs})


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("beam search on a batch",
     lambda: tc.beam_search(tiny_model(), torch.ones(2, 3, dtype=torch.long), 2, 5, 1, 2), ValueError,
     r"src must be \(1, S\), got \(2, 3\)"),
    ("bos id outside the vocabulary",
     lambda: tc.greedy_decode(tiny_model(), torch.ones(1, 3, dtype=torch.long), 5, 10, 2), ValueError,
     r"bos_id=10 must be a token id in \[0, 9\]"),
    ("None model in greedy decoding", lambda: tc.greedy_decode(None, torch.ones(1, 3, dtype=torch.long), 5, 1, 2),
     TypeError, r"model must be a transformer_course.Transformer, got NoneType"),
    ("decoding beyond the positional table",
     lambda: tc.greedy_decode(tiny_model(), torch.ones(1, 3, dtype=torch.long), 11, 1, 2), ValueError,
     r"max_len=11 \(tokens to generate, bos included\) exceeds the model's positional table, config.max_len=10"),
    ("length_penalty not a number",
     lambda: tc.beam_search(tiny_model(), torch.ones(1, 3, dtype=torch.long), 2, 5, 1, 2, length_penalty="long"),
     TypeError, r"length_penalty must be a float, got str"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
