"""The exercise machinery: results, registries, source display, and every chapter's solutions."""

import pytest
import torch

from transformer_course.exercises import (
    Case,
    Mistake,
    Registry,
    Result,
    check,
    compare,
    show_source,
    solutions,
)


def double(x):
    return 2 * x


def test_every_checker_has_a_solution_that_passes_it():
    assert check.names() and check.names() == solutions.names()
    for name in check.names():
        result = getattr(check, name)(getattr(solutions, name))
        assert isinstance(result, Result) and result.passed, result


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
