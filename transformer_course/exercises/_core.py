"""The machinery behind every checker: run the reader's function, compare, name the mistake.

A chapter's checker is a few lines: build a list of `Case`s (random and edge inputs, from a seeded
generator), give the reference (the package's implementation) and the known wrong variants
(`Mistake`s), and call `compare`. It runs the reader's function and the reference on every case;
when they disagree, it runs each wrong variant too, and the first variant that behaves exactly like
the reader's function on every case names the mistake. The reader gets a `Result`, never a
traceback: a crash, a missing `return` or a wrong shape is reported in words. The one exception is
NotImplementedError, raised by an unfilled stub, which propagates so the stub's cell shows it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..notebook import show_source as show_source  # re-exported for the exercise notebooks


@dataclass(frozen=True)
class Case:
    """One input to try: `label` says in words what it is (it appears in the diagnosis)."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant of the exercise and the diagnosis shown when the reader's function behaves like it."""

    key: str  # short id, e.g. "no_activation": tests and notebooks can test for it
    variant: Callable
    message: str


@dataclass(frozen=True)
class Crash:
    """What an observation holds when the function raised: compared by exception type."""

    error: Exception

    def __str__(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@dataclass(frozen=True)
class Result:
    """What a checker returns. True when passed; shows as ✅ passed ... or ❌ the diagnosis."""

    name: str
    passed: bool
    message: str
    mistake: str | None = None  # the key of the recognised Mistake, if any

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        # Wrapped, so a long diagnosis reads without scrolling in a notebook or on a book page.
        line = f"{'✅' if self.passed else '❌'} {self.name}: {self.message}"
        return textwrap.fill(line, width=80, subsequent_indent="   ", break_on_hyphens=False)


class Registry:
    """A namespace filled by decorators: `check.mlp_forward`, `solutions.mlp_forward`, ..."""

    def __init__(self, kind: str):
        self._kind = kind
        self._items: dict[str, Callable] = {}

    def add(self, name: str, fn: Callable) -> Callable:
        # Re-importing a module (importlib.reload while writing a checker) replaces its own entries.
        old = self._items.get(name)
        if old is not None and old.__module__ != fn.__module__:
            raise ValueError(f"a {self._kind} named {name!r} is already registered by {old.__module__}")
        self._items[name] = fn
        return fn

    def names(self) -> list[str]:
        return sorted(self._items)

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._items[name]
        except KeyError:
            raise AttributeError(f"no {self._kind} named {name!r}; available: {', '.join(self.names())}") from None

    def __dir__(self) -> list[str]:
        return self.names()

    def __repr__(self) -> str:
        return f"<{self._kind}s: {', '.join(self.names())}>"


check = Registry("checker")
solutions = Registry("solution")


def checker(fn: Callable) -> Callable:
    """Register `check_NAME(fn) -> Result` as `check.NAME`."""
    return check.add(fn.__name__.removeprefix("check_"), fn)


def solution(fn: Callable) -> Callable:
    """Register a reference solution as `solutions.NAME`: the code the book shows and the tests check."""
    return solutions.add(fn.__name__, fn)


def observe_call(fn: Callable, case: Case) -> Any:
    """The default observation: what fn returns on fresh copies of the case's arguments."""
    return fn(*_clone(case.args), **_clone(case.kwargs))


def compare(
    name: str,
    fn: Any,
    reference: Callable,
    cases: Sequence[Case],
    mistakes: Sequence[Mistake] = (),
    observe: Callable[[Callable, Case], Any] = observe_call,
    explain: Callable[[Any, Any, str], str] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    passed: str | None = None,
) -> Result:
    """Check the reader's `fn` against `reference` on every case and diagnose a difference.

    observe(f, case) turns a function and a case into something comparable (by default the
    return value; a checker of a module builder can return a summary such as shapes and counts),
    and explain(got, expected, case_label) words a difference no known mistake accounts for.
    Tensors compare with allclose(atol, rtol, NaN equal to NaN) after a shape check; tuples and lists item by item;
    crashes by exception type. `passed` replaces the default success message.
    """
    if not callable(fn):
        return Result(name, False, f"expected a function, got {type(fn).__name__}: pass the function itself, no ()")
    expected = [observe(reference, case) for case in cases]
    got = [_observe_reader(observe, fn, case) for case in cases]
    first_bad = next((i for i, (g, e) in enumerate(zip(got, expected)) if not _same(g, e, atol, rtol)), None)
    if first_bad is None:
        return Result(name, True, passed or f"passed all {len(cases)} cases ({', '.join(c.label for c in cases)})")
    for mistake in mistakes:
        wrong = [_observe_reader(observe, mistake.variant, case) for case in cases]
        if all(_same(g, w, atol, rtol) for g, w in zip(got, wrong)):
            return Result(name, False, mistake.message, mistake.key)
    explain = explain or describe_difference
    return Result(name, False, explain(got[first_bad], expected[first_bad], cases[first_bad].label))


def describe_difference(got: Any, expected: Any, label: str) -> str:
    """One sentence on how `got` differs from `expected` on the case called `label`."""
    if isinstance(got, Crash):
        return f"raised {got} on {label}"
    if got is None and expected is not None:
        return f"returned None on {label}: is the `return` missing?"
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"returned an object of type {type(got).__name__} on {label}, expected a torch.Tensor"
        if got.shape != expected.shape:
            return f"returned shape {tuple(got.shape)} on {label}, expected {tuple(expected.shape)}"
        if not torch.isfinite(got).all():
            return f"returned NaN or infinite values on {label}"
        gap = (got.double() - expected.double()).abs().max().item()
        return f"returned the right shape but wrong values on {label} (largest difference {gap:.3g})"
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"returned {_brief(got)} on {label}, expected {len(expected)} values"
        for i, (g, e) in enumerate(zip(got, expected)):
            if not _same(g, e, 1e-5, 1e-4):
                return f"value {i}: " + describe_difference(g, e, label)
    return f"returned {_brief(got)} on {label}, expected {_brief(expected)}"


def _observe_reader(observe: Callable, fn: Callable, case: Case) -> Any:
    try:
        return observe(fn, case)
    except NotImplementedError:
        raise  # an unfilled stub: let the notebook show its message
    except Exception as error:  # any other crash of the reader's code is a diagnosis, not a traceback
        return Crash(error)


def _same(a: Any, b: Any, atol: float, rtol: float) -> bool:
    if isinstance(a, Crash) or isinstance(b, Crash):
        return isinstance(a, Crash) and isinstance(b, Crash) and type(a.error) is type(b.error)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return False
        if a.dtype == torch.bool or b.dtype == torch.bool:
            return a.dtype == b.dtype and bool(torch.equal(a, b))
        # equal_nan: a reader's NaN (a fully masked row) must match the wrong variant that produces it.
        a, b = a.detach().double().cpu(), b.detach().double().cpu()
        return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, atol, rtol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
        )
    return type(a) is type(b) and a == b


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(item) for item in x)
    if isinstance(x, dict):
        return {key: _clone(value) for key, value in x.items()}
    return x


def _brief(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
