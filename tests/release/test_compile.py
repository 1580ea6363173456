"""torch.compile(fullgraph=True) traces the package's models whole (issue 21, item 6).

The package's argument checks read token ids (`int(ids.max())`), which a graph cannot hold; they run at the
door of an eager call only, never while torch.compile traces. This compiles GPT in one graph (a graph break
raises with fullgraph=True) and compares the compiled logits with the eager ones. It takes tens of seconds on
two CPU cores, so it lives in the release tier.
"""

from __future__ import annotations

import torch

import transformer_course as tc


def test_gpt_compiles_in_one_graph_and_gives_the_eager_logits():
    torch.manual_seed(0)
    model = tc.GPT(50, d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=32, dropout=0.0).eval()
    ids = torch.randint(0, 50, (2, 8))
    compiled = torch.compile(model, fullgraph=True, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids), model(ids), atol=1e-5, rtol=1e-5)
    # The eager model still refuses bad ids at its door.
    try:
        model(torch.tensor([[1, 60]]))
    except ValueError as error:
        assert "ids: ids in [1, 60], expected ids in [0, 49]" in str(error)
    else:
        raise AssertionError("an id outside the vocabulary was accepted")
