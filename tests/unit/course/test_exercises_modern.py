"""Chapter 19's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import transformer_course as tc
from transformer_course import modern
from transformer_course.course.exercises import check, solutions


def test_the_refused_functions_are_given_back_after_each_check():
    originals = (tc.apply_rope, modern.apply_rope, tc.repeat_kv, modern.repeat_kv, F.scaled_dot_product_attention)
    assert not check.rope_qkv(rope_with_the_package).passed
    assert not check.grouped_attention(grouped_with_sdpa).passed
    after = (tc.apply_rope, modern.apply_rope, tc.repeat_kv, modern.repeat_kv, F.scaled_dot_product_attention)
    assert all(a is b for a, b in zip(originals, after))


def test_the_package_module_passes_the_swiglu_check():
    def with_the_module(x, w_gate_up, w_down):
        ffn = tc.SwiGLU(x.shape[-1], w_down.shape[1])
        with torch.no_grad():
            w_gate, w_up = w_gate_up.chunk(2)
            for linear, w in ((ffn.w_gate, w_gate), (ffn.w_up, w_up), (ffn.w_down, w_down)):
                linear.weight.copy_(w)
            return ffn(x)

    assert check.swiglu(with_the_module).passed


WRONG_ANSWERS: dict[str, list] = {}

# ---- exercise 19.1: rotary position embeddings for per-row positions


def angles_for(q, positions, theta, exponent=2.0, inverse=True, shift=0):
    d = q.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float)
    freq = theta ** (-exponent * i / d) if inverse else theta ** (exponent * i / d)
    return (positions.float() + shift).unsqueeze(-1) * freq  # (B, T, d/2)


def half_split(x, a, sign=1.0, swap=False):
    a = torch.cat([a, a], -1).unsqueeze(1)  # (B, 1, T, d)
    cos, sin = a.cos(), a.sin()
    if swap:
        cos, sin = sin, cos
    d = x.shape[-1] // 2
    other = torch.cat([-x[..., d:], x[..., :d]], dim=-1)
    return x * cos + sign * other * sin


def rope_with_the_package(q, k, v, positions, theta):
    cos, sin = tc.RotaryEmbedding(q.shape[-1], theta)(0, q.shape[2])
    return tc.apply_rope(q, cos, sin), tc.apply_rope(k, cos, sin), v


def rope_apply_rope_per_row(q, k, v, positions, theta):
    a = torch.cat([angles_for(q, positions, theta)] * 2, -1).unsqueeze(1)
    return tc.apply_rope(q, a.cos(), a.sin()), tc.apply_rope(k, a.cos(), a.sin()), v


def rope_paper_pairs(q, k, v, positions, theta):
    a = angles_for(q, positions, theta).unsqueeze(1)
    cos, sin = a.cos(), a.sin()

    def rot(x):
        x0, x1 = x[..., ::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., ::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    return rot(q), rot(k), v


def rope_complex(q, k, v, positions, theta):
    # Meta's original code: complex numbers from consecutive pairs (the interleaved layout).
    a = angles_for(q, positions, theta).unsqueeze(1)
    turn = torch.polar(torch.ones_like(a), a)

    def rot(x):
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(z * turn).flatten(-2)

    return rot(q), rot(k), v


def rope_all_three(q, k, v, positions, theta):
    a = angles_for(q, positions, theta)
    return half_split(q, a), half_split(k, a), half_split(v, a)


def rope_only_queries(q, k, v, positions, theta):
    return half_split(q, angles_for(q, positions, theta)), k, v


def rope_only_keys(q, k, v, positions, theta):
    return q, half_split(k, angles_for(q, positions, theta)), v


def rope_arange(q, k, v, positions, theta):
    batch, length = positions.shape
    a = angles_for(q, torch.arange(length).repeat(batch, 1), theta)
    return half_split(q, a), half_split(k, a), v


def rope_first_row(q, k, v, positions, theta):
    a = angles_for(q, positions[0], theta)  # (T, d/2): one row for the whole batch
    a = a.expand(q.shape[0], -1, -1)
    return half_split(q, a), half_split(k, a), v


def rope_no_head_axis(q, k, v, positions, theta):
    a = angles_for(q, positions, theta)
    a = torch.cat([a, a], -1)  # (B, T, d), broadcast as if it were (H, T, d)
    d = q.shape[-1] // 2

    def rot(x):
        return x * a.cos() + torch.cat([-x[..., d:], x[..., :d]], -1) * a.sin()

    return rot(q), rot(k), v


def rope_from_one(q, k, v, positions, theta):
    a = angles_for(q, positions, theta, shift=1)
    return half_split(q, a), half_split(k, a), v


def rope_exponent_i_over_d(q, k, v, positions, theta):
    a = angles_for(q, positions, theta, exponent=1.0)
    return half_split(q, a), half_split(k, a), v


def rope_theta_power(q, k, v, positions, theta):
    a = angles_for(q, positions, theta, inverse=False)
    return half_split(q, a), half_split(k, a), v


def rope_default_base(q, k, v, positions, theta):
    a = angles_for(q, positions, 10000.0)
    return half_split(q, a), half_split(k, a), v


def rope_clockwise(q, k, v, positions, theta):
    a = angles_for(q, positions, theta)
    return half_split(q, a, sign=-1.0), half_split(k, a, sign=-1.0), v


def rope_sin_cos(q, k, v, positions, theta):
    a = angles_for(q, positions, theta)
    return half_split(q, a, swap=True), half_split(k, a, swap=True), v


def rope_scaling_only(q, k, v, positions, theta):
    a = torch.cat([angles_for(q, positions, theta)] * 2, -1).unsqueeze(1)
    return q * a.cos() + q * a.sin(), k * a.cos() + k * a.sin(), v


def rope_mixed_layout(q, k, v, positions, theta):
    a = angles_for(q, positions, theta).repeat_interleave(2, dim=-1).unsqueeze(1)  # the interleaved layout's angles
    d = q.shape[-1] // 2

    def rot(x):
        return x * a.cos() + torch.cat([-x[..., d:], x[..., :d]], dim=-1) * a.sin()

    return rot(q), rot(k), v


def rope_returns_two(q, k, v, positions, theta):
    a = angles_for(q, positions, theta)
    return half_split(q, a), half_split(k, a)


WRONG_ANSWERS["rope_qkv"] = [
    (rope_with_the_package, "package_called", "tc.apply_rope"),
    (rope_apply_rope_per_row, "package_called", "tensor operations"),
    (rope_paper_pairs, "interleaved_pairs", "pairs feature i with feature i + d/2"),
    (rope_complex, "interleaved_pairs", "Meta's original"),
    (rope_all_three, "values_rotated", "values were rotated"),
    (rope_only_queries, "keys_not_rotated", "unrotated keys"),
    (rope_only_keys, "queries_not_rotated", "queries are not rotated"),
    (rope_arange, "positions_ignored", "positions 0, 1, ..., T - 1"),
    (rope_first_row, "first_row_positions", "first row's positions"),
    (rope_no_head_axis, "head_axis_missing", "(B, 1, T, d)"),
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


def test_rope_of_a_reader_with_float64_angles_is_accepted():
    def careful(q, k, v, positions, theta):
        d = q.shape[-1]
        freq = 1 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        a = positions.double()[..., None] * freq
        a = torch.cat([a, a], -1)[:, None]
        half = d // 2

        def rot(x):
            other = torch.cat([-x[..., half:], x[..., :half]], -1)
            return (x * a.cos() + other * a.sin()).float()

        return rot(q), rot(k), v

    assert check.rope_qkv(careful).passed


# ---- exercise 19.2: SwiGLU from a fused gate-up weight


def split(w):
    f = w.shape[0] // 2
    return w[:f], w[f:]


def swiglu_halves_swapped(x, w_gate_up, w_down):
    up_w, gate_w = split(w_gate_up)  # "up first", as the name gate_up does not say
    return (F.silu(x @ gate_w.T) * (x @ up_w.T)) @ w_down.T


def swiglu_silu_on_second_chunk(x, w_gate_up, w_down):
    a, b = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (a * F.silu(b)) @ w_down.T


def swiglu_every_other_row(x, w_gate_up, w_down):
    h = x @ w_gate_up.T
    return (F.silu(h[..., 0::2]) * h[..., 1::2]) @ w_down.T


def swiglu_both(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (F.silu(gate) * F.silu(up)) @ w_down.T


def swiglu_silu_before_split(x, w_gate_up, w_down):
    gate, up = F.silu(x @ w_gate_up.T).chunk(2, dim=-1)
    return (gate * up) @ w_down.T


def swiglu_bilinear(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (gate * up) @ w_down.T


def swiglu_relu(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (torch.relu(gate) * up) @ w_down.T


def swiglu_gelu(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (F.gelu(gate) * up) @ w_down.T


def swiglu_sigmoid(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (torch.sigmoid(gate) * up) @ w_down.T


def swiglu_silu_of_product(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return F.silu(gate * up) @ w_down.T


def swiglu_added(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return (F.silu(gate) + up) @ w_down.T


def swiglu_silu_last(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return F.silu((gate * up) @ w_down.T)


def swiglu_split_the_inputs(x, w_gate_up, w_down):
    gate_w, up_w = w_gate_up.chunk(2, dim=1)  # columns: the input features halved
    return (F.silu(x @ gate_w.T) * (x @ up_w.T)) @ w_down.T


def swiglu_no_down(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)
    return F.silu(gate) * up


WRONG_ANSWERS["swiglu"] = [
    (swiglu_halves_swapped, "halves_swapped", "halves are swapped"),
    (swiglu_silu_on_second_chunk, "halves_swapped", "first d_ff rows"),
    (swiglu_every_other_row, "interleaved_rows", "every other row"),
    (swiglu_both, "silu_on_both", "both halves"),
    (swiglu_silu_before_split, "silu_on_both", "stays linear"),
    (swiglu_bilinear, "no_activation", "bilinear"),
    (swiglu_relu, "relu_gate", "ReGLU"),
    (swiglu_gelu, "gelu_gate", "GEGLU"),
    (swiglu_sigmoid, "sigmoid_gate", "original GLU"),
    (swiglu_silu_of_product, "silu_after_product", "applied to the product"),
    (swiglu_added, "sum_not_product", "were added"),
    (swiglu_silu_last, "silu_on_output", "after W_down"),
    (swiglu_split_the_inputs, None, "raised"),
    (swiglu_no_down, None, "shape"),
]


# ---- exercise 19.3: grouped-query attention without repeated heads


def causal(scores):
    t = scores.shape[-1]
    return scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), -math.inf)


def grouped_with_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def grouped_with_repeat_kv(q, k, v):
    n = q.shape[1] // k.shape[1]
    k, v = tc.repeat_kv(k, n), tc.repeat_kv(v, n)
    return causal(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def grouped_tiled_view(q, k, v):
    b, h, t, d = q.shape
    g = k.shape[1]
    q = q.view(b, h // g, g, t, d).transpose(1, 2)  # (B, H_kv, n_rep, T, d) with head j in group j % H_kv
    w = causal(q @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    return (w @ v[:, :, None]).transpose(1, 2).reshape(b, h, t, d)


def grouped_with_torch_repeat(q, k, v):
    n = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, n, 1, 1), v.repeat(1, n, 1, 1)
    return causal(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def grouped_output_transposed(q, k, v):
    b, h, t, d = q.shape
    g = k.shape[1]
    q = q.view(b, g, h // g, t, d)
    w = causal(q @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    return (w @ v[:, :, None]).transpose(1, 2).reshape(b, h, t, d)


def grouped_values_tiled(q, k, v):
    n = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(n, 1), torch.cat([v] * n, 1)
    return causal(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def grouped(q, k, v, mask=causal, scale=None, dim=-1):
    b, h, t, d = q.shape
    g = k.shape[1]
    s = q.view(b, g, h // g, t, d) @ k[:, :, None].transpose(-1, -2) / (scale or math.sqrt(d))
    return (mask(s).softmax(dim) @ v[:, :, None]).reshape(b, h, t, d)


def grouped_no_mask(q, k, v):
    return grouped(q, k, v, mask=lambda s: s)


def grouped_diagonal_hidden(q, k, v):
    t = q.shape[2]
    return grouped(q, k, v, mask=lambda s: s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(), -math.inf))


def grouped_sees_next(q, k, v):
    t = q.shape[2]
    return grouped(q, k, v, mask=lambda s: s.masked_fill(torch.ones(t, t).triu(2).bool(), float("-inf")))


def grouped_zero_fill(q, k, v):
    t = q.shape[2]
    return grouped(q, k, v, mask=lambda s: s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), 0.0))


def grouped_mask_after_softmax(q, k, v):
    b, h, t, d = q.shape
    g = k.shape[1]
    w = (q.view(b, g, h // g, t, d) @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    w = w * torch.ones(t, t).tril()
    return (w @ v[:, :, None]).reshape(b, h, t, d)


def grouped_softmax_over_queries(q, k, v):
    return grouped(q, k, v, dim=-2)


def grouped_unscaled(q, k, v):
    return grouped(q, k, v, scale=1.0)


def grouped_divided_by_d(q, k, v):
    return grouped(q, k, v, scale=q.shape[-1])


def grouped_scaled_by_model_width(q, k, v):
    return grouped(q, k, v, scale=math.sqrt(q.shape[1] * q.shape[-1]))


def grouped_keeps_groups(q, k, v):
    b, h, t, d = q.shape
    g = k.shape[1]
    out = causal(q.view(b, g, h // g, t, d) @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    return out @ v[:, :, None]  # (B, H_kv, n_rep, T, d): the heads never merged back


WRONG_ANSWERS["grouped_attention"] = [
    (grouped_with_sdpa, "package_called", "enable_gqa"),
    (grouped_with_repeat_kv, "package_called", "tc.repeat_kv"),
    (grouped_tiled_view, "tiled_groups", "j // n_rep"),
    (grouped_with_torch_repeat, "tiled_groups", "consecutive"),
    (grouped_output_transposed, "output_heads_tiled", "without a transpose"),
    (grouped_values_tiled, "values_tiled", "values tiled"),
    (grouped_no_mask, "not_causal", "no causal mask"),
    (grouped_diagonal_hidden, "diagonal_masked", "may see itself"),
    (grouped_sees_next, "future_by_one", "triu(2)"),
    (grouped_zero_fill, "mask_with_zero", "exp(0)"),
    (grouped_mask_after_softmax, "mask_after_softmax", "sums to 1"),
    (grouped_softmax_over_queries, "softmax_over_queries", "dim -2"),
    (grouped_unscaled, "no_scale", "not scaled"),
    (grouped_divided_by_d, "scale_by_d", "divided by d"),
    (grouped_scaled_by_model_width, "scale_by_model_width", "model's width"),
    (grouped_keeps_groups, None, "shape"),
]


# ---- the reference solution of exercise 19.3 makes no copy of the key/value heads, as the exercise promises


class _Reads(TorchDispatchMode):
    """Records every aten operation that is given a tensor sharing memory with one of `watched`."""

    def __init__(self, *watched):
        super().__init__()
        self.memory = {t.untyped_storage().data_ptr() for t in watched}
        self.reads = []  # (operation, strides of the tensor it was given)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in self.memory:
                self.reads.append((func, t.stride()))
        return func(*args, **kwargs)


MATRIX_PRODUCTS = (torch.ops.aten.bmm.default, torch.ops.aten.mm.default)
COPYING = ("aten::clone", "aten::copy_", "aten::contiguous", "aten::repeat", "aten::cat", "aten::index")


def unviewed_reads(watched, fn, q, k, v):
    """(operation, strides) of what `fn(q, k, v)` does to the memory of the `watched` tensors other than viewing it
    or multiplying it as it lies."""
    with _Reads(*watched) as reads:
        fn(q, k, v)
    # A matrix product reads a view as it lies, unless the view broadcasts (a stride 0), which the kernel expands.
    return [
        (f, strides) for f, strides in reads.reads if not (f.is_view or (f in MATRIX_PRODUCTS and 0 not in strides))
    ]


def copies_of_the_kv_heads(fn, q, k, v):
    """What `fn(q, k, v)` does to k's and v's memory other than viewing it or multiplying it as it lies, and the
    copying operations, nested ones included, given a tensor n_rep times the size of k (q's size too: give a
    contiguous q, which the solution only views)."""
    touched = [str(f) for f, _ in unviewed_reads((k, v), fn, q, k, v)]
    repeated = k.numel() * (q.shape[1] // k.shape[1])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn(q, k, v)
    for event in prof.events():
        if event.name in COPYING and any(math.prod(s) == repeated for s in event.input_shapes if s):
            touched.append(event.name)
    return touched


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 2), (6, 2), (8, 1)])
def test_the_grouped_attention_solution_never_copies_the_key_value_heads(n_heads, n_kv_heads):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, n_heads, 5, 8, generator=g)  # d = 8 and T = 5: a score matrix is not k's size
    k, v = torch.randn(2, n_kv_heads, 5, 8, generator=g), torch.randn(2, n_kv_heads, 5, 8, generator=g)
    assert copies_of_the_kv_heads(solutions.grouped_attention, q, k, v) == []
    assert torch.allclose(solutions.grouped_attention(q, k, v), grouped(q, k, v), atol=1e-6)
    # The same values, copied: broadcasting k (B, H_kv, 1, T, d) over the group makes torch.matmul expand it into
    # n_rep copies, and tc.repeat_kv lays them out; the test sees both.
    assert "aten.clone.default" in copies_of_the_kv_heads(grouped, q, k, v)
    assert copies_of_the_kv_heads(grouped_with_repeat_kv, q, k, v) != []


def copies_of(x, fn, q, k, v):
    """The strides of each tensor on x's memory that `fn(q, k, v)` copies or hands to anything but a view or a
    matrix product reading it as it lies; a 0 stride is a copy of x broadcast over the group, n_rep times."""
    return [strides for _, strides in unviewed_reads((x,), fn, q, k, v)]


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 2), (6, 2), (8, 1)])
def test_the_grouped_attention_solution_copies_a_transposed_key_value_view_at_most_once(n_heads, n_kv_heads):
    # k and v as GroupedQueryAttention.forward makes v: (B, T, H_kv, d) viewed as (B, H_kv, T, d). torch.matmul
    # cannot merge such a view's batch axes into one (unless H_kv = 1) and copies it, once, at its own size.
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, n_heads, 5, 8, generator=g)
    k, v = (torch.randn(2, 5, n_kv_heads, 8, generator=g).transpose(1, 2) for _ in "kv")
    assert torch.allclose(solutions.grouped_attention(q, k, v), grouped(q, k, v), atol=1e-6)
    for x in (k, v):
        copies = copies_of(x, solutions.grouped_attention, q, k, v)
        assert len(copies) <= 1 and all(0 not in strides for strides in copies), copies
        # Broadcasting over the group copies the same view n_rep times: a 0 stride, which the test sees.
        assert any(0 in strides for strides in copies_of(x, grouped, q, k, v))
    # Nor is any copying operation given a tensor n_rep times k's size, nor are there more than two clones of
    # k's size (one of k, one of v), copies of copies included: the profiler sees nested operations too.
    assert set(copies_of_the_kv_heads(solutions.grouped_attention, q, k, v)) <= {"aten.clone.default"}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        solutions.grouped_attention(q, k, v)
    clones = [e for e in prof.events() if e.name == "aten::clone" and math.prod(e.input_shapes[0]) == k.numel()]
    assert len(clones) <= 2  # k's size (2 · H_kv · 5 · 8) is no other tensor's here: T = 5, d = 8
