"""The exercise machinery: results, registries, source display, and what `compare` does for every checker: a time
limit, nondeterminism, inputs changed in place, the dtype, the random state. Each registered checker is tested
with its solution and its wrong answers in test_exercise_checkers.py.
"""

import contextlib
import random
import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

from transformer_course.course.exercises import (
    Case,
    Mistake,
    Registry,
    Result,
    _core,
    check,
    compare,
    show_source,
    solutions,
)


def double(x):
    return 2 * x


def test_every_checker_has_a_solution_of_its_name():
    # That each solution passes its checker is tested per checker in test_exercise_checkers.py.
    assert check.names() and check.names() == solutions.names()


def test_result_is_truthy_only_when_passed_and_shows_one_line():
    ok, bad = Result("f", True, "passed all 2 cases"), Result("f", False, "wrong sign", "sign")
    assert bool(ok) and not bool(bad)
    assert repr(ok) == "✅ f: passed all 2 cases"
    assert repr(bad) == "❌ f: wrong sign"


def test_compare_names_the_matching_mistake_and_otherwise_the_first_bad_case():
    cases = [Case("a vector", (torch.tensor([1.0, -2.0]),)), Case("a zero", (torch.tensor([0.0]),))]
    mistakes = [Mistake("negated", lambda x: -2 * x, "the sign is flipped")]
    assert compare("double", double, double, cases, mistakes).passed
    negated = compare("double", lambda x: -2 * x, double, cases, mistakes)
    assert (negated.passed, negated.mistake, negated.message) == (False, "negated", "the sign is flipped")
    # -2x and 2x agree on the zero case; x + 1 matches no mistake: the first differing case is named.
    other = compare("double", lambda x: x + 1, double, cases, mistakes)
    assert other.mistake is None and "a vector" in other.message and "wrong values" in other.message


@pytest.mark.parametrize(
    ("reader", "words"),
    [
        (lambda x: None, "returned None on a vector: is the `return` missing?"),
        (lambda x: x.tolist(), "returned an object of type list on a vector, expected a torch.Tensor"),
        (lambda x: torch.cat([x, x]), "returned shape (4,) on a vector, expected (2,)"),
        (lambda x: x / 0 * 0, "returned NaN or infinite values on a vector"),
        (lambda x: 1 / 0, "raised ZeroDivisionError: division by zero on a vector"),
    ],
)
def test_wrong_answers_get_words_not_tracebacks(reader, words):
    result = compare("double", reader, double, [Case("a vector", (torch.tensor([1.0, -2.0]),))])
    assert not result.passed and result.message == words


def test_a_stub_raises_not_implemented_so_the_notebook_shows_it():
    def stub(x):
        raise NotImplementedError("double: replace this line with your code")

    with pytest.raises(NotImplementedError, match="replace this line"):
        compare("double", stub, double, [Case("a vector", (torch.tensor([1.0]),))])


def test_passing_the_result_of_a_call_instead_of_the_function_is_explained():
    result = compare("double", double(torch.ones(1)), double, [Case("one", (torch.ones(1),))])
    assert not result.passed and "pass the function itself" in result.message


def test_the_readers_function_gets_copies_of_the_inputs_and_changing_them_is_named():
    x = torch.tensor([1.0, 2.0])

    def in_place(t):
        return t.mul_(2)  # the right values, but the caller's tensor is doubled too

    result = compare("double", in_place, double, [Case("a vector", (x,))])
    assert not result.passed and result.mistake == "in_place"
    assert result.message.startswith("your function changes its input `t` in place (on a vector)")
    assert torch.equal(x, torch.tensor([1.0, 2.0]))


def test_registry_reports_unknown_names_and_refuses_duplicates():
    registry = Registry("checker")
    registry.add("double", double)
    assert registry.double is double and registry.names() == ["double"]
    with pytest.raises(AttributeError, match="no checker named 'triple'; available: double"):
        registry.triple  # noqa: B018
    registry.add("double", double)  # a reloaded module registers its own names again
    with pytest.raises(ValueError, match="'double' is already registered by "):
        registry.add("double", torch.abs)


def test_show_source_gives_the_real_source_as_text_and_as_a_python_block():
    shown = show_source(double)
    assert repr(shown) == "def double(x):\n    return 2 * x"
    assert shown._repr_markdown_() == "```python\ndef double(x):\n    return 2 * x\n```"
    with pytest.raises(TypeError, match="obj must be a function, class or method"):
        show_source(42)


# ---- what compare does for every checker

CASES = [Case("a vector", (torch.tensor([1.0, -2.0]),)), Case("a matrix", (torch.tensor([[0.5, 3.0]]),))]
MISTAKES = [Mistake("negated", lambda x: -2 * x, "the sign is flipped")]


