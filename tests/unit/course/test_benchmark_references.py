"""The sections that compare the package with models of torch.nn modules: the same weights give the same numbers,
and the tables hold the ratios and the targets (no timing is asserted)."""

import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from script_modules import load

import transformer_course as tc
from transformer_course.course import benchmark
from transformer_course.course.benchmark._core import target_note, use_fused
from transformer_course.course.benchmark._references import NANOGPT_CPU, nanogpt_like

TINY_GPT = dict(vocab_size=20, d_model=16, n_heads=2, n_layers=2, block_size=8)


def tiny_gpt() -> tc.GPT:
    torch.manual_seed(0)
    return tc.GPT(20, 16, 2, 2, 64, max_len=8, dropout=0.0)


def test_the_nanogpt_style_model_has_nanogpts_cpu_size_and_tc_gpts_parameter_count():
    sizes = {k: v for k, v in NANOGPT_CPU.items() if k != "batch_size"}
    assert sizes == dict(vocab_size=65, n_layers=4, n_heads=4, d_model=128, block_size=64)
    ours = tc.GPT(65, 128, 4, 4, 4 * 128, max_len=64, dropout=0.0)
    reference = benchmark.NanoGPT(**sizes)
    assert tc.count_parameters(reference) == tc.count_parameters(ours) == 809_856
    assert reference.lm_head.weight is reference.wte.weight  # tied, counted once


def test_the_nanogpt_style_model_computes_what_tc_gpt_computes_with_its_weights():
    ours = tiny_gpt()
    reference = nanogpt_like(ours, **TINY_GPT)
    ids = torch.randint(20, (3, 8), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(reference(ids), ours(ids), atol=1e-5, rtol=1e-5)
    # The same gradients too, so that a training step is the same work on both sides.
    grads = []
    for model in (ours, reference):
        loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        grads.append(torch.autograd.grad(loss, [model.token_embedding.weight if model is ours else model.wte.weight]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)


def test_use_fused_switches_to_the_kernel_without_changing_the_output():
    ours = tiny_gpt().eval()
    ids = torch.randint(20, (2, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = ours(ids)
        fused = use_fused(ours)
        assert fused is ours
        torch.testing.assert_close(fused(ids), expected, atol=1e-5, rtol=1e-5)
    assert all(layer.attn_weights is None for layer in ours.layers)  # the fused kernel keeps no weights


def test_gpt_vs_nanogpt_section():
    threads = torch.get_num_threads()
    table = benchmark.gpt_vs_nanogpt(**TINY_GPT, batch_size=2, steps=1, repeats=1, warmup=0, threads=1, device="cpu")
    assert torch.get_num_threads() == threads  # the section's one thread is given back
    assert table.columns == ["model", "parameters", "step_ms", "tokens_per_s", "ratio", "max_abs_diff",
                             "same_logits"]  # fmt: skip
    assert table.column("model") == ["nanogpt_style", "tc.GPT", "tc.GPT_fused"]
    assert all(list(row) == table.columns for row in table.rows)
    assert all(table.column("same_logits")) and max(table.column("max_abs_diff")) < 1e-5
    assert len(set(table.column("parameters"))) == 1
    reference = table.rows[0]["tokens_per_s"]
    for row in table.rows:
        assert row["tokens_per_s"] > 0 and math.isclose(row["ratio"], row["tokens_per_s"] / reference)
        assert math.isclose(row["tokens_per_s"], 2 * 8 / (row["step_ms"] / 1e3))
    assert "torch threads during the section: 1." in table.notes
    assert sum(note.startswith("target: ") for note in table.notes) == 2
    assert benchmark.figure(table).axes[0].has_data()
    with pytest.raises(ValueError, match="steps=0"):
        benchmark.gpt_vs_nanogpt(steps=0)


def test_transformer_vs_torch_section_gives_the_same_output_as_nn_transformer():
    table = benchmark.transformer_vs_torch(batch=3, src_len=6, tgt_len=5, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                           repeats=1, warmup=0, device="cpu")  # fmt: skip
    assert table.columns == ["source", "model", "forward_ms", "ratio", "max_abs_diff", "allclose"]
    assert [(row["source"], row["model"]) for row in table.rows] == [
        (source, model) for source in ("full", "padded") for model in ("nn.Transformer", "tc", "tc_fused")
    ]
    assert all(table.column("allclose")) and max(table.column("max_abs_diff")) < 1e-5
    for row in table.rows:
        torch_ms = table.column("forward_ms", source=row["source"], model="nn.Transformer")[0]
        assert row["forward_ms"] > 0 and math.isclose(row["ratio"], row["forward_ms"] / torch_ms)
    assert sum(note.startswith("target: ") for note in table.notes) == 4
    assert benchmark.figure(table).axes[0].has_data()


@pytest.mark.parametrize(
    ("value", "bound", "at_least", "expected"),
    [
        (3.2, 3.0, True, "target: x >= 3: 3.20, met"),
        (2.9, 3.0, True, "target: x >= 3: 2.90, NOT met"),
        (1.01, 1.05, False, "target: x <= 1.05: 1.01, met"),
        (1.2, 1.05, False, "target: x <= 1.05: 1.20, NOT met"),
        (None, 6.0, True, "target: x >= 6: not measured at these sizes"),
    ],
)
def test_target_note(value, bound, at_least, expected):
    assert target_note("x", value, bound, at_least) == expected


def test_the_decoding_section_states_the_caches_targets():
    table = benchmark.decoding((1,), (3,), 4, 12, 16, 2, 1, 32, repeats=1, device="cpu")
    targets = [note for note in table.notes if note.startswith("target: ")]
    assert targets == [
        f"target: speedup at batch 1, {n} new tokens, {kernel} kernel >= {bound}: not measured at these sizes"
        for kernel in ("teaching", "fused")
        for n, bound in ((64, 3), (256, 6))
    ]
    defaults = inspect.signature(benchmark.decoding).parameters  # the full run measures both targets at batch 1
    assert 1 in defaults["batch_sizes"].default and {64, 256} <= set(defaults["new_tokens"].default)


def test_the_sections_run_from_the_command_line(capsys):
    assert {"gpt_vs_nanogpt", "transformer_vs_torch"} <= set(benchmark.SECTIONS)
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--quick", "--only", "transformer_vs_torch", "--threads", "1", "--repeats", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "tc.Encoder + tc.Decoder vs torch.nn.Transformer" in out and "target: tc forward_ms" in out
    assert "padded" in out


# ---------------------------------------------------------------------------------------------- before/after script


def test_the_before_after_script_explains_itself_and_refuses_an_unknown_revision(capsys):
    script = load("bench_before_after")
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--help"])
    assert exit_info.value.code == 0 and "git archive" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        script.main(["no-such-revision-anywhere"])
    assert exit_info.value.code == 2 and "is not a commit of this repository" in capsys.readouterr().err


def test_the_before_after_summary_lines_up_each_row_with_its_ratio():
    script = load("bench_before_after")
    before = {"transformer_vs_torch": [dict(source="full", model="tc", forward_ms=10.0, ratio=2.0)]}
    after = {"transformer_vs_torch": [dict(source="full", model="tc", forward_ms=5.0, ratio=1.0)]}
    lines = script.summary({"before: HEAD": before, "after: the working tree": after}).splitlines()
    assert lines[0] == "before: HEAD; after: the working tree"
    assert lines[2].split() == ["section", "row", "figure", "before", "after", "after/before"]
    assert [line.split()[-4:] for line in lines[4:6]] == [
        ["forward_ms", "10", "5", "0.50"],
        ["ratio", "2", "1", "0.50"],
    ]
