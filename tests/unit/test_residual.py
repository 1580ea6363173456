"""Chapter 7, transformer_course/residual.py: the sublayer connection, Post-LN and Pre-LN."""

import pytest
import torch

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_connection_order(norm_first):
    sub = tc.SublayerConnection(8, dropout=0.0, norm_first=norm_first)
    x = torch.randn(2, 3, 8)

    def double(y):
        return 2 * y

    expected = x + double(sub.norm(x)) if norm_first else sub.norm(x + double(x))
    torch.testing.assert_close(sub(x, double), expected)
