"""Chapter 2's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import check, solutions
from transformer_course.course.exercises.attention import post_2_example


def test_solutions_agree_with_the_package_and_with_pytorch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(solutions.attention_weights(q, k), weights)
    assert torch.allclose(solutions.attention(q, k, v), out, atol=1e-6)
    assert torch.allclose(solutions.attention(q, k, v), F.scaled_dot_product_attention(q, k, v), atol=1e-6)


def test_self_attention_solution_reproduces_seed_002_numbers():
    x, w_q, w_k, w_v = post_2_example()
    q, k = x @ w_q, x @ w_k
    assert torch.equal(q, torch.tensor([[1.0, 0, 2], [2, 2, 2], [2, 1, 3]]))
    assert torch.equal(k, torch.tensor([[0.0, 1, 1], [4, 4, 0], [2, 3, 1]]))
    assert torch.equal(q @ k.T, torch.tensor([[2.0, 4, 4], [4, 16, 12], [4, 12, 10]]))
    weights = torch.softmax(q @ k.T / math.sqrt(3), dim=-1)
    assert torch.allclose(solutions.self_attention(x, w_q, w_k, w_v), weights @ (x @ w_v))


# ---- exercise 2.1


def weights_unscaled(q, k):
    return F.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)


def weights_divided_by_d_k(q, k):
    return (q @ k.mT / k.size(-1)).softmax(-1)


def weights_scaled_after(q, k):
    return torch.softmax(q @ k.mT, -1) / q.size(-1) ** 0.5


def weights_over_queries(q, k):
    return F.softmax(torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1]), dim=-2)


def weights_forgot_softmax(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5


def weights_k_not_transposed(q, k):
    return torch.matmul(q, k).div(math.sqrt(q.shape[-1])).softmax(dim=-1)


def weights_dot_T(q, k):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)


def weights_temperature_two(q, k):  # a scale of 2√d_k: close, but no known mistake
    return torch.softmax(q @ k.mT / (2 * math.sqrt(q.shape[-1])), dim=-1)


def weights_scaled_in_place(q, k):
    q /= math.sqrt(q.shape[-1])  # divides the caller's queries too
    return torch.softmax(q @ k.mT, dim=-1)


def weights_scaled_by_key_count(q, k):
    return torch.softmax(q @ k.mT / math.sqrt(k.shape[-2]), dim=-1)


def weights_and_scores(q, k):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1), scores


def weights_log_softmax(q, k):
    return torch.log_softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)


def weights_in_float64(q, k):
    return torch.softmax(q.double() @ k.double().mT / math.sqrt(q.shape[-1]), dim=-1)


# ---- exercise 2.2


def post_0_formula(q, k, v):  # softmax(QKᵀ/√d_k · V), read literally
    d_k = q.shape[-1]
    return F.softmax(torch.matmul(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k), v), dim=-1)


def output_unscaled(q, k, v):
    return torch.softmax(q @ k.mT, dim=-1) @ v


def output_scaled_by_value_size(q, k, v):
    return torch.softmax(q @ k.mT / math.sqrt(v.size(-1)), dim=-1) @ v


def output_over_queries(q, k, v):
    return torch.matmul(F.softmax(q @ k.mT / math.sqrt(k.size(-1)), dim=-2), v)


def output_is_the_weights(q, k, v):
    return F.softmax(q @ k.mT / math.sqrt(k.size(-1)), dim=-1)


def output_and_weights(q, k, v):
    weights = F.softmax(q @ k.mT / math.sqrt(k.size(-1)), dim=-1)
    return weights @ v, weights


def output_v_transposed(q, k, v):
    return torch.softmax(q @ k.mT, -1) @ v.mT


def output_scaled_in_place(q, k, v):
    return torch.softmax(q.div_(math.sqrt(q.shape[-1])) @ k.mT, dim=-1) @ v


def output_values_on_the_left(q, k, v):
    return v @ torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)


def output_with_dropout(q, k, v):
    weights = F.dropout(torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1), p=0.1)
    return weights @ v


def output_without_return(q, k, v):
    out = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1) @ v  # noqa: F841


def output_in_half_precision(q, k, v):
    return (torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1) @ v).half()


def output_averages_the_keys(q, k, v):
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1) @ k


# ---- exercise 2.3


def no_projections(x, w_q, w_k, w_v):
    return F.scaled_dot_product_attention(x, x, x)


def keys_against_queries(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(k @ q.mT / math.sqrt(q.size(-1)), -1) @ v


def averages_the_input(x, w_q, w_k, w_v):
    q, k = x @ w_q, x @ w_k
    return torch.softmax(q @ k.mT / math.sqrt(k.size(-1)), -1) @ x


def linear_layout(x, w_q, w_k, w_v):
    q, k, v = F.linear(x, w_q), F.linear(x, w_k), F.linear(x, w_v)
    return F.scaled_dot_product_attention(q, k, v)


def softmax_around_v(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return post_0_formula(q, k, v)


def self_attention_unscaled(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.mT, dim=-1) @ v


def scaled_by_model_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.mT / math.sqrt(x.shape[-1]), dim=-1) @ v


def self_softmax_over_queries(x, w_q, w_k, w_v):
    q, k, v = torch.matmul(x, w_q), torch.matmul(x, w_k), torch.matmul(x, w_v)
    return F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=0 if x.dim() == 2 else 1) @ v


def self_returns_weights(x, w_q, w_k, w_v):
    q, k = x @ w_q, x @ w_k
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)


def scale_folded_into_w_q(x, w_q, w_k, w_v):
    w_q.div_(math.sqrt(w_q.shape[1]))  # the scale folded into the caller's W_Q
    return torch.softmax((x @ w_q) @ (x @ w_k).mT, dim=-1) @ (x @ w_v)


def self_attention_with_dropout(x, w_q, w_k, w_v):
    return F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, dropout_p=0.1)


def self_attention_in_float64(x, w_q, w_k, w_v):
    x, w_q, w_k, w_v = (t.to(torch.float64) for t in (x, w_q, w_k, w_v))
    return F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "attention_weights": [
        (weights_unscaled, "no_scale", "did you forget to divide by √d_k"),
        (weights_divided_by_d_k, "scale_by_d_k", "its square root"),
        (weights_scaled_after, "scale_after_softmax", "rows sum to 1/√d_k"),
        (weights_over_queries, "softmax_wrong_axis", "the columns sum to 1, not the rows"),
        (weights_forgot_softmax, "no_softmax", "these are the scaled scores"),
        (weights_k_not_transposed, "k_not_transposed", "multiplied by k itself"),
        (weights_dot_T, "batched_T", "k.T reverses every axis"),
        (weights_temperature_two, None, "returned the right shape but wrong values on 3 queries and 4 keys"),
        (weights_scaled_in_place, "in_place", "changes its input `q` in place"),
        (weights_scaled_by_key_count, None, "wrong values on 3 queries and 4 keys with d_k = 8"),
        (weights_and_scores, None, "returned an object of type tuple on 3 queries and 4 keys"),
        (weights_log_softmax, None, "wrong values on 3 queries and 4 keys"),
        (weights_in_float64, "dtype", "returned dtype torch.float64 on 3 queries and 4 keys with d_k = 8"),
    ],
    "attention": [
        (post_0_formula, "v_inside_softmax", "softmax(QKᵀ/√d_k · V)"),
        (output_unscaled, "no_scale", "did you forget to divide by √d_k"),
        (output_scaled_by_value_size, "scale_by_d_v", "the size of the values"),
        (output_over_queries, "softmax_wrong_axis", "softmax(scores, dim=-1)"),
        (output_is_the_weights, "returned_weights", "you returned the attention weights"),
        (output_and_weights, "returned_pair", "output only"),
        (output_v_transposed, None, "raised RuntimeError"),
        (output_scaled_in_place, "in_place", "changes its input `q` in place"),
        (output_values_on_the_left, None, "raised RuntimeError"),
        (output_with_dropout, "nondeterministic", "dropout or random noise"),
        (output_without_return, None, "is the `return` missing?"),
        (output_in_half_precision, "dtype", "returned dtype torch.float16"),
        (output_averages_the_keys, None, "returned shape (3, 8) on 3 queries and 4 keys with d_k = 8 and d_v = 2"),
    ],
    "self_attention": [
        (no_projections, "no_projection", "does not use W_Q, W_K, W_V"),
        (keys_against_queries, "scores_transposed", "you computed K Qᵀ"),
        (averages_the_input, "value_not_projected", "the weights average x itself"),
        (linear_layout, "linear_layout", "nn.Linear's layout"),
        (softmax_around_v, "v_inside_softmax", "after multiplying by V"),
        (self_attention_unscaled, "no_scale", "did you forget to divide by √d_k"),
        (scaled_by_model_width, "scale_by_d_model", "√d_model"),
        (self_softmax_over_queries, "softmax_wrong_axis", "the columns sum to 1"),
        (self_returns_weights, "returned_weights", "you returned the attention weights"),
        (scale_folded_into_w_q, "in_place", "changes its input `w_q` in place"),
        (self_attention_with_dropout, "nondeterministic", "dropout or random noise"),
        (self_attention_in_float64, "dtype", "returned dtype torch.float64"),
    ],
}


def test_attention_accepts_pytorch():
    assert check.attention(F.scaled_dot_product_attention).passed
