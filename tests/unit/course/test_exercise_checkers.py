"""Every registered checker, tested from the registry (`check.names()`): one module instead of a copy per chapter.

For each checker:

- its reference solution (`solutions.NAME`) passes, and the arguments it is given that could stand in for one
  another are the ones `exercise_cases.INTERCHANGEABLE` lists;
- every wrong answer of its chapter's `WRONG_ANSWERS` table (tests/test_exercises_<module>.py, at least ten per
  checker, written the way a reader would write them) gets its diagnosis: the mistake's key and words;
- an answer that swaps two of its weights or inputs (W_Q and W_K, key and value, gain and bias, self- and
  cross-attention), or reuses one where the other belongs, is refused with a message;
- what every checker promises, whatever the exercise (issue 13, item 6): an answer that returns float64 or
  float16 is told about its dtype; one that writes into its inputs is told so; one with dropout or random noise
  is told that it is not deterministic, before anything else; one that never finishes is stopped at the time
  limit with a message that says so; one that calls exit() gets a diagnosis; and the learner's global random
  state (torch, Python's `random`, NumPy) is the same after the check as before it, for passing and failing
  answers alike. These answers are built from the reference solution by one generic change, so a checker added
  later is covered as soon as it is registered.

A chapter's own tests (its solutions against the package, the right answers its checkers accept) stay in its
tests/test_exercises_<module>.py.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch
from exercise_cases import (
    ARGNAMES,
    confused_answer,
    confused_answer_cases,
    declared_pairs,
    interchangeable_pairs,
    recording,
    wrong_answer_cases,
    wrong_answer_tables,
)
from torch import nn

from transformer_course.course.exercises import _core, check, solutions

NAMES = check.names()
WRONG_ANSWERS = wrong_answer_tables()

# Checkers whose inputs are all Python numbers: there is nothing an answer could modify in place.
# BPE's exercises take tuples of ids, a str and bytes: nothing the generic in-place change can modify.
NO_MUTABLE_INPUT = {"make_mlp", "causal_mask", "sinusoidal_table", "shift_matrix", "linear_warmup",
                    "count_transformer_parameters", "pair_changes", "merges_to_one_token",
                    "complete_length"}  # fmt: skip
# The dtypes an answer may not return, where they differ from (float64, float16): a learning rate is a Python
# float (float64 is its type); the shift matrix is asked for in float64; everything else is a tensor of a fixed
# dtype (float32, bool, int64), a module of float32 parameters or a Python int.
WRONG_DTYPES = {"linear_warmup": (torch.float16,), "shift_matrix": (torch.float32, torch.float16)}


def _to_dtype(value, dtype):
    """The solution's result in the wrong dtype: tensors and modules converted, numbers made floats or tensors."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    if isinstance(value, nn.Module):
        return value.to(dtype)
    if isinstance(value, tuple):
        return tuple(_to_dtype(v, dtype) for v in value)
    if isinstance(value, int) and dtype == torch.float64:
        return float(value)  # a count computed with / instead of //
    return torch.tensor(value, dtype=dtype)


