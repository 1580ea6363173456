"""Chapter 3's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


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


def padding_first_token_hidden(tokens, pad_id):
    return torch.cat([torch.zeros_like(tokens[:, :1]), tokens[:, 1:]], dim=1)[:, None, None] != pad_id


def padding_in_place(tokens, pad_id):
    return tokens.ne_(pad_id).bool()[:, None, None, :]  # ne_ overwrites the token ids with 0 and 1


def padding_greater_than(tokens, pad_id):
    return (tokens > pad_id)[:, None, None, :]  # right only while every real id is above pad_id


def padding_without_return(tokens, pad_id):
    mask = (tokens != pad_id)[:, None, None, :]  # noqa: F841


def padding_expanded_over_queries(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :].expand(-1, 1, tokens.shape[1], -1)


# ---- exercise 3.2


def post_1_subsequent(size):  # post 1's get_attn_subsequent_mask for one sequence
    return torch.from_numpy(np.triu(np.ones((size, size)), k=1)).byte()


def causal_one_step_ahead(size):
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal=1)


def causal_with_batch_axes(size):
    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]


def causal_from_numpy(size):
    return np.tril(np.ones((size, size), dtype=bool))


def causal_without_return(size):
    mask = torch.ones(size, size, dtype=torch.bool).tril()  # noqa: F841


def causal_pytorch_style(size):  # nn.Transformer.generate_square_subsequent_mask
    return torch.triu(torch.full((size, size), float("-inf")), diagonal=1)


def causal_fixed_size(size):
    return torch.ones(4, 4, dtype=torch.bool).tril()


# ---- exercise 3.3


def _not_padding(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(2)


def _lower_triangle(tokens):
    n = tokens.size(1)
    return torch.tril(torch.ones(n, n)).bool()


def decoder_padding_on_queries(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None] & _lower_triangle(tokens)


def decoder_as_long(tokens, pad_id):
    return (_not_padding(tokens, pad_id) & _lower_triangle(tokens)).long()


def decoder_pad_id_ignored(tokens, pad_id):
    return (tokens != 0)[:, None, None, :] & _lower_triangle(tokens)


def decoder_without_return(tokens, pad_id):
    mask = _not_padding(tokens, pad_id) & _lower_triangle(tokens)  # noqa: F841


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


def post_1_convention(q, k, v, mask):  # masked_fill_(attn_mask, -1e9) with a True = attend mask
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


def hidden_scores_zeroed(q, k, v, mask):
    weights = torch.softmax(_scores(q, k) * mask, dim=-1)  # a hidden score of 0 still gets weight
    return weights @ v, weights


def output_only(q, k, v, mask):
    return tc.scaled_dot_product_attention(q, k, v, mask)[0]


def weights_then_output(q, k, v, mask):
    weights = torch.softmax(_scores(q, k).masked_fill(~mask, -1e9), dim=-1).masked_fill(~mask, 0.0)
    return weights, weights @ v


def masked_with_dropout(q, k, v, mask):
    weights = torch.softmax(_scores(q, k).masked_fill(~mask, -1e9), dim=-1).masked_fill(~mask, 0.0)
    weights = F.dropout(weights, 0.1)
    return weights @ v, weights


def queries_scaled_in_place(q, k, v, mask):
    q.mul_(q.shape[-1] ** -0.5)
    weights = torch.softmax((q @ k.mT).masked_fill(~mask, -1e9), dim=-1).masked_fill(~mask, 0.0)
    return weights @ v, weights


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "padding_mask": [
        (lambda tokens, pad_id: tokens.eq(pad_id).unsqueeze(1).unsqueeze(2), "inverted", "post 1's convention"),
        (lambda tokens, pad_id: tokens.ne(pad_id), "no_broadcast_axes", "(B, 1, 1, T)"),
        (lambda tokens, pad_id: tokens.ne(pad_id).unsqueeze(1), "head_axis_missing", "get_attn_pad_mask"),
        (lambda tokens, pad_id: (tokens > 0).view(tokens.shape[0], 1, 1, -1), "pad_id_ignored", "not with pad_id"),
        (lambda tokens, pad_id: (tokens != pad_id).float()[:, None, None], "not_bool", "must be torch.bool"),
        (lambda tokens, pad_id: (tokens == pad_id)[:, None, None].byte(), "dtype", "returned dtype torch.uint8"),
        (lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None], "queries_masked", "(B, 1, T, 1)"),
        (padding_first_token_hidden, None, "your mask differs from the expected one at 2 of 10 entries on post 1's"),
        (padding_in_place, "in_place", "changes its input `tokens` in place"),
        (padding_greater_than, None, "differs from the expected one at 2 of 8 entries on pad_id 1 (0 is a real token)"),
        (padding_without_return, None, "is the `return` missing?"),
        (padding_expanded_over_queries, None, "returned shape (2, 1, 5, 5) on post 1's example"),
    ],
    "causal_mask": [
        (lambda n: torch.triu(torch.ones(n, n), diagonal=1).bool(), "inverted", "post 1's convention"),
        (lambda n: torch.ones(n, n).triu() == 1, "future_visible", "lets the future in"),
        (lambda n: torch.arange(n)[:, None] > torch.arange(n)[None, :], "diagonal_hidden", "attend to itself"),
        (lambda n: torch.tril(torch.ones(n, n, dtype=torch.int64)), "not_bool", "build a torch.bool mask"),
        (post_1_subsequent, "post_1_uint8", "get_attn_subsequent_mask"),
        (causal_pytorch_style, "additive_mask", "generate_square_subsequent_mask"),
        (causal_one_step_ahead, None, "your mask differs from the expected one at 3 of 16 entries on size 4"),
        (causal_with_batch_axes, None, "returned shape (1, 1, 4, 4) on size 4, expected (4, 4)"),
        (causal_from_numpy, None, "returned an object of type ndarray on size 4"),
        (causal_without_return, None, "is the `return` missing?"),
        (causal_fixed_size, None, "returned shape (4, 4) on size 1, expected (1, 1)"),
    ],
    "decoder_mask": [
        (lambda t, p: torch.logical_or(_not_padding(t, p), _lower_triangle(t)), "or_instead_of_and", "with OR"),
        (lambda t, p: torch.logical_not(_not_padding(t, p) & _lower_triangle(t)), "inverted", "inverted"),
        (lambda t, p: _not_padding(t, p).int() + _lower_triangle(t).int(), "sum_not_bool", "torch.gt"),
        (lambda t, p: _lower_triangle(t)[None, None].repeat(t.size(0), 1, 1, 1), "causal_only", "padding is not"),
        (lambda t, p: _lower_triangle(t), "causal_only", "padding is not hidden"),
        (lambda t, p: _not_padding(t, p).repeat(1, 1, t.size(1), 1), "padding_only", "future is not hidden"),
        (lambda t, p: _not_padding(t, p), "padding_only", "future is not hidden"),
        (lambda t, p: _not_padding(t, p) & _not_padding(t, p).mT & _lower_triangle(t), "queries_masked", "rows"),
        (lambda t, p: (_not_padding(t, p) & _lower_triangle(t)).squeeze(1), "head_axis_missing", "(B, 1, T, T)"),
        # With right padding the causal mask already hides the padded keys from every real query.
        (decoder_padding_on_queries, "queries_masked", "you also hid the rows of padded queries"),
        (decoder_as_long, "dtype", "returned dtype torch.int64 on target inputs"),
        (
            decoder_pad_id_ignored,
            None,
            "differs from the expected one at 11 of 36 entries on one sequence with pad_id 2",
        ),
        (decoder_without_return, None, "is the `return` missing?"),
    ],
    "masked_attention": [
        (d2l_style, "fully_masked_uniform", "gets uniform weights"),
        (minus_infinity, "fully_masked_nan", "gives NaN"),
        (renormalised_after_softmax, "fully_masked_nan", "gives NaN"),
        (post_1_convention, "inverted_mask", "post 1's convention"),
        (zeroed_after_softmax, "mask_after_softmax", "after the softmax"),
        (mask_unused, "mask_ignored", "changes nothing"),
        (unscaled, "no_scale", "without the scale"),
        (hidden_scores_zeroed, "zero_fill", "hidden keys still get attention"),
        (output_only, None, "expected 2 values"),
        (weights_then_output, None, "value 0: returned shape (2, 2, 5, 5) on a padding mask"),
        (masked_with_dropout, "nondeterministic", "dropout or random noise"),
        (queries_scaled_in_place, "in_place", "changes its input `q` in place"),
    ],
}


def test_other_right_answers_pass():
    assert check.causal_mask(lambda n: torch.arange(n)[:, None] >= torch.arange(n)[None, :]).passed
    assert check.decoder_mask(lambda t, p: tc.combine_masks(tc.padding_mask(t, p), tc.causal_mask(t.shape[1]))).passed

    def careful(q, k, v, mask):
        weights = F.softmax(_scores(q, k).masked_fill(~mask, -1e9), dim=-1) * mask
        return weights @ v, weights

    assert check.masked_attention(careful).passed
