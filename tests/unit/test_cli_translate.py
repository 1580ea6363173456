"""`python -m transformer_course.translate`: train, translate, and a one-line error for every bad input.

Every command runs in a subprocess, the way a reader runs it, in a temporary working directory (so
the default checkpoint path, checkpoints/zh_en.pt, is exercised without touching the repository).
"""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import transformer_course as tc
from transformer_course import datasets, translate
from transformer_course.cli import translate as cli


def run(cwd, *args, timeout=120):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "transformer_course.translate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def assert_one_line_error(proc, *fragments, code=None):
    assert proc.returncode != 0 if code is None else proc.returncode == code, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert proc.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory where `train` has run once with a small step budget (it stops early at 100 % validation)."""
    path = tmp_path_factory.mktemp("cli")
    proc = run(path, "train", "--steps", "300", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return path, proc


def test_train_shows_progress_saves_and_reports(workdir):
    path, proc = workdir
    assert (path / "checkpoints" / "zh_en.pt").is_file()
    assert "training" in proc.stderr and "it/s" in proc.stderr  # the tqdm bar
    assert "Traceback" not in proc.stderr
    match = re.search(r"exact match ([\d.]+) %, BLEU ([\d.]+)", proc.stdout)
    assert match, proc.stdout
    assert float(match[1]) >= 95.0  # the held-out test set: triples never seen in training
    assert float(match[2]) >= 90.0


def test_checkpoint_records_the_held_out_score(workdir):
    path, _ = workdir
    ckpt = translate.checkpoint.load_checkpoint(path / "checkpoints" / "zh_en.pt")
    assert ckpt.extra["seed"] == 0
    assert ckpt.extra["test_exact_match"] >= 0.95
    # the checkpoint's model reproduces that score in this process
    test_pairs = datasets.make_dataset(0).test_pairs
    assert translate.evaluate(ckpt.model, ckpt, test_pairs).exact_match == pytest.approx(ckpt.extra["test_exact_match"])


@pytest.mark.parametrize(
    "args",
    [
        ["咖哥 不 喜欢 他们"],
        ["咖哥", "不", "喜欢", "他们"],  # unquoted words
        ["咖哥不喜欢他们"],  # no spaces: segmented by longest match
        ["咖哥 不 喜欢 他们", "--beam", "3"],
    ],
    ids=["quoted", "words", "unsegmented", "beam"],
)
def test_translate(workdir, args):
    path, _ = workdir
    proc = run(path, *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "KaGe does not like them\n"
    assert proc.stderr == ""


def test_translate_a_held_out_sentence_with_every_phenomenon(workdir):
    # A sentence of the test split: its (subject, verb, object) never occurred in training.
    path, _ = workdir
    dataset = datasets.make_dataset(0)
    example = next(e for e in dataset.test if e.form == "very_question" and e.subject in ("他", "她"))
    proc = run(path, example.src)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == example.tgt


def test_words_lists_the_vocabulary(workdir):
    path, _ = workdir
    proc = run(path, "--words")
    assert proc.returncode == 0
    assert {"咖哥", "小冰", "喜欢", "不", "非常", "吗", "自己"} <= set(proc.stdout.split())


def test_help_documents_both_commands(tmp_path):
    proc = run(tmp_path, "--help")
    assert proc.returncode == 0
    assert "train" in proc.stdout and "SENTENCE" in proc.stdout and "--checkpoint" in proc.stdout
    proc = run(tmp_path, "train", "--help")
    assert proc.returncode == 0
    for option in ("--steps", "--checkpoint", "--dropout", "--batch-size", "--accumulate", "--precision", "torchrun"):
        assert option in proc.stdout, option


def test_unknown_words_are_named(workdir):
    path, _ = workdir
    proc = run(path, "咖哥 喜欢 猫 和 狗")
    assert_one_line_error(proc, "'猫'", "'和'", "'狗'", "known words include", "咖哥")


@pytest.mark.parametrize("word", ["<pad>", "<sos>", "<eos>"])
def test_special_tokens_are_not_words(workdir, word):
    path, _ = workdir
    assert_one_line_error(run(path, word), f"'{word}'", "known words include")
    assert_one_line_error(run(path, f"咖哥 {word} 喜欢 他们"), f"'{word}'")


@pytest.mark.parametrize("args", [["   "], []], ids=["blank", "none"])
def test_empty_input(workdir, args):
    path, _ = workdir
    assert_one_line_error(run(path, *args), "empty", code=2)


def test_missing_checkpoint_says_train_first(tmp_path):
    proc = run(tmp_path, "咖哥 喜欢 小冰")
    assert_one_line_error(proc, "no checkpoint", "train")
    proc = run(tmp_path, "咖哥 喜欢 小冰", "--checkpoint", str(tmp_path / "nowhere.pt"))
    assert_one_line_error(proc, "nowhere.pt", "train")


def test_a_folder_as_checkpoint_is_named_a_folder(tmp_path):
    proc = run(tmp_path, "咖哥 喜欢 小冰", "--checkpoint", str(tmp_path))
    assert_one_line_error(proc, "is a folder", "zh_en.pt")
    assert "train" not in proc.stderr  # training again would not help: the path is wrong


@pytest.mark.parametrize("seed", ["-1", str(2**70), "abc"])
def test_demo_refuses_a_bad_seed_in_one_line(tmp_path, seed):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "transformer_course.demo", "--seed", seed]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(proc, "argument --seed:", seed, code=2)


@pytest.mark.parametrize("world_size", ["2", "abc"])
def test_a_stale_world_size_without_torchrun_is_one_line(tmp_path, world_size):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": world_size}
    env.pop("LOCAL_RANK", None)
    command = [sys.executable, "-m", "transformer_course.translate", "train", "--steps", "1", "--quiet"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(proc, "cannot join the other processes", "WORLD_SIZE", code=1)
    assert not (tmp_path / "checkpoints").exists()


def test_console_scripts_name_the_command_line_programs():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    scripts = pyproject["project"]["scripts"]
    assert set(scripts) == {"transformer-course-translate", "transformer-course-demo", "transformer-course-distributed"}
    for target in scripts.values():
        module, function = target.split(":")
        assert module.startswith("transformer_course.cli.")
        assert callable(getattr(importlib.import_module(module), function))
    assert scripts["transformer-course-translate"] == "transformer_course.cli.translate:main"


def test_the_library_module_keeps_no_command_line():
    assert not hasattr(translate, "main") and not hasattr(translate, "CLIError")
    proc = run(Path(__file__).parent, "--help")  # `python -m transformer_course.translate` reaches the CLI
    assert proc.returncode == 0 and proc.stdout.startswith("usage:") and proc.stderr == ""


def test_corrupt_checkpoints(workdir, tmp_path):
    path, _ = workdir
    good = (path / "checkpoints" / "zh_en.pt").read_bytes()
    truncated, garbage, foreign = tmp_path / "truncated.pt", tmp_path / "garbage.pt", tmp_path / "foreign.pt"
    truncated.write_bytes(good[: len(good) // 2])
    garbage.write_bytes(b"this is not a checkpoint\n" * 10)
    torch.save({"weights": torch.zeros(3)}, foreign)
    empty = tmp_path / "empty.pt"
    empty.touch()
    for bad in (truncated, garbage, foreign, empty):
        assert_one_line_error(run(path, "咖哥 喜欢 小冰", "--checkpoint", str(bad)), bad.name, "checkpoint")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--bogus", "咖哥"], "unrecognized arguments"),
        (["咖哥 喜欢 小冰", "--beam", "0"], "--beam"),
        (["train", "--steps", "0"], "--steps"),
        (["train", "--dropout", "1.5"], "--dropout=1.5 must be in [0, 1)"),
        (["train", "--accumulate", "0"], "--accumulate=0 must be a positive integer"),
        (["train", "--batch-size", "-4"], "--batch-size=-4 must be a positive integer"),
        (["train", "--precision", "fp8"], "--precision: invalid choice: 'fp8'"),
        (["train", "--seed", "-1"], "argument --seed: -1 is outside [0, 2**64 - 1]"),
        (["train", "--seed", str(2**70)], f"argument --seed: {2**70} is outside"),
        (["train", "--seed", "abc"], "argument --seed: 'abc' is not an integer"),
    ],
)
def test_bad_options(workdir, args, fragment):
    path, _ = workdir
    assert_one_line_error(run(path, *args), fragment, code=2)


@pytest.mark.parametrize("where", ["file/zh_en.pt", "file/deeper/zh_en.pt", "."])
def test_train_refuses_a_checkpoint_path_it_could_not_write_before_training(tmp_path, monkeypatch, capsys, where):
    (tmp_path / "file").write_text("a file, not a folder")
    monkeypatch.setattr(translate, "train_translator", lambda **kwargs: pytest.fail("training started"))
    assert cli.main(["train", "--checkpoint", str(tmp_path / where)]) == 2
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    expected = "is a folder: give a file name" if where == "." else f"{tmp_path / 'file'} is a file, not a folder"
    assert expected in message


def test_too_long_input(workdir):
    path, _ = workdir
    assert_one_line_error(run(path, " ".join(["他"] * 80)), "at most")


def test_train_translator_behind_the_train_command():
    # The function `train` calls, in process, with a tiny budget: the history the chapter plots.
    result = translate.train_translator(seed=0, steps=20, eval_every=10, progress=False)
    history, config = result.history, result.config
    assert history.steps == len(history.losses) == len(history.lrs) == 20
    assert [step for step, _ in history.evals] == [10, 20]
    assert all(0.0 <= score <= 1.0 for _, score in history.evals)
    assert history.lrs == pytest.approx([tc.noam_lr(i, config.d_model, config.warmup) for i in range(1, 21)])
    assert history.losses[-1] < history.losses[0]
    attention = [m for m in result.model.modules() if isinstance(m, tc.MultiHeadAttention)]
    assert all(m.attention is tc.scaled_dot_product_attention for m in attention)
    assert len(result.corpus) == len(result.dataset.train)
    with pytest.raises(ValueError, match="eval_split"):
        translate.train_translator(eval_split="train", steps=1, progress=False)
    with pytest.raises(TypeError, match="d_modle"):
        translate.train_translator(d_modle=32, steps=1, progress=False)
