"""Chapter 3, transformer_course/masks.py: causal and padding masks, their conventions and combination."""

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course import masks

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_causal_and_padding_masks():
    assert tc.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    tokens = torch.tensor([[1, 2, 3, 0, 0]])
    assert tc.padding_mask(tokens).shape == (1, 1, 1, 5)
    assert tc.padding_mask(tokens)[0, 0, 0].tolist() == [True, True, True, False, False]
    combined = masks.decoder_self_mask(tokens)
    assert combined.shape == (1, 1, 5, 5)
    assert combined[0, 0, 4].tolist() == [True, True, True, False, False]


def test_mask_conventions_convert_to_true_means_attend():
    hide = torch.tensor([[0, 1], [0, 0]], dtype=torch.uint8)  # post 1: 1 = hide
    keep = torch.tensor([[1, 0], [1, 1]])  # post 3: 0 = hide
    expected = [[True, False], [True, True]]
    assert tc.from_hide_mask(hide).tolist() == expected
    assert tc.from_keep_mask(keep).tolist() == expected
    assert masks.to_hide_mask(tc.from_hide_mask(hide)).tolist() == hide.bool().tolist()
    additive = masks.to_additive_mask(tc.from_keep_mask(keep), torch.float16)
    assert additive[0, 1] == torch.finfo(torch.float16).min and additive[0, 0] == 0


def test_additive_mask_equals_bool_mask_in_sdpa():
    q = torch.randn(1, 2, 4, 8)
    mask = tc.causal_mask(4)
    expected = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    got = F.scaled_dot_product_attention(q, q, q, attn_mask=masks.to_additive_mask(mask))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("causal mask of size zero", lambda: tc.causal_mask(0), ValueError, r"size=0 must be a positive integer"),
    ("masks that do not broadcast", lambda: tc.combine_masks(torch.ones(2, 3, dtype=torch.bool),
     torch.ones(4, 5, dtype=torch.bool)), ValueError, r"masks of shapes \(2, 3\), \(4, 5\) do not broadcast"),
    ("padding mask of floats", lambda: tc.padding_mask(torch.zeros(2, 3)), TypeError,
     r"tokens must be an integer tensor of token ids"),
    ("padding mask of 1-D tokens", lambda: tc.padding_mask(torch.zeros(3, dtype=torch.long)), ValueError,
     r"tokens must have 2 dimensions, got shape \(3,\)"),
    ("padding mask of uint8 tokens", lambda: tc.padding_mask(torch.zeros(2, 3, dtype=torch.uint8)), TypeError,
     r"tokens must be an integer tensor of token ids"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
