"""Chapter 19's checkers: the reference solutions pass, and each usual mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.
"""

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["rope_qkv", "swiglu", "repeat_kv"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_the_package_passes_too():
    assert check.repeat_kv(tc.repeat_kv).passed

    def with_the_package(q, k, v, start, theta):
        cos, sin = tc.RotaryEmbedding(q.shape[-1], theta)(start, q.shape[2])
        return tc.apply_rope(q, cos, sin), tc.apply_rope(k, cos, sin), v

    assert check.rope_qkv(with_the_package).passed

    def with_the_module(x, w_gate, w_up, w_down):
        ffn = tc.SwiGLU(x.shape[-1], w_gate.shape[0])
        with torch.no_grad():
            for linear, w in ((ffn.w_gate, w_gate), (ffn.w_up, w_up), (ffn.w_down, w_down)):
                linear.weight.copy_(w)
            return ffn(x)

    assert check.swiglu(with_the_module).passed


WRONG_ANSWERS: dict[str, list] = {}

# ---- exercise 19.1: rotary position embeddings


def angles_for(q, start, theta, first=None, exponent=2.0, inverse=True):
    d, length = q.shape[-1], q.shape[2]
    i = torch.arange(d // 2, dtype=torch.float)
    freq = theta ** (-exponent * i / d) if inverse else theta ** (exponent * i / d)
    first = start if first is None else first
    pos = torch.arange(first, first + length, dtype=torch.float)
    return torch.outer(pos, freq)  # (T, d/2)


def half_split(x, a, sign=1.0, swap=False):
    cos, sin = torch.cat([a, a], -1).cos(), torch.cat([a, a], -1).sin()
    if swap:
        cos, sin = sin, cos
    d = x.shape[-1] // 2
    other = torch.cat([-x[..., d:], x[..., :d]], dim=-1)
    return x * cos + sign * other * sin


def rope_paper_pairs(q, k, v, start, theta):
    a = angles_for(q, start, theta)
    cos, sin = a.cos(), a.sin()

    def rot(x):
        x0, x1 = x[..., ::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., ::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    return rot(q), rot(k), v


def rope_complex(q, k, v, start, theta):
    # Meta's original code: complex numbers from consecutive pairs (the interleaved layout).
    a = angles_for(q, start, theta)
    turn = torch.polar(torch.ones_like(a), a)

    def rot(x):
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(z * turn).flatten(-2)

    return rot(q), rot(k), v


def rope_all_three(q, k, v, start, theta):
    a = angles_for(q, start, theta)
    return half_split(q, a), half_split(k, a), half_split(v, a)


def rope_only_queries(q, k, v, start, theta):
    return half_split(q, angles_for(q, start, theta)), k, v


def rope_only_keys(q, k, v, start, theta):
    return q, half_split(k, angles_for(q, start, theta)), v


def rope_from_zero(q, k, v, start, theta):
    a = angles_for(q, start, theta, first=0)
    return half_split(q, a), half_split(k, a), v


def rope_from_one(q, k, v, start, theta):
    a = angles_for(q, start, theta, first=start + 1)
    return half_split(q, a), half_split(k, a), v


def rope_exponent_i_over_d(q, k, v, start, theta):
    a = angles_for(q, start, theta, exponent=1.0)
    return half_split(q, a), half_split(k, a), v


def rope_theta_power(q, k, v, start, theta):
    a = angles_for(q, start, theta, inverse=False)
    return half_split(q, a), half_split(k, a), v


def rope_default_base(q, k, v, start, theta):
    a = angles_for(q, start, 10000.0)
    return half_split(q, a), half_split(k, a), v


def rope_clockwise(q, k, v, start, theta):
    a = angles_for(q, start, theta)
    return half_split(q, a, sign=-1.0), half_split(k, a, sign=-1.0), v


def rope_sin_cos(q, k, v, start, theta):
    a = angles_for(q, start, theta)
    return half_split(q, a, swap=True), half_split(k, a, swap=True), v


def rope_scaling_only(q, k, v, start, theta):
    a = torch.cat([angles_for(q, start, theta)] * 2, -1)
    return q * a.cos() + q * a.sin(), k * a.cos() + k * a.sin(), v


def rope_mixed_layout(q, k, v, start, theta):
    a = angles_for(q, start, theta).repeat_interleave(2, dim=-1)  # (T, d): the interleaved layout's angles
    d = q.shape[-1] // 2

    def rot(x):
        return x * a.cos() + torch.cat([-x[..., d:], x[..., :d]], dim=-1) * a.sin()

    return rot(q), rot(k), v


def rope_returns_two(q, k, v, start, theta):
    a = angles_for(q, start, theta)
    return half_split(q, a), half_split(k, a)


WRONG_ANSWERS["rope_qkv"] = [
    (rope_paper_pairs, "interleaved_pairs", "pairs feature i with feature i + d/2"),
    (rope_complex, "interleaved_pairs", "rotate_half"),
    (rope_all_three, "values_rotated", "values were rotated"),
    (rope_only_queries, "keys_not_rotated", "unrotated keys"),
    (rope_only_keys, "queries_not_rotated", "queries are not rotated"),
    (rope_from_zero, "start_ignored", "after a cached prefix"),
    (rope_from_one, "off_by_one", "one too far"),
    (rope_exponent_i_over_d, "exponent_without_2", "the exponent is 2i/d"),
    (rope_theta_power, "frequency_not_inverted", "growing with i"),
    (rope_default_base, "theta_hardcoded", "use the theta argument"),
    (rope_clockwise, "wrong_direction", "wrong way"),
    (rope_sin_cos, "cos_sin_swapped", "cos and sin are swapped"),
    (rope_scaling_only, "no_rotate_half", "only scales each feature"),
    (rope_mixed_layout, "angles_interleaved", "share an angle"),
    (rope_returns_two, None, "expected 3 values"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["rope_qkv"])
def test_rope_mistakes_are_named(reader, mistake, words):
    result = check.rope_qkv(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 19.2: SwiGLU


def swiglu_up_gated(x, w_gate, w_up, w_down):
    return ((x @ w_gate.T) * F.silu(x @ w_up.T)) @ w_down.T


def swiglu_both(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.T) * F.silu(x @ w_up.T)) @ w_down.T


def swiglu_bilinear(x, w_gate, w_up, w_down):
    return ((x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_relu(x, w_gate, w_up, w_down):
    return (torch.relu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_gelu(x, w_gate, w_up, w_down):
    return (F.gelu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_sigmoid(x, w_gate, w_up, w_down):
    return (torch.sigmoid(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_silu_of_product(x, w_gate, w_up, w_down):
    return F.silu((x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_added(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.T) + x @ w_up.T) @ w_down.T


def swiglu_silu_last(x, w_gate, w_up, w_down):
    return F.silu(((x @ w_gate.T) * (x @ w_up.T)) @ w_down.T)


def swiglu_swish_by_hand_wrong(x, w_gate, w_up, w_down):
    z = x @ w_gate.T
    return ((x @ w_up.T) * torch.sigmoid(x @ w_up.T) * z) @ w_down.T  # swish of the wrong branch, by hand


def swiglu_untransposed(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_no_down(x, w_gate, w_up, w_down):
    return F.silu(x @ w_gate.T) * (x @ w_up.T)


WRONG_ANSWERS["swiglu"] = [
    (swiglu_up_gated, "silu_on_up", "wrong branch"),
    (swiglu_swish_by_hand_wrong, "silu_on_up", "wrong branch"),
    (swiglu_both, "silu_on_both", "both branches"),
    (swiglu_bilinear, "no_activation", "bilinear"),
    (swiglu_relu, "relu_gate", "ReGLU"),
    (swiglu_gelu, "gelu_gate", "GEGLU"),
    (swiglu_sigmoid, "sigmoid_gate", "original GLU"),
    (swiglu_silu_of_product, "silu_after_product", "applied to the product"),
    (swiglu_added, "sum_not_product", "were added"),
    (swiglu_silu_last, "silu_on_output", "after W_down"),
    (swiglu_untransposed, None, "raised"),
    (swiglu_no_down, None, "shape"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["swiglu"])
def test_swiglu_mistakes_are_named(reader, mistake, words):
    result = check.swiglu(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 19.3: repeat-KV


def repeat_tiled(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)


def repeat_expand_wrong_axis(x, n_rep):
    b, h, t, d = x.shape
    return x[:, None].expand(b, n_rep, h, t, d).reshape(b, h * n_rep, t, d)


def repeat_time(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_batch(x, n_rep):
    return torch.cat([x[i : i + 1].expand(n_rep, -1, -1, -1) for i in range(x.shape[0])])


def repeat_features(x, n_rep):
    return x.repeat_interleave(n_rep, dim=3)


def repeat_averaged(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1) / n_rep


def repeat_by_total_heads(x, n_rep):
    n_heads = n_rep  # "n_rep is the number of query heads"
    return x.repeat_interleave(max(1, n_heads // x.shape[1]), dim=1)


def repeat_nothing(x, n_rep):
    return x.clone()


def repeat_five_dims(x, n_rep):
    return x[:, :, None].expand(-1, -1, n_rep, -1, -1)


def repeat_with_view(x, n_rep):
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, t, d).view(b, h * n_rep, t, d)


def repeat_shared_head_mean(x, n_rep):
    return x.mean(dim=1, keepdim=True).expand(-1, x.shape[1] * n_rep, -1, -1)


WRONG_ANSWERS["repeat_kv"] = [
    (repeat_tiled, "tiled", "wrong order"),
    (repeat_expand_wrong_axis, "tiled", "j // n_rep"),
    (repeat_time, "time_axis", "time axis"),
    (repeat_batch, "batch_axis", "batch axis"),
    (repeat_features, "feature_axis", "features"),
    (repeat_averaged, "divided_by_group", "divided by n_rep"),
    (repeat_by_total_heads, "n_rep_as_heads", "group size"),
    (repeat_nothing, "not_repeated", "not repeated"),
    (repeat_five_dims, None, "shape"),
    (repeat_with_view, None, "raised"),
    (repeat_shared_head_mean, None, "wrong values"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["repeat_kv"])
def test_repeat_kv_mistakes_are_named(reader, mistake, words):
    result = check.repeat_kv(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


def test_rope_of_a_reader_with_float64_angles_is_accepted():
    def careful(q, k, v, start, theta):
        d = q.shape[-1]
        freq = 1 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        a = torch.outer(torch.arange(start, start + q.shape[2], dtype=torch.float64), freq)
        a = torch.cat([a, a], -1)
        half = d // 2

        def rot(x):
            other = torch.cat([-x[..., half:], x[..., :half]], -1)
            return (x * a.cos() + other * a.sin()).float()

        return rot(q), rot(k), v

    assert check.rope_qkv(careful).passed
