"""The nbval extension (tests/nbval_tolerance.py): numbers within a cell's declared tolerance, the rest exact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbval_tolerance import EXACT, Tolerance, explain_difference, split_numbers, tolerance_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("loss 1.377 (gap 0.017)", ["1.377", "0.017"]),
        ("1,266.8 times, -0.91 and −2 and 3e-05", ["1,266.8", "-0.91", "−2", "3e-05"]),
        ("W1 and d_k and x2 are names", []),
        ("speed-up 1.8x, 91.1 %", ["1.8", "91.1"]),
        ("tensor([0.5000, .25])", ["0.5000", ".25"]),
    ],
)
def test_numbers_are_found_and_names_are_not(text, numbers):
    pieces, found = split_numbers(text)
    assert found == numbers
    assert "".join(p + n for p, n in zip(pieces, [*found, ""])) == text  # nothing lost between them


def test_equal_text_matches_whatever_the_tolerance():
    assert explain_difference("loss 1.377", "loss 1.377", EXACT) is None


def test_without_a_tolerance_a_changed_digit_is_reported_with_both_values():
    message = explain_difference("floor + 0.017 nats", "floor + 0.018 nats", EXACT)
    assert "expected 0.017, got 0.018" in message and "exact" in message and "number 1" in message


def test_a_declared_tolerance_accepts_rounding_and_rejects_more():
    tolerance = Tolerance(rel=0.01, abs=0.001)
    assert explain_difference("loss 1.377 at step 800", "loss 1.380 at step 800", tolerance) is None
    message = explain_difference("loss 1.377 at step 800", "loss 1.420 at step 800", tolerance)
    assert "expected 1.377, got 1.420" in message and "rel 0.01" in message and "abs 0.001" in message


def test_words_are_compared_exactly_even_with_a_tolerance():
    message = explain_difference("KaGe likes them 0.91", "KaGe like them 0.91", Tolerance(rel=0.5))
    assert message is not None and "text differs" in message and "likes" in message


def test_a_number_more_or_less_is_a_difference():
    message = explain_difference("a 1 b", "a 1 b 2", Tolerance(rel=1.0))
    assert message is not None


def test_counts_get_their_own_tolerance_and_decimals_keep_theirs():
    tolerance = Tolerance(abs=0.05, counts=1)
    assert explain_difference("17 sentences, log p -2.13", "16 sentences, log p -2.17", tolerance) is None
    message = explain_difference("17 sentences, log p -2.13", "15 sentences, log p -2.13", tolerance)
    assert "expected 17, got 15" in message and "integers ± 1" in message
    message = explain_difference("17 sentences, log p -2.13", "17 sentences, log p -2.23", tolerance)
    assert "expected -2.13, got -2.23" in message


def test_thousands_and_unicode_minus_compare_by_value():
    assert explain_difference("1,266.8", "1,268.7", Tolerance(rel=0.01)) is None
    assert explain_difference("−0.91", "-0.92", Tolerance(abs=0.011)) is None


@pytest.mark.parametrize(
    "declared",
    [{"rel": -1}, {"relative": 0.1}, {}, 0.1, {"abs": float("inf")}, {"counts": -1}],
)
def test_a_malformed_declaration_is_refused(declared):
    with pytest.raises(ValueError, match="nbval-tolerance"):
        tolerance_of({"nbval-tolerance": declared})


def test_no_declaration_means_exact():
    assert tolerance_of({}) == EXACT
    assert tolerance_of({"nbval-tolerance": {"rel": 0.02}}) == Tolerance(rel=0.02)


def _notebook(
    path: Path, committed: str, tolerance: dict | None, source: str = "print(round(1 / 3 + 0.004, 4))"
) -> Path:
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=committed + "\n")]
    if tolerance is not None:
        cell.metadata["nbval-tolerance"] = tolerance
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), cell])
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(
    ("committed", "tolerance", "passes"),
    [
        ("0.3373", None, True),  # what the cell prints: strict nbval passes
        ("0.3333", None, False),  # another digit, no tolerance: fails, naming the number
        ("0.3333", {"abs": 0.005}, True),  # declared: within it
        ("0.3333", {"abs": 0.001}, False),  # declared: outside it
    ],
)
def test_nbval_runs_with_the_extension(tmp_path, committed, tolerance, passes):
    result = _nbval(_notebook(tmp_path / "t.ipynb", committed, tolerance))
    assert (result.returncode == 0) == passes, result.stdout[-3000:]
    if not passes:
        assert "expected 0.3333, got 0.3373" in result.stdout


def test_an_unexpected_output_is_quoted(tmp_path):
    # A message on stderr that the committed cell does not have: the report names the stream and quotes it.
    source = "import sys\nprint(0.3373)\n_ = sys.stderr.write('a rare warning\\n')"
    result = _nbval(_notebook(tmp_path / "t.ipynb", "0.3373", None, source))
    assert result.returncode != 0
    assert "unexpected ['stderr']" in result.stdout and "stderr: 'a rare warning" in result.stdout, result.stdout


def _nbval(path: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "nbval_tolerance", "-q"]
    command += ["-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(path.parent), str(path)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=path.parent, env=env)
