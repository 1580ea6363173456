"""The benchmark's functions run on tiny sizes and return well-formed tables (no timing is asserted)."""

import math
import sys

import pytest
import torch

import transformer_course as tc
from transformer_course.course import benchmark
from transformer_course.course.benchmark._core import use_fused
from transformer_course.course.benchmark._decoding import _forbid_token, functional_greedy, output_layer

ON_LINUX = sys.platform.startswith("linux")


def check_table(table: benchmark.Table, n_rows: int) -> None:
    assert len(table.rows) == n_rows
    for row in table.rows:
        assert list(row) == table.columns
    text = table.format()
    assert text.splitlines()[0] == table.title
    assert all(name in text for name in table.columns)
    assert len(text.splitlines()) == 5 + n_rows + len(table.notes)


def positive(*values) -> bool:
    return all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in values)


# ---------------------------------------------------------------------------------------------- helpers


def test_time_variants_interleaves_and_counts_every_call():
    calls = []
    variants = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = benchmark.time_variants(variants, repeats=4, warmup=2)
    assert calls[:6] == ["a", "a", "b", "b", "c", "c"]  # the warm-up runs
    rounds = [calls[6 + 3 * r : 9 + 3 * r] for r in range(4)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert {name: len(t) for name, t in times.items()} == {"a": 4, "b": 4, "c": 4}
    assert all(s >= 0 for t in times.values() for s in t)


@pytest.mark.parametrize("repeats, warmup", [(0, 1), (3, -1)])
def test_time_variants_rejects_bad_counts(repeats, warmup):
    with pytest.raises(ValueError, match="repeats"):
        benchmark.time_variants({"a": lambda: None}, repeats=repeats, warmup=warmup)


def test_table_formats_none_bools_and_large_numbers():
    table = benchmark.Table("demo", "T", ["name", "value", "ok"], [dict(name="x", value=None, ok=True)], ["a note"])
    table.rows.append(dict(name="y", value=12345.6, ok=False))
    text = table.format()
    assert "-" in text.splitlines()[4] and "yes" in text.splitlines()[4]
    assert "12,346" in text and "NO" in text and text.endswith("  a note")
    assert table.column("value", ok=False) == [12345.6]
    with pytest.raises(ValueError, match="column 'missing'"):
        table.column("missing")


@pytest.mark.skipif(not ON_LINUX, reason="peak RSS is read from /proc, which only Linux has")
def test_peak_memory_sees_a_tensor_that_is_written():
    size = 32 * benchmark.MiB
    grown = benchmark.peak_memory(lambda: torch.ones(size // 4), "cpu")
    idle = benchmark.peak_memory(lambda: None, "cpu")
    assert grown >= 0.9 * size
    assert idle < size / 8


# ---------------------------------------------------------------------------------------------- sections


def test_attention_section():
    table = benchmark.attention(lengths=(8, 16), batch=1, n_heads=2, d_k=4, repeats=1, warmup=0, device="cpu")
    check_table(table, 4)
    assert table.column("mode") == ["forward", "forward+backward"] * 2
    for row in table.rows:
        assert positive(row["naive_ms"], row["sdpa_ms"], row["sdpa_is_causal_ms"])
        assert row["speedup"] == pytest.approx(row["naive_ms"] / row["sdpa_ms"])
    assert all(d < 1e-5 for d in table.column("max_abs_diff", mode="forward"))
    assert table.column("max_abs_diff", mode="forward+backward") == [None, None]


def test_multihead_section():
    table = benchmark.multihead(batch=2, length=8, d_model=16, n_heads=2, repeats=1, warmup=0, device="cpu")
    check_table(table, 2)
    assert table.rows[0]["max_abs_diff"] < 1e-5  # forward: the same output from all three
    for row in table.rows:
        assert positive(row["torch_ms"], row["ours_ms"], row["ours_weights_ms"])
        assert row["ratio"] == pytest.approx(row["ours_ms"] / row["torch_ms"])


def test_decoding_section_generates_identical_tokens_of_the_requested_length():
    table = benchmark.decoding(
        batch_sizes=(1, 3), new_tokens=(3, 5), src_len=4, vocab_size=12, d_model=16, n_heads=2, n_layers=1, d_ff=32,
        repeats=1, device="cpu",
    )  # fmt: skip
    check_table(table, 12)
    sizes = [(1, 3), (1, 5), (3, 3), (3, 5)]
    assert [(r["kernel"], r["batch"], r["new_tokens"]) for r in table.rows] == [
        (kernel, *size) for kernel in ("teaching", "fused", "functional") for size in sizes
    ]
    for row in table.rows:
        assert row["identical"] is True
        assert positive(row["cached_s"], row["uncached_s"])
        assert row["cached_tok_per_s"] == pytest.approx(row["batch"] * row["new_tokens"] / row["cached_s"])


@pytest.mark.parametrize("use_cache", [True, False])
def test_the_functional_floor_decodes_as_the_package_does(use_cache):
    # In float64 the floor's fused kernels and the package's teaching path agree to ~1e-15: the same argmax.
    torch.manual_seed(0)
    model = tc.Transformer(30, 30, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).double().eval()
    src = torch.randint(3, 30, (3, 6), generator=torch.Generator().manual_seed(1))
    handle = _forbid_token(model, 2)  # never the end token: the package stops at it, the floor never does
    try:
        expected = tc.greedy_decode(model, src, 12, 1, 2)
        floor = functional_greedy(model, src, 12, 1, use_cache)
    finally:
        handle.remove()
    assert len(set(floor[:, 1:].flatten().tolist())) > 1  # not one token repeated: the steps' states differ
    assert torch.equal(floor, expected)


def test_the_functional_floor_refuses_a_pre_ln_decoder():
    model = tc.Transformer(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16, norm_first=True)
    with pytest.raises(ValueError, match="post-LN decoders only"):
        functional_greedy(model, torch.tensor([[3, 4]]), 4, 1, True)


def test_forbidding_a_token_makes_decoding_run_to_max_len():
    torch.manual_seed(0)
    model = tc.Transformer(6, 6, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
    src = torch.tensor([[3, 4, 5]])
    handle = _forbid_token(model, 2)
    try:
        out = tc.greedy_decode(model, src, 30, 1, 2)
    finally:
        handle.remove()
    assert out.shape == (1, 30) and not (out == 2).any()
    assert not output_layer(model)._forward_hooks


def test_memory_section_shows_the_quadratic_score_matrix():
    table = benchmark.memory(lengths=(128, 512), batch=1, n_heads=8, d_k=32, repeats=1, device="cpu")
    check_table(table, 2)
    assert table.column("scores_mib") == [0.5, 8.0]  # 1 x 8 heads x T^2 x 4 bytes
    if not ON_LINUX:
        assert table.column("naive_mib") == [None, None]
        return
    big = table.rows[1]
    # The naive path must hold the (T x T) scores of every head; the fused kernel never builds them.
    assert big["naive_mib"] >= big["scores_mib"]
    assert big["sdpa_mib"] < big["scores_mib"] / 4
    assert big["naive_over_sdpa"] == pytest.approx(big["naive_mib"] / big["sdpa_mib"])


# ---------------------------------------------------------------------------------------------- copy task


def test_copy_task_batches_follow_the_annotated_transformer():
    task = benchmark.CopyTask(batch_size=5, n_batches=3, seed=4)
    batches = list(task)
    assert len(batches) == 3
    for batch in batches:
        assert batch.src.shape == (5, 10)
        assert batch.src[:, 0].eq(1).all()
        assert batch.src.min() >= 1 and batch.src.max() <= 10
        assert torch.equal(batch.tgt_in, batch.src[:, :-1]) and torch.equal(batch.tgt_out, batch.src[:, 1:])
    again = list(benchmark.CopyTask(batch_size=5, n_batches=3, seed=4))
    assert all(torch.equal(a.src, b.src) for a, b in zip(batches, again))
    assert not torch.equal(next(iter(task)).src, batches[0].src)  # every pass draws new sequences


def test_copy_accuracy_of_an_untrained_model_is_low():
    torch.manual_seed(0)
    model = tc.Transformer(11, 11, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    held_out = benchmark.CopyTask(seed=1).sequences(20)
    assert benchmark.copy_accuracy(model, held_out) < 0.5


def test_copy_task_stops_at_max_steps_when_unsolved():
    table = benchmark.copy_task(max_steps=3, eval_every=1, n_test=10, device="cpu")
    check_table(table, 1)
    row = table.rows[0]
    assert row["steps"] == 3 and row["solved"] is False and row["accuracy"] < 1.0
    with pytest.raises(ValueError, match="not in"):
        benchmark.copy_task(configs=("huge",))


def test_the_small_model_solves_the_copy_task_exactly():
    table = benchmark.copy_task(device="cpu")
    row = table.rows[0]
    assert row["solved"] is True and row["accuracy"] == 1.0
    assert row["steps"] < 2000


# ---------------------------------------------------------------------------------------------- command line


def test_main_prints_the_environment_and_a_table(capsys):
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--quick", "--only", "memory", "--threads", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "torch threads: 1" in out
    assert "Peak memory of attention" in out and "total:" in out


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], "1", "torch threads: 1 (from OMP_NUM_THREADS)"),  # the reader's limit is honoured, not overridden
        (["--threads", "1"], "2", "torch threads: 1 (from --threads)"),  # the option wins over the variable
    ],
)
def test_main_honours_the_readers_threads(capsys, monkeypatch, argv, env, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--quick", "--only", "memory", *argv]) == 0
    finally:
        torch.set_num_threads(threads)
    assert expected in capsys.readouterr().out


@pytest.mark.parametrize("value", ["zero", "0", "-2"])
def test_a_bad_thread_count_is_a_usage_error(capsys, monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.raises(SystemExit):
        benchmark.main(["--quick", "--only", "memory"])
    assert "OMP_NUM_THREADS" in capsys.readouterr().err


def test_main_rejects_an_unknown_section(capsys):
    with pytest.raises(SystemExit):
        benchmark.main(["--only", "everything"])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("device", "message"),
    [("cuda", "sees no CUDA GPU"), ("gpu", "is not a device PyTorch knows")],
)
def test_main_rejects_a_device_this_machine_lacks_in_one_line(capsys, monkeypatch, device, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without a GPU
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["--quick", "--only", "memory", "--device", device])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_run_rejects_an_unknown_section():
    with pytest.raises(ValueError, match="section 'speed'"):
        list(benchmark.run(["speed"]))


# ---------------------------------------------------------------------------------------------- figures

TINY = {
    "attention": lambda: benchmark.attention((8, 16), 1, 2, 4, repeats=1, warmup=0, device="cpu"),
    "multihead": lambda: benchmark.multihead(2, 8, 16, 2, repeats=1, warmup=0, device="cpu"),
    "decoding": lambda: benchmark.decoding((1,), (3,), 4, 12, 16, 2, 1, 32, repeats=1, device="cpu"),
    "memory": lambda: benchmark.memory((64, 128), repeats=1, device="cpu"),
    "copy": lambda: benchmark.copy_task(max_steps=4, eval_every=2, n_test=5, device="cpu"),
}


@pytest.mark.parametrize("section, n_axes", [("attention", 2), ("multihead", 1), ("decoding", 1), ("memory", 1),
                                             ("copy", 2)])  # fmt: skip
def test_every_section_has_a_figure(section, n_axes, tmp_path):
    table = TINY[section]()
    fig = benchmark.figure(table)
    assert len(fig.axes) == n_axes
    assert all(ax.has_data() for ax in fig.axes)
    fig.savefig(tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 1000


def test_copy_task_keeps_its_curves():
    table = TINY["copy"]()
    curve = table.curves["small"]
    assert len(curve["loss"]) == 4
    assert [step for step, _ in curve["accuracy"]] == [2, 4]


def test_figure_refuses_a_table_of_an_unknown_section():
    with pytest.raises(ValueError, match="no figure for section 'demo'"):
        benchmark.figure(benchmark.Table("demo", "T", ["x"]))


def test_main_saves_figures(tmp_path, capsys):
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--quick", "--only", "memory", "--figures", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert (tmp_path / "memory.png").exists()
    assert f"figure: {tmp_path / 'memory.png'}" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- fast paths


@pytest.mark.parametrize("need_weights", [True, False])
def test_self_attention_with_stacked_projections_equals_three_projections(need_weights):
    # m(x, x, x) takes the one-matrix-product path for Q, K and V; distinct tensors take three products.
    torch.manual_seed(0)
    m = tc.MultiHeadAttention(16, 4)
    if not need_weights:
        use_fused(m)
    x = torch.randn(2, 5, 16, requires_grad=True)
    x_copy = x.detach().clone().requires_grad_()
    stacked = m(x, x, x)
    grads_stacked = torch.autograd.grad(stacked.sum(), [x, *m.parameters()])
    separate = m(x_copy, x_copy.clone(), x_copy.clone())
    grads_separate = torch.autograd.grad(separate.sum(), [x_copy, *m.parameters()])
    torch.testing.assert_close(stacked, separate, atol=1e-6, rtol=0)
    for a, b in zip(grads_stacked, grads_separate):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------- torch.compile
# Compiling for real takes minutes on a CPU, so these tests stand a fake in for torch.compile;
# `python -m transformer_course.course.benchmark --only compile` measures the real one.


def test_compile_section_measures_both_workloads(monkeypatch):
    compiled_fns = []

    def fake_compile(fn, **kwargs):
        compiled_fns.append(fn)
        return fn  # "compiles" to itself: the same numbers, so the gap is exactly 0

    monkeypatch.setattr(torch, "compile", fake_compile)
    table = benchmark.compiled(length=8, batch=1, n_heads=2, d_k=4, repeats=1, warmup=0, device="cpu")
    check_table(table, 2)
    assert table.column("workload") == ["attention", "training step"]
    assert len(compiled_fns) == 2 and isinstance(compiled_fns[1], tc.Transformer)
    for row in table.rows:
        assert row["error"] is None and row["max_abs_diff"] == 0.0
        assert positive(row["compile_s"], row["eager_ms"], row["compiled_ms"])
        assert row["speedup"] == pytest.approx(row["eager_ms"] / row["compiled_ms"])


def test_compile_section_reports_a_failed_compilation_instead_of_raising(monkeypatch):
    def failing_compile(fn, **kwargs):
        def call(*args, **kwargs):
            raise RuntimeError("Compiler: cc is not found\nmore details")

        return call

    monkeypatch.setattr(torch, "compile", failing_compile)
    table = benchmark.compiled(length=8, batch=1, n_heads=2, d_k=4, repeats=1, warmup=0, device="cpu")
    check_table(table, 2)
    for row in table.rows:
        assert row["error"] == "RuntimeError: Compiler: cc is not found"
        assert row["compile_s"] is row["compiled_ms"] is row["speedup"] is None
        assert positive(row["eager_ms"])
    fig = benchmark.figure(table)
    assert [t.get_text() for t in fig.axes[0].texts] == ["failed", "failed"]


def test_compile_is_optional_on_the_command_line(monkeypatch, capsys):
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)
    assert "compile" not in benchmark.SECTIONS
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--quick", "--only", "compile", "--repeats", "1", "--threads", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert "torch.compile vs eager PyTorch" in capsys.readouterr().out
