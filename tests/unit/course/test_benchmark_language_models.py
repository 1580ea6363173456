"""The GPT benchmark sections run on tiny sizes and return well-formed tables (no timing is asserted)."""

import math

from transformer_course.course import benchmark
from transformer_course.grammar import Language


def test_gpt_training_section_reports_the_distance_to_the_floor():
    table = benchmark.gpt_training(steps=20, eval_every=10, seeds=2, device="cpu")
    assert len(table.rows) == 2 and all(list(row) == table.columns for row in table.rows)
    floor = Language.english().floor
    for row in table.rows:
        assert row["steps"] == 20 and row["parameters"] == 104_640
        assert row["whole_language_loss"] > floor and math.isclose(row["gap"], row["whole_language_loss"] - floor)
        assert row["tokens_per_s"] > 0 and row["train_s"] > 0
        assert row["s_to_within_0.05"] is None  # 20 steps are far from enough
    curve = table.curves[0]
    assert curve["steps"] == [10, 20] and len(curve["loss"]) == 2 and curve["floor"] == floor
    assert curve["seconds"][0] < curve["seconds"][1]
    assert table.format().splitlines()[0] == table.title
    assert benchmark.figure(table) is not None


def test_gpt_sampling_section_gives_identical_tokens_with_and_without_the_cache():
    table = benchmark.gpt_sampling(batch_sizes=(1, 2), new_tokens=(4, 8), d_model=16, n_heads=2, n_layers=1,
                                   d_ff=32, vocab_size=50, repeats=1, device="cpu")  # fmt: skip
    assert len(table.rows) == 4 and all(table.column("identical"))
    for row in table.rows:
        assert math.isclose(row["speedup"], row["uncached_s"] / row["cached_s"])
        assert math.isclose(row["cached_tok_per_s"], row["batch"] * row["new_tokens"] / row["cached_s"])
    assert benchmark.figure(table) is not None


def test_the_sections_are_registered():
    assert {"gpt_training", "gpt_sampling"} <= set(benchmark.SECTIONS)
    assert {"gpt_training", "gpt_sampling"} <= set(benchmark.QUICK)