def test_an_endless_loop_is_stopped_and_named_even_if_it_catches_exceptions():
    def endless(x):
        while True:
            with contextlib.suppress(Exception):  # the stop is not an Exception: this does not swallow it
                x = x + 1

    result = compare("double", endless, double, CASES, time_limit=0.1)
    assert not result.passed and result.mistake == "time_limit"
    assert result.message.startswith("stopped after 0.1 s on a vector: your function had not finished.")
    assert "background" not in result.message
    assert not [t for t in threading.enumerate() if t.name == _core.WORKER_NAME and t.is_alive()]


def test_a_long_call_into_c_code_is_reported_on_time_and_stopped_when_it_returns(monkeypatch):
    monkeypatch.setattr(_core, "_STOP_GRACE", 0.1)

    def sleeps(x):
        time.sleep(1.0)  # one C call: the stop waits until it returns
        while True:
            pass

    result = compare("double", sleeps, double, CASES, time_limit=0.1)
    assert result.mistake == "time_limit" and "goes on in the background until that call returns" in result.message
    workers = [t for t in threading.enumerate() if t.name == _core.WORKER_NAME]
    for worker in workers:
        worker.join(5.0)  # the sleep ends, the pending stop ends the loop
    assert not any(worker.is_alive() for worker in workers)


def test_noise_is_named_before_the_mistake_it_resembles():
    def noisy_negation(x):
        return -2 * x + 1e-3 * torch.randn_like(x)

    result = compare("double", noisy_negation, double, CASES, MISTAKES)
    assert result.mistake == "nondeterministic" and result.message.startswith(
        "your function gives different results on the same input (a vector): dropout or random noise"
    )


def test_state_kept_between_calls_is_nondeterminism_too():
    calls = []

    def counting(x):
        calls.append(1)
        return 2 * x + len(calls)

    assert compare("double", counting, double, CASES).mistake == "nondeterministic"


def test_results_without_equality_are_not_mistaken_for_nondeterminism():
    module = compare("double", lambda x: nn.Identity(), double, CASES)
    assert module.mistake is None and "returned an object of type Identity on a vector" in module.message
    array = compare("double", lambda x: (2 * x).numpy(), double, CASES)
    assert array.mistake is None and "returned an object of type ndarray on a vector" in array.message


def test_changes_in_place_are_named_for_module_weights_and_lists():
    def scales_the_weight(x, layer):
        with torch.no_grad():
            layer.weight.mul_(2)
        return layer(x)

    layer_case = [Case("a layer", (torch.ones(1, 2), nn.Linear(2, 1)))]
    result = compare("apply", scales_the_weight, lambda x, layer: layer(x), layer_case)
    assert result.mistake == "in_place" and "changes its input `layer.weight` in place (on a layer)" in result.message

    def pops(xs):
        return 2 * xs.pop()

    result = compare("last", pops, lambda xs: 2 * xs[-1], [Case("a list", ([torch.ones(1), torch.zeros(1)],))])
    assert result.mistake == "in_place" and "changes its input `xs` in place" in result.message


def test_the_dtype_is_named_even_when_the_values_are_right():
    result = compare("double", lambda x: (2 * x).double(), double, CASES)
    assert result.mistake == "dtype"
    assert result.message.startswith("returned dtype torch.float64 on a vector, expected torch.float32")
    half = compare("double", lambda x: (2 * x).half(), double, CASES)
    assert half.mistake == "dtype" and "returned dtype torch.float16" in half.message


def test_the_shape_is_named_before_wrong_values_of_an_earlier_case():
    def wrong_everywhere(x):
        return 3 * x if x.dim() == 1 else (2 * x).T

    result = compare("double", wrong_everywhere, double, CASES)
    assert result.message == "returned shape (2, 1) on a matrix, expected (1, 2)"


def test_the_readers_function_runs_in_the_callers_grad_mode():
    modes = []

    def records_grad_mode(x):
        modes.append(torch.is_grad_enabled())
        return 2 * x

    with torch.no_grad():
        assert compare("double", records_grad_mode, double, CASES).passed
    assert compare("double", records_grad_mode, double, CASES).passed
    assert modes == [False] * 4 + [True] * 4


def test_compare_leaves_every_global_random_state_alone():
    def draws_everywhere(x):
        return 2 * x + torch.rand(1) + random.random() + float(np.random.rand())

    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    before = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    assert compare("double", draws_everywhere, double, CASES).mistake == "nondeterministic"
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert np.array_equal(np.random.get_state()[1], before[2])
