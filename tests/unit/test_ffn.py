"""Chapter 5, transformer_course/ffn.py: the position-wise feed-forward network."""

import pytest
import torch
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_ffn_equals_conv1d_with_kernel_one_and_same_parameter_count():
    ffn = tc.PositionwiseFeedForward(8, 32)
    conv1, conv2 = nn.Conv1d(8, 32, kernel_size=1), nn.Conv1d(32, 8, kernel_size=1)
    with torch.no_grad():
        conv1.weight.copy_(ffn.w_1.weight[:, :, None])
        conv1.bias.copy_(ffn.w_1.bias)
        conv2.weight.copy_(ffn.w_2.weight[:, :, None])
        conv2.bias.copy_(ffn.w_2.bias)
    x = torch.randn(2, 5, 8)
    conv_out = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)
    torch.testing.assert_close(ffn(x), conv_out, atol=1e-5, rtol=0)
    assert tc.count_parameters(ffn) == tc.count_parameters(conv1) + tc.count_parameters(conv2)


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("unknown activation", lambda: tc.PositionwiseFeedForward(8, 16, activation="swish"), ValueError,
     r"activation='swish' is not one of"),
    ("feed-forward of integers", lambda: tc.PositionwiseFeedForward(4, 8)(torch.ones(2, 4, dtype=torch.long)),
     TypeError, r"x must be a floating-point tensor"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
