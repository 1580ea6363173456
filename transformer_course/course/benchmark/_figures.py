"""One matplotlib figure per section's Table (matplotlib is imported only when a figure is asked for)."""

from __future__ import annotations

from ._core import Table


def figure(table: Table):
    """A matplotlib Figure of one section's Table (matplotlib is imported here only, when asked for)."""
    from matplotlib.figure import Figure

    if table.section not in PLOTS:
        raise ValueError(f"no figure for section {table.section!r}; sections with one: {sorted(PLOTS)}")
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    PLOTS[table.section](fig, table)
    return fig


def _length_axis(ax, lengths: list[int]) -> None:
    """A log2 x axis labelled with the measured lengths only."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("sequence length T")


def _plot_attention(fig, table: Table) -> None:
    variants = (
        ("naive_ms", "naive: matmul, mask, softmax, matmul"),
        ("sdpa_ms", "F.scaled_dot_product_attention, mask"),
        ("sdpa_is_causal_ms", "F.scaled_dot_product_attention, is_causal"),
    )
    for ax, mode in zip(fig.subplots(1, 2), ("forward", "forward+backward")):
        lengths = table.column("length", mode=mode)
        for column, label in variants:
            ax.plot(lengths, table.column(column, mode=mode), marker="o", label=label)
        _length_axis(ax, lengths)
        ax.set(yscale="log", ylabel="ms (median)", title=mode)
    ax.legend(fontsize="small")


def _plot_multihead(fig, table: Table) -> None:
    ax = fig.subplots()
    modes = table.column("mode")
    variants = (("torch_ms", "nn.MultiheadAttention"), ("ours_ms", "tc, fused"), ("ours_weights_ms", "tc, weights"))
    width = 0.8 / len(variants)
    for i, (column, label) in enumerate(variants):
        x = [m + (i - 1) * width for m in range(len(modes))]
        bars = ax.bar(x, table.column(column), width, label=label)
        if column == "ours_ms":
            ax.bar_label(bars, [f"{r:.2f}x" for r in table.column("ratio")], fontsize="small")
    ax.set_xticks(range(len(modes)), modes)
    ax.set(ylabel="ms (median)", title="tc.MultiHeadAttention vs nn.MultiheadAttention (label: time ratio)")
    ax.legend(fontsize="small")


def _plot_decoding(fig, table: Table) -> None:
    ax = fig.subplots()
    _paired_bars(
        ax,
        [f"{r.get('kernel', 'teaching')}, batch {r['batch']}, {r['new_tokens']} tokens" for r in table.rows],
        ("recompute the prefix", table.column("uncached_tok_per_s")),
        ("KV cache", table.column("cached_tok_per_s")),
        [f"{s:.1f}x" for s in table.column("speedup")],
    )
    ax.set(yscale="log", ylabel="tokens per second", title="Greedy decoding (label: speedup of the cache)")


def _plot_memory(fig, table: Table) -> None:
    ax = fig.subplots()
    lengths = table.column("length")
    ax.plot(lengths, table.column("scores_mib"), "k--", label="one score matrix, B·H·T²·4 bytes")
    for column, label in (("naive_mib", "naive (tc.scaled_dot_product_attention)"), ("sdpa_mib", "fused (SDPA)")):
        values = table.column(column)
        if None not in values:
            ax.plot(lengths, values, marker="o", label=label)
    _length_axis(ax, lengths)
    ax.set(yscale="log", ylabel="peak memory, MiB")
    ax.set_title("Attention memory as the length doubles: ×4 for the naive path")
    ax.legend(fontsize="small")


def _plot_copy(fig, table: Table) -> None:
    loss_ax, accuracy_ax = fig.subplots(1, 2)
    for name, curve in table.curves.items():
        loss_ax.plot(range(1, len(curve["loss"]) + 1), curve["loss"], label=name)
        steps, accuracy = zip(*curve["accuracy"])
        accuracy_ax.plot(steps, [100 * a for a in accuracy], marker=".", label=name)
    loss_ax.set(yscale="log", xlabel="step", ylabel="training loss", title="loss")
    accuracy_ax.set(xlabel="step", ylabel="% copied exactly", title="held-out sequences copied exactly")
    accuracy_ax.legend(fontsize="small")


def _plot_compile(fig, table: Table) -> None:
    ax = fig.subplots()
    _paired_bars(
        ax,
        table.column("workload"),
        ("eager", table.column("eager_ms")),
        ("torch.compile", [0.0 if ms is None else ms for ms in table.column("compiled_ms")]),
        ["failed" if s is None else f"{s:.2f}x" for s in table.column("speedup")],
    )
    ax.set(ylabel="ms (median)", title="torch.compile vs eager (label: speedup)")


def _paired_bars(ax, names: list[str], before: tuple, after: tuple, after_labels: list[str]) -> None:
    """Two bars per name, (legend, values) `before` on the left and `after` on the right, the latter labelled."""
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], before[1], 0.4, label=before[0])
    bars = ax.bar([i + 0.2 for i in x], after[1], 0.4, label=after[0])
    ax.bar_label(bars, after_labels, fontsize="small")
    ax.set_xticks(list(x), names)
    ax.legend(fontsize="small")


def _plot_gpt_training(fig, table: Table) -> None:
    from ._language_models import plot_gpt_training

    plot_gpt_training(fig, table)


def _plot_gpt_sampling(fig, table: Table) -> None:
    from ._language_models import plot_gpt_sampling

    plot_gpt_sampling(fig, table)


def _plot_ratios(fig, table: Table) -> None:
    """Each model's ratio to the reference (the first row of its group), with the target the package aims for."""
    ax = fig.subplots()
    labels = [", ".join(str(row[c]) for c in table.columns[: table.columns.index("model") + 1]) for row in table.rows]
    ratios = table.column("ratio")
    bars = ax.barh(labels, ratios)
    ax.bar_label(bars, [f"{r:.2f}x" for r in ratios], fontsize="small")
    bound, at_least = table.curves["target"]
    ax.axvline(1.0, color="k", lw=1)
    ax.axvline(bound, color="gray", ls="--", lw=1, label=f"target: {'>=' if at_least else '<='} {bound:g}")
    ax.invert_yaxis()  # in the table's order
    ax.set(xlabel="ratio to the reference (the table's notes say of what)", title=table.title)
    ax.legend(fontsize="small")


PLOTS = {
    "attention": _plot_attention,
    "multihead": _plot_multihead,
    "decoding": _plot_decoding,
    "memory": _plot_memory,
    "copy": _plot_copy,
    "compile": _plot_compile,
    "gpt_training": _plot_gpt_training,
    "gpt_sampling": _plot_gpt_sampling,
    "gpt_vs_nanogpt": _plot_ratios,
    "transformer_vs_torch": _plot_ratios,
}
