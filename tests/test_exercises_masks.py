"""Chapter 3's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["padding_mask", "causal_mask", "decoder_mask", "masked_attention"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_solutions_agree_with_the_package():
    tokens = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 0]])
    assert torch.equal(solutions.padding_mask(tokens, 0), tc.padding_mask(tokens, 0))
    assert torch.equal(solutions.causal_mask(5), tc.causal_mask(5))
    assert torch.equal(solutions.decoder_mask(tokens, 0), tc.masks.decoder_self_mask(tokens, 0))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
    mask = tc.masks.decoder_self_mask(tokens)
    for got, want in zip(solutions.masked_attention(q, k, v, mask), tc.scaled_dot_product_attention(q, k, v, mask)):
        assert torch.allclose(got, want, atol=1e-6)


# ---- exercise 3.1


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (lambda tokens, pad_id: tokens.eq(pad_id).unsqueeze(1).unsqueeze(2), "inverted", "seed 001's convention"),
        (lambda tokens, pad_id: tokens.ne(pad_id), "no_broadcast_axes", "(B, 1, 1, T)"),
        (lambda tokens, pad_id: tokens.ne(pad_id).unsqueeze(1), "head_axis_missing", "get_attn_pad_mask"),
        (lambda tokens, pad_id: (tokens > 0).view(tokens.shape[0], 1, 1, -1), "pad_id_ignored", "not with pad_id"),
        (lambda tokens, pad_id: (tokens != pad_id).float()[:, None, None], "not_bool", "must be torch.bool"),
    ],
)
def test_padding_mask_mistakes_are_named(reader, mistake, words):
    result = check.padding_mask(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_padding_mask_explains_an_unrecognised_dtype_and_wrong_entries():
    as_bytes = check.padding_mask(lambda tokens, pad_id: (tokens == pad_id)[:, None, None].byte())
    assert as_bytes.mistake == "dtype" and "returned dtype torch.uint8" in as_bytes.message

    def first_token_hidden(tokens, pad_id):
        return torch.cat([torch.zeros_like(tokens[:, :1]), tokens[:, 1:]], dim=1)[:, None, None] != pad_id

    result = check.padding_mask(first_token_hidden)
    assert result.mistake is None
    assert result.message == (
        "your mask differs from the expected one at 2 of 10 entries on "
        "seed 001's batch [[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]]"
    )


# ---- exercise 3.2


def seed_001_subsequent(size):  # seed 001's get_attn_subsequent_mask for one sequence
    return torch.from_numpy(np.triu(np.ones((size, size)), k=1)).byte()


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (lambda n: torch.triu(torch.ones(n, n), diagonal=1).bool(), "inverted", "seed 001's convention"),
        (lambda n: torch.ones(n, n).triu() == 1, "future_visible", "lets the future in"),
        (lambda n: torch.arange(n)[:, None] > torch.arange(n)[None, :], "diagonal_hidden", "attend to itself"),
        (lambda n: torch.tril(torch.ones(n, n, dtype=torch.int64)), "not_bool", "build a torch.bool mask"),
        (seed_001_subsequent, "seed_001_uint8", "get_attn_subsequent_mask"),
    ],
)
def test_causal_mask_mistakes_are_named(reader, mistake, words):
    result = check.causal_mask(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_causal_mask_accepts_an_equivalent_comparison():
    assert check.causal_mask(lambda n: torch.arange(n)[:, None] >= torch.arange(n)[None, :]).passed


# ---- exercise 3.3


def _not_padding(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(2)


def _lower_triangle(tokens):
    n = tokens.size(1)
    return torch.tril(torch.ones(n, n)).bool()


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (lambda t, p: torch.logical_or(_not_padding(t, p), _lower_triangle(t)), "or_instead_of_and", "with OR"),
        (lambda t, p: torch.logical_not(_not_padding(t, p) & _lower_triangle(t)), "inverted", "inverted"),
        (lambda t, p: _not_padding(t, p).int() + _lower_triangle(t).int(), "sum_not_bool", "torch.gt"),
        (lambda t, p: _lower_triangle(t)[None, None].repeat(t.size(0), 1, 1, 1), "causal_only", "padding is not"),
        (lambda t, p: _lower_triangle(t), "causal_only", "padding is not hidden"),
        (lambda t, p: _not_padding(t, p).repeat(1, 1, t.size(1), 1), "padding_only", "future is not hidden"),
        (lambda t, p: _not_padding(t, p) & _not_padding(t, p).mT & _lower_triangle(t), "queries_masked", "rows"),
        (lambda t, p: (_not_padding(t, p) & _lower_triangle(t)).squeeze(1), "head_axis_missing", "(B, 1, T, T)"),
    ],
)
def test_decoder_mask_mistakes_are_named(reader, mistake, words):
    result = check.decoder_mask(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_decoder_mask_accepts_the_package_helpers():
    assert check.decoder_mask(lambda t, p: tc.combine_masks(tc.padding_mask(t, p), tc.causal_mask(t.shape[1]))).passed


# ---- exercise 3.4


def _scores(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))


def d2l_style(q, k, v, mask):  # the common textbook answer: -1e6, no care for empty rows
    weights = F.softmax(_scores(q, k).masked_fill(mask == 0, -1e6), dim=-1)
    return weights @ v, weights


def minus_infinity(q, k, v, mask):
    weights = torch.where(mask, _scores(q, k), torch.tensor(float("-inf"))).softmax(-1)
    return torch.matmul(weights, v), weights


def renormalised_after_softmax(q, k, v, mask):  # right on every row that may attend to something
    weights = F.softmax(_scores(q, k), dim=-1) * mask
    weights = weights / weights.sum(-1, keepdim=True)
    return weights @ v, weights


def seed_001_convention(q, k, v, mask):  # masked_fill_(attn_mask, -1e9) with a True = attend mask
    scores = _scores(q, k)
    scores.masked_fill_(mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def zeroed_after_softmax(q, k, v, mask):
    weights = F.softmax(_scores(q, k), dim=-1) * mask.float()
    return weights @ v, weights


def mask_unused(q, k, v, mask):
    weights = F.softmax(_scores(q, k), dim=-1)
    return weights @ v, weights


def unscaled(q, k, v, mask):
    scores = (q @ k.transpose(-1, -2)).masked_fill(~mask, -1e30)
    weights = scores.softmax(-1).masked_fill(~mask, 0)
    return weights @ v, weights


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (d2l_style, "fully_masked_uniform", "gets uniform weights"),
        (minus_infinity, "fully_masked_nan", "gives NaN"),
        (renormalised_after_softmax, "fully_masked_nan", "gives NaN"),
        (seed_001_convention, "inverted_mask", "seed 001's convention"),
        (zeroed_after_softmax, "mask_after_softmax", "after the softmax"),
        (mask_unused, "mask_ignored", "changes nothing"),
        (unscaled, "no_scale", "without the scale"),
    ],
)
def test_masked_attention_mistakes_are_named(reader, mistake, words):
    result = check.masked_attention(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_masked_attention_accepts_an_answer_that_zeroes_empty_rows_itself():
    def careful(q, k, v, mask):
        weights = F.softmax(_scores(q, k).masked_fill(~mask, -1e9), dim=-1) * mask
        return weights @ v, weights

    assert check.masked_attention(careful).passed


def test_masked_attention_without_weights_is_explained():
    result = check.masked_attention(lambda q, k, v, mask: tc.scaled_dot_product_attention(q, k, v, mask)[0])
    assert not result.passed and result.mistake is None and "expected 2 values" in result.message