def _noisy(value):
    """The solution's result with a little randomness from torch, Python's random and NumPy."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return value ^ (torch.rand(value.shape) < 0.5)
        if value.is_floating_point():
            return value + 0.01 * torch.randn_like(value)
        return value + torch.randint(0, 2, value.shape)
    if isinstance(value, tuple):
        return tuple(_noisy(v) for v in value)
    if isinstance(value, float):
        return value * (1 + 0.01 * float(np.random.rand()))
    if isinstance(value, int):
        return value + random.randint(1, 9)
    if isinstance(value, nn.Linear):
        # Weights copied with a little noise, from NumPy: the checker seeds torch while the module is built, so
        # that a Linear left with its random initial weights is told "were the weights copied?" instead.
        with torch.no_grad():
            value.weight.add_(torch.from_numpy(0.01 * np.random.randn(*value.weight.shape)).float())
        return value
    raise TypeError(f"no noise for {type(value).__name__}")


def _noisy_answer(name):
    if name == "make_mlp":  # the layer widths themselves drawn at random

        def random_width(n_in, n_hidden, n_out):
            width = n_hidden + random.randint(0, 3)
            return nn.Sequential(nn.Linear(n_in, width), nn.ReLU(), nn.Linear(width, n_out))

        return random_width
    reference = getattr(solutions, name)
    return lambda *args, **kwargs: _noisy(reference(*args, **kwargs))


def _mutate(value) -> bool:
    """Change the first tensor found in `value` in place; True if there was one."""
    if isinstance(value, torch.Tensor):
        with torch.no_grad():
            if value.dtype == torch.bool:
                value.logical_not_()
            else:
                value.add_(1)
        return True
    if isinstance(value, nn.Module):
        return any(_mutate(p) for p in value.parameters())
    if isinstance(value, (list, tuple)):
        return any(_mutate(item) for item in value)
    return False


def _in_place_answer(name, mutated: list | None = None):
    """The solution, followed by a change to its first tensor (or module, or list of tensors) argument."""
    reference = getattr(solutions, name)

    def writes_into_its_input(*args, **kwargs):
        out = reference(*args, **kwargs)
        changed = any(_mutate(arg) for arg in args)
        if mutated is not None:
            mutated.append(changed)
        elif not changed:
            raise AssertionError(f"{name} has no tensor, module or list argument: list it in NO_MUTABLE_INPUT")
        return out

    return writes_into_its_input


def _random_states():
    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def _states_away_from_a_fresh_seed():
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    torch.rand(2), random.random(), np.random.rand()
    return _random_states()


def _assert_same_states(before, after):
    assert torch.equal(before[0], after[0])
    assert before[1] == after[1]
    assert before[2][0] == after[2][0] and np.array_equal(before[2][1], after[2][1]) and before[2][2:] == after[2][2:]


# ---- the reference solution, the chapter's wrong answers, and answers that confuse two arguments


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_solution_passes(name):
    answer, calls = recording(name)
    before = _states_away_from_a_fresh_seed()
    result = getattr(check, name)(answer)
    # The learner's random state is left alone (and by a failing answer: see the test of noisy answers).
    _assert_same_states(before, _random_states())
    assert result.passed and result.mistake is None and repr(result).startswith(f"✅ {name}: passed all"), result
    # The arguments alike in some case are the ones listed: a new checker with weights cannot be left out.
    found = interchangeable_pairs(calls)
    assert calls and found == declared_pairs(name), (
        f"{name}: alike in some case: {sorted(found)}: update INTERCHANGEABLE"
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_checker_has_at_least_ten_wrong_answers(name):
    assert len(WRONG_ANSWERS.get(name, [])) >= 10, f"{name}: add wrong answers to its chapter's WRONG_ANSWERS"


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize(ARGNAMES, wrong_answer_cases(WRONG_ANSWERS))
def test_a_wrong_answer_gets_its_diagnosis(name, reader, mistake, words, monkeypatch):
    if mistake == "time_limit":
        monkeypatch.setattr(_core, "TIME_LIMIT", 1.0)  # the endless loop is stopped sooner than in a notebook
    result = getattr(check, name)(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


@pytest.mark.parametrize(("name", "first", "second", "how"), confused_answer_cases())
def test_an_answer_that_swaps_or_reuses_two_arguments_is_refused(name, first, second, how):
    result = getattr(check, name)(confused_answer(name, first, second, how))
    assert not result.passed and result.message, result


# ---- what every checker promises


@pytest.mark.parametrize(
    ("name", "dtype"),
    [(name, dtype) for name in NAMES for dtype in WRONG_DTYPES.get(name, (torch.float64, torch.float16))],
)
def test_a_wrong_dtype_is_named(name, dtype):
    reference = getattr(solutions, name)
    result = getattr(check, name)(lambda *args, **kwargs: _to_dtype(reference(*args, **kwargs), dtype))
    assert not result.passed and result.mistake in ("dtype", "not_bool"), result
    assert "dtype" in result.message or "float" in result.message, result


@pytest.mark.parametrize("name", sorted(set(NAMES) - NO_MUTABLE_INPUT))
def test_an_answer_that_modifies_its_input_is_named(name):
    result = getattr(check, name)(_in_place_answer(name))
    assert not result.passed and result.mistake == "in_place", result
    assert "in place" in result.message, result


@pytest.mark.parametrize("name", sorted(NO_MUTABLE_INPUT))
def test_the_checkers_listed_without_mutable_input_have_none(name):
    mutated = []
    assert getattr(check, name)(_in_place_answer(name, mutated)).passed
    assert mutated and not any(mutated)


@pytest.mark.parametrize("name", NAMES)
def test_an_answer_with_random_noise_is_named_before_anything_else(name):
    before = _states_away_from_a_fresh_seed()
    result = getattr(check, name)(_noisy_answer(name))
    # The answer drew from every global generator: the check gives the learner's random state back all the same.
    _assert_same_states(before, _random_states())
    assert not result.passed and result.mistake == "nondeterministic", result
    assert "different results on the same input" in result.message, result
    assert "dropout or random noise" in result.message, result


@pytest.mark.parametrize("name", NAMES)
def test_an_answer_that_never_finishes_is_stopped(name, monkeypatch):
    monkeypatch.setattr(_core, "TIME_LIMIT", 0.1)  # short: each of these runs spins a thread until it is stopped

    def never_finishes(*args, **kwargs):
        while True:
            pass

    result = getattr(check, name)(never_finishes)
    assert not result.passed and result.mistake == "time_limit", result
    assert result.message.startswith("stopped after 0.1 s on "), result
    # The loop was really stopped, not left running in the background.
    assert not [t for t in threading.enumerate() if t.name == _core.WORKER_NAME and t.is_alive()]


# ---- answers that leave the usual paths: exit(), a misspelt forward, tensors without values, the checker's own errors


@pytest.mark.parametrize("name", NAMES)
def test_an_answer_that_calls_exit_is_a_diagnosis_not_the_end_of_the_kernel(name):
    def answer(*args, **kwargs):
        raise SystemExit(0)

    result = getattr(check, name)(answer)
    assert not result.passed and "SystemExit" in result.message and "exit()" in result.message, result


class _Doubles(nn.Module):
    def forward(self, x):
        return 2 * x


class _Misspelt(nn.Module):
    def foward(self, x):  # the typo this test is about
        return 2 * x


def _observe_module(cls, case):
    return cls()(*case.args)


def test_a_module_with_a_misspelt_forward_is_named_not_raised():
    cases = [_core.Case("x = ones(3)", (torch.ones(3),))]
    result = _core.compare("doubles", _Misspelt, _Doubles, cases, observe=_observe_module)
    assert not result.passed and "no method named `forward`" in result.message, result


@pytest.mark.parametrize(
    ("answer", "passes", "words"),
    [
        (lambda x: (2 * x).to("meta"), False, "meta device"),
        (lambda x: (2 * x).to_sparse(), True, "passed"),
    ],
    ids=["meta", "sparse"],
)
def test_tensors_without_values_or_in_another_layout_are_compared_not_crashed_on(answer, passes, words):
    cases = [_core.Case("x = arange(6)", (torch.arange(6.0),))]
    result = _core.compare("doubles", answer, lambda x: 2 * x, cases)
    assert result.passed == passes and words in result.message, result


def test_an_error_raised_by_the_checker_reading_the_answer_is_not_called_the_readers_crash():
    # The Linear has the wrong shape: the answer itself runs fine; the checker's run of the module fails.
    result = check.linear_from_conv1d(lambda conv: nn.Linear(3, 3))
    assert not result.passed and "could not use" in result.message and "raised" not in result.message, result


def test_a_wrong_signature_is_still_the_readers_error():
    result = check.layer_norm(lambda x, gamma, beta: x)  # eps missing from the signature
    assert not result.passed and "raised TypeError" in result.message, result
