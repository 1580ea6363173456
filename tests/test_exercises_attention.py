"""Chapter 2's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions
from transformer_course.exercises.attention import seed_002_example


@pytest.mark.parametrize("name", ["attention_weights", "attention", "self_attention"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_solutions_agree_with_the_package_and_with_pytorch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(solutions.attention_weights(q, k), weights)
    assert torch.allclose(solutions.attention(q, k, v), out, atol=1e-6)
    assert torch.allclose(solutions.attention(q, k, v), F.scaled_dot_product_attention(q, k, v), atol=1e-6)


def test_self_attention_solution_reproduces_seed_002_numbers():
    x, w_q, w_k, w_v = seed_002_example()
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


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (weights_unscaled, "no_scale", "did you forget to divide by √d_k"),
        (weights_divided_by_d_k, "scale_by_d_k", "its square root"),
        (weights_scaled_after, "scale_after_softmax", "rows sum to 1/√d_k"),
        (weights_over_queries, "softmax_wrong_axis", "the columns sum to 1, not the rows"),
        (weights_forgot_softmax, "no_softmax", "these are the scaled scores"),
        (weights_k_not_transposed, "k_not_transposed", "multiplied by k itself"),
        (weights_dot_T, "batched_T", "k.T reverses every axis"),
    ],
)
def test_attention_weights_mistakes_are_named(reader, mistake, words):
    result = check.attention_weights(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_attention_weights_unrecognised_mistake_names_the_first_failing_case():
    def temperature_two(q, k):  # a scale of 2√d_k: close, but no known mistake
        return torch.softmax(q @ k.mT / (2 * math.sqrt(q.shape[-1])), dim=-1)

    result = check.attention_weights(temperature_two)
    assert not result.passed and result.mistake is None
    assert result.message.startswith("returned the right shape but wrong values on 3 queries and 4 keys")


# ---- exercise 2.2


def seed_000_formula(q, k, v):  # softmax(QKᵀ/√d_k · V), read literally
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


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (seed_000_formula, "v_inside_softmax", "softmax(QKᵀ/√d_k · V)"),
        (output_unscaled, "no_scale", "did you forget to divide by √d_k"),
        (output_scaled_by_value_size, "scale_by_d_v", "the size of the values"),
        (output_over_queries, "softmax_wrong_axis", "softmax(scores, dim=-1)"),
        (output_is_the_weights, "returned_weights", "you returned the attention weights"),
        (output_and_weights, "returned_pair", "output only"),
    ],
)
def test_attention_mistakes_are_named(reader, mistake, words):
    result = check.attention(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_attention_accepts_pytorch_and_explains_a_crash():
    assert check.attention(F.scaled_dot_product_attention).passed
    result = check.attention(lambda q, k, v: torch.softmax(q @ k.mT, -1) @ v.mT)  # v transposed: crashes
    assert not result.passed and result.mistake is None and result.message.startswith("raised RuntimeError")


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
    return seed_000_formula(q, k, v)


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (no_projections, "no_projection", "does not use W_Q, W_K, W_V"),
        (keys_against_queries, "scores_transposed", "you computed K Qᵀ"),
        (averages_the_input, "value_not_projected", "the weights average x itself"),
        (linear_layout, "linear_layout", "nn.Linear's layout"),
        (softmax_around_v, "v_inside_softmax", "after multiplying by V"),
    ],
)
def test_self_attention_mistakes_are_named(reader, mistake, words):
    result = check.self_attention(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result
