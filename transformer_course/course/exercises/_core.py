"""The machinery behind every checker: run the reader's function, compare, name the mistake.

A chapter's checker is a few lines: build a list of `Case`s (random and edge inputs, from a seeded
generator), give the reference (the package's implementation) and the known wrong variants
(`Mistake`s), and call `compare`. It runs the reader's function and the reference on every case;
when they disagree, it runs each wrong variant too, and the first variant that behaves exactly like
the reader's function on every case names the mistake. The reader gets a `Result`, never a
traceback: a crash (exit() included), a missing `return` or a wrong shape is reported in words, and an error
raised by the checker's own code while reading what the function returned is reported as such, not as the
reader's crash. The one exception is NotImplementedError, raised by an unfilled stub, which propagates so the
stub's cell shows it (torch's NotImplementedError for a module whose `forward` is misspelt is a diagnosis).

What `compare` checks for every exercise, in this order, before the values (the `Result.mistake` key in
brackets):

1. the reader's function finishes each case within `TIME_LIMIT` seconds ("time_limit");
2. it returns the same thing when called twice on the same case, under two different random seeds: dropout or
   noise in an answer is named as such, not as whatever wrong values it happens to produce ("nondeterministic");
3. it leaves its inputs as they were: tensors, the weights of modules, lists ("in_place");

then the values against the reference and the known mistakes, and last the dtype ("dtype"). Every call gets
fresh copies of the case's inputs. The `checker` decorator saves the learner's global random state (torch's CPU
generator, CUDA's and MPS's when in use, Python's `random`, NumPy's global state) and restores it afterwards.

The time limit. The reader's function runs in a worker thread while the notebook's thread waits. When the limit
passes, an exception is raised inside the worker (`PyThreadState_SetAsyncExc`, CPython's way to interrupt another
thread), which stops any Python loop at its next bytecode; the notebook's thread reports "stopped after ...".
It uses no signals, so it does not depend on the operating system or on being called from the main thread, and it
leaves the process's signal handlers alone (Windows has no SIGALRM, Python runs signal handlers in the main thread
only, and pytest-timeout uses SIGALRM itself). It works in a script, under pytest
(tests/unit/course/test_exercises.py) and in a Jupyter kernel, which stays alive (tried by hand on ipykernel 7).
Its limit: a single long call into C code (one huge matmul, `time.sleep`) cannot be interrupted before it returns;
the check still returns on time and says that the function is still running in the background, and the exception
stops it as soon as it is back in Python code. The reader's prints appear twice per case (two
runs).
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import inspect
import math
import numbers
import os
import random
import sysconfig
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..notebook import show_source as show_source  # re-exported for the exercise notebooks

TIME_LIMIT = 10.0  # seconds one call of the reader's function may take (a correct answer needs milliseconds)
WORKER_NAME = "transformer_course checker"  # the name of the thread that runs the reader's function
_STOP_GRACE = 2.0  # seconds to wait for a stopped function to leave its loop
_SEEDS = (0, 1)  # the two runs of the reader's function: different seeds, so dropout and noise show


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
    """What an observation holds when the function raised: compared by exception type.

    in_checker: the error was raised by the checker's own code, reading what the reader's function returned
    (a tuple where a tensor was expected, say), not by the reader's code.
    """

    error: BaseException
    in_checker: bool = False

    def __str__(self) -> str:
        if isinstance(self.error, NotImplementedError) and _is_missing_forward(self.error):
            return f"{type(self.error).__name__} (your module has no method named `forward`: is it misspelt?)"
        if isinstance(self.error, SystemExit):
            return f"SystemExit (your function called exit() or sys.exit({self.error.code!r}): return a value instead)"
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
    """Register `check_NAME(fn) -> Result` as `check.NAME`; it leaves the global random state as it found it."""

    @functools.wraps(fn)
    def run_check(reader: Any) -> Result:
        # Building the cases may seed torch (modules with known weights); the reader's code may draw numbers.
        with preserved_random_state():
            return fn(reader)

    return check.add(fn.__name__.removeprefix("check_"), run_check)


def solution(fn: Callable) -> Callable:
    """Register a reference solution as `solutions.NAME`: the code the book shows and the tests check."""
    return solutions.add(fn.__name__, fn)


@contextlib.contextmanager
def preserved_random_state() -> Iterator[None]:
    """Restore on exit every global random state a check may draw from: torch (CPU, CUDA, MPS), random, NumPy.

    CUDA's generators are saved only once CUDA is initialised, so that a check never starts CUDA by itself.
    """
    python_state, numpy_state, cpu_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    mps_state = torch.mps.get_rng_state() if torch.backends.mps.is_available() else None
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        if mps_state is not None:
            torch.mps.set_rng_state(mps_state)


class RefusedCall(Exception):
    """Raised when the reader's code calls a package function that the exercise asks them to write."""


@contextlib.contextmanager
def refused(functions: Sequence[tuple[object, str, str]]) -> Iterator[None]:
    """While the reader's code runs, each (owner, attribute, shown name) raises RefusedCall when called.

    A checker's own references hold the original functions (imported by name), so they are unaffected.
    """
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute, _ in functions]

    def refuse(shown: str) -> Callable:
        def refusing(*args, **kwargs):
            raise RefusedCall(f"{shown} is what this exercise asks you to write")

        return refusing

    for owner, attribute, shown in functions:
        setattr(owner, attribute, refuse(shown))
    try:
        yield
    finally:
        for owner, attribute, original in saved:
            setattr(owner, attribute, original)


def calls_refused(*args, **kwargs):
    """The known mistake "package_called": an answer that calls a refused function (see `refused`)."""
    raise RefusedCall("a refused function was called")


def observe_call(fn: Callable, case: Case) -> Any:
    """The default observation: what fn returns on the case's arguments (compare passes fresh copies)."""
    return fn(*case.args, **case.kwargs)


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
    time_limit: float | None = None,
) -> Result:
    """Check the reader's `fn` against `reference` on every case and diagnose a difference.

    observe(f, case) turns a function and a case into something comparable (by default the
    return value; a checker of a module builder can return a summary such as shapes and counts),
    and explain(got, expected, case_label) words a difference no known mistake accounts for
    (describe_difference by default; a wrong dtype is named by compare itself). Every call of observe gets
    fresh copies of the case's arguments; an observe that builds modules with the reader's function seeds
    torch while it builds them, so that random initial weights are the same on both runs. Tensors compare
    with allclose(atol, rtol, NaN equal to NaN) after a shape check; tuples and lists item by item; crashes
    by exception type. `passed` replaces the default success message; time_limit (seconds per call)
    replaces TIME_LIMIT.
    """
    if not callable(fn):
        return Result(name, False, f"expected a function, got {type(fn).__name__}: pass the function itself, no ()")
    limit = TIME_LIMIT if time_limit is None else time_limit
    with preserved_random_state():
        got, problem = _observe_reader_twice(observe, fn, cases, limit, atol, rtol)
        if problem is not None:
            return Result(name, False, *problem)
        expected = [observe(reference, _fresh(case)) for case in cases]
        first_bad = next((i for i, (g, e) in enumerate(zip(got, expected)) if not _same(g, e, atol, rtol)), None)
        if first_bad is None:
            first_bad = next((i for i, (g, e) in enumerate(zip(got, expected)) if _dtype_difference(g, e)), None)
            if first_bad is None:
                return Result(name, True, passed or f"passed all {len(cases)} cases ({_labels(cases)})")
        else:
            for mistake in mistakes:
                # Lazily, case by case: most variants differ from the reader's function on the first case.
                wrong = (_observe_variant(observe, mistake.variant, case) for case in cases)
                if all(_same(g, w, atol, rtol) for g, w in zip(got, wrong)):
                    return Result(name, False, mistake.message, mistake.key)
    # Shape first: a case where the result has the wrong type or shape (or none) says more than wrong values.
    first_bad = next((i for i, (g, e) in enumerate(zip(got, expected)) if _structure_differs(g, e)), first_bad)
    label = cases[first_bad].label
    if isinstance(got[first_bad], Crash) and got[first_bad].in_checker:  # not the reader's crash: say so
        return Result(name, False, describe_difference(got[first_bad], expected[first_bad], label))
    # The dtype is named here, not by `explain`: a custom explain need not know about dtypes.
    difference = _dtype_difference(got[first_bad], expected[first_bad])
    if difference is not None:
        got_type, expected_type, where = difference
        where = where if observe is observe_call else ""  # "value i" of a summary would mean nothing to the reader
        return Result(name, False, _dtype_message(got_type, expected_type, where, label), "dtype")
    return Result(name, False, (explain or describe_difference)(got[first_bad], expected[first_bad], label))


def describe_difference(got: Any, expected: Any, label: str) -> str:
    """One sentence on how `got` differs from `expected` on the case called `label`: type, shape, dtype, values."""
    if isinstance(got, Crash) and got.in_checker:
        return (
            f"returned something the checker could not use on {label} ({got}): does your function return what "
            "the exercise asks for (a tensor, a tuple, a module), of the right type and shape?"
        )
    if isinstance(got, Crash):
        return f"raised {got} on {label}"
    if got is None and expected is not None:
        return f"returned None on {label}: is the `return` missing?"
    difference = _dtype_difference(got, expected)
    if difference is not None:
        return _dtype_message(*difference, label)
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"returned an object of type {type(got).__name__} on {label}, expected a torch.Tensor"
        if got.shape != expected.shape:
            return f"returned shape {tuple(got.shape)} on {label}, expected {tuple(expected.shape)}"
        if got.is_meta:
            return f"returned a tensor on the meta device on {label}: it has a shape but no values (device='meta'?)"
        got = got.to_dense() if got.layout != torch.strided else got
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


def _dtype_message(got: Any, expected: Any, where: str, label: str) -> str:
    """The diagnosis of a result of the wrong type, from _dtype_difference: torch dtypes, or Python numbers."""
    if isinstance(expected, str):  # a Python number was expected
        hint = " (use // rather than /, and no tensors)" if expected == "a Python int" else ""
        return f"{where}returned {got} on {label}, expected {expected}{hint}"
    if expected == torch.bool:
        hint = (
            "a mask is torch.bool (True = may attend): comparisons such as tokens != pad_id give one; do not "
            "convert it to numbers."
        )
    elif not expected.is_floating_point:
        hint = f"indices and token ids are whole numbers: keep them {expected} (argmax, topk and // give them)."
    else:
        hint = f"a .double(), .half(), .float() or dtype=... too many or too few? Compute in {expected} throughout."
    return f"{where}returned dtype {got} on {label}, expected {expected}: {hint}"


# ---------------------------------------------------------------- running the reader's function


class _Stop(BaseException):
    """Raised inside the worker thread when the time limit has passed (BaseException: `except Exception` in the
    reader's code does not swallow it)."""


class _TimeLimitExceeded(Exception):
    def __init__(self, still_running: bool):
        super().__init__()
        self.still_running = still_running


@dataclass(frozen=True)
class _TimedOut:
    still_running: bool


@dataclass(frozen=True)
class _Run:
    value: Any  # the observation, a Crash, or _TimedOut
    modified: str | None  # which input the call changed in place, e.g. "`x`" or "`norm1.weight`"


def _observe_reader_twice(
    observe: Callable, fn: Callable, cases: Sequence[Case], limit: float, atol: float, rtol: float
) -> tuple[list, tuple[str, str] | None]:
    """The reader's observations, or a (message, key) problem found before any comparison with the reference.

    Every case runs under seed 0, then again under seed 1: a time limit reached stops everything at once; two
    runs that differ are named before anything else; then an input changed in place.
    """
    runs = []
    module_copies: list[dict] = [{} for _ in cases]  # per case: the reader's copies of the modules it is given
    for seed in _SEEDS:
        for i, case in enumerate(cases):
            run = _run_reader(observe, fn, case, seed, limit, module_copies[i])
            if isinstance(run.value, _TimedOut):
                return [], (_timed_out_message(run.value, case.label, limit), "time_limit")
            if seed == _SEEDS[0]:
                runs.append(run)
                if run.modified is not None:
                    module_copies[i] = {}  # the second run gets untouched copies
            elif not _same(runs[i].value, run.value, atol, rtol):
                return [], (_nondeterministic_message(case.label), "nondeterministic")
    for case, run in zip(cases, runs):
        if run.modified is not None:
            return [], (_in_place_message(run.modified, case.label), "in_place")
    return [run.value for run in runs], None


def _run_reader(observe: Callable, fn: Callable, case: Case, seed: int, limit: float, module_copies: dict) -> _Run:
    given = _fresh(case, module_copies)
    torch.default_generator.manual_seed(seed)  # CPU only: CUDA's generators are left alone
    random.seed(seed)
    np.random.seed(seed)
    try:
        value = _call_with_time_limit(lambda: observe(fn, given), limit)
    except NotImplementedError as error:
        if not _is_missing_forward(error):
            raise  # an unfilled stub: let the notebook show its message
        value = Crash(error)  # a module whose `forward` is misspelt: torch's own NotImplementedError
    except _TimeLimitExceeded as stop:
        return _Run(_TimedOut(stop.still_running), None)
    except (Exception, SystemExit) as error:  # any other crash of the reader's code (exit() too) is a diagnosis
        value = Crash(error, in_checker=_raised_in_checker(error, fn))
    return _Run(value, _modified_input(fn, case, given))


_EXERCISES = os.path.dirname(os.path.abspath(__file__))
_LIBRARIES = (
    os.path.dirname(os.path.abspath(torch.__file__)),
    os.path.dirname(os.path.abspath(np.__file__)),
    os.path.dirname(_EXERCISES),  # the package's other modules, which the reader's code may call
    sysconfig.get_paths()["stdlib"],
)


def _raised_in_checker(error: BaseException, fn: Callable) -> bool:
    """Whether `error` comes from a checker's own code: the innermost frame outside libraries (torch, NumPy, the
    standard library, the package's modules) is in transformer_course/course/exercises, not in the reader's code. A
    TypeError from calling `fn` with the exercise's arguments (a wrong signature) is the reader's."""
    names = tuple(name + "(" for name in (getattr(fn, "__qualname__", None), getattr(fn, "__name__", None)) if name)
    if isinstance(error, TypeError) and names and str(error).startswith(names):
        return False
    filenames = []
    tb = error.__traceback__
    while tb is not None:
        filenames.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    for filename in reversed(filenames):  # innermost first
        if filename.startswith(_EXERCISES):
            return True
        if not (filename.startswith(_LIBRARIES) or filename.startswith("<frozen")):
            return False  # the reader's code (a notebook cell, a script)
    return False


def _is_missing_forward(error: NotImplementedError) -> bool:
    """torch.nn.Module's error for a module without `forward` (misspelt `foward`, say), not a stub's."""
    return 'missing the required "forward" function' in str(error)


def _observe_variant(observe: Callable, variant: Callable, case: Case) -> Any:
    try:
        return observe(variant, _fresh(case))
    except Exception as error:
        return Crash(error)


def _call_with_time_limit(call: Callable[[], Any], limit: float) -> Any:
    """call() in a worker thread; its result or exception, or _TimeLimitExceeded once `limit` seconds have passed."""
    outcome: dict[str, Any] = {}
    guard = threading.Lock()  # orders "the call is done" against "stop the call": never a _Stop after done
    grad_enabled = torch.is_grad_enabled()  # grad mode is per thread: the worker gets the caller's

    def work() -> None:
        try:
            try:
                with torch.set_grad_enabled(grad_enabled):
                    outcome["value"] = call()
            except BaseException as error:  # _Stop included
                outcome["error"] = error
            finally:
                with guard:
                    outcome["done"] = True
                    _raise_in_thread(threading.get_ident(), None)  # cancel a _Stop sent but not yet raised
        except _Stop:
            pass  # it arrived during the bookkeeping: the caller has already reported the time limit

    worker = threading.Thread(target=work, name=WORKER_NAME, daemon=True)
    worker.start()
    try:
        worker.join(limit)
    except BaseException:  # KeyboardInterrupt in the notebook: stop the worker too, then let it through
        _stop(worker, outcome, guard)
        raise
    if worker.is_alive() and _stop(worker, outcome, guard):
        worker.join(_STOP_GRACE)
        raise _TimeLimitExceeded(still_running=worker.is_alive())
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _stop(worker: threading.Thread, outcome: dict, guard: threading.Lock) -> bool:
    """Raise _Stop in the worker unless its call is done; True if it was sent."""
    with guard:
        if outcome.get("done") or worker.ident is None:  # finished, or never started
            return False
        _raise_in_thread(worker.ident, _Stop)
        return True


def _raise_in_thread(ident: int, exception: type[BaseException] | None) -> None:
    # exception None clears a pending one (ctypes passes None as NULL).
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), None if exception is None else ctypes.py_object(exception)
    )


def _timed_out_message(timed_out: _TimedOut, label: str, limit: float) -> str:
    message = (
        f"stopped after {limit:g} s on {label}: your function had not finished. Is there a loop that never ends "
        "(a `while` whose condition never becomes False, a length that never grows)?"
    )
    if timed_out.still_running:
        message += (
            " It is inside a long call into C code and goes on in the background until that call returns; "
            "restart the kernel if the notebook stays busy."
        )
    return message


def _nondeterministic_message(label: str) -> str:
    return (
        f"your function gives different results on the same input ({label}): dropout or random noise in the "
        "answer? Called twice with identical inputs, it must return the same values: leave dropout out "
        "(or pass training=False), draw no random numbers, and keep no state between calls."
    )


# ---------------------------------------------------------------- inputs: copies, and changes made in place


def _fresh(case: Case, module_copies: dict | None = None) -> Case:
    """The case with copies of its tensors and lists; modules copied into `module_copies` (by id), or shared.

    The reference and the known variants share the case's modules (they change nothing); the reader's function
    gets copies, made once and reused by its second run when the first changed nothing (a deep copy of a
    model costs more than the call).
    """
    return Case(case.label, _clone(case.args, module_copies), _clone(case.kwargs, module_copies))


def _clone(x: Any, module_copies: dict | None = None) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, nn.Module):
        if module_copies is None:
            return x
        if id(x) not in module_copies:
            module_copies[id(x)] = copy.deepcopy(x)
        return module_copies[id(x)]
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(item, module_copies) for item in x)
    if isinstance(x, dict):
        return {key: _clone(value, module_copies) for key, value in x.items()}
    return x


def _modified_input(fn: Callable, original: Case, given: Case) -> str | None:
    """The name of the first argument the call changed (given: what fn got; original: untouched copies)."""
    names = _parameter_names(fn, len(original.args))
    pairs = [(names[i], a, b) for i, (a, b) in enumerate(zip(original.args, given.args))]
    pairs += [(key, original.kwargs[key], given.kwargs[key]) for key in original.kwargs]
    for name, before, after in pairs:
        where = _changed(before, after)
        if where is not None:
            return f"`{name}{where}`"
    return None


def _parameter_names(fn: Callable, count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature
        parameters = []
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [positional[i] if i < len(positional) else f"argument {i + 1}" for i in range(count)]


def _changed(before: Any, after: Any) -> str | None:
    """'' if `after` no longer equals `before`, '.weight' or '[2]' for the part that changed; None if unchanged."""
    if isinstance(before, torch.Tensor):
        return None if _identical(before, after) else ""
    if isinstance(before, nn.Module):
        old, new = before.state_dict(), after.state_dict()
        if old.keys() != new.keys():
            return ""
        return next((f".{key}" for key in old if not _identical(old[key], new[key])), None)
    if isinstance(before, (list, tuple)):
        if len(before) != len(after):
            return ""
        for i, (b, a) in enumerate(zip(before, after)):
            where = _changed(b, a)
            if where is not None:
                return f"[{i}]{where}"
    return None


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True))
    return bool(torch.equal(a, b))


def _in_place_message(where: str, label: str) -> str:
    return (
        f"your function changes its input {where} in place (on {label}), so the caller's copy changes too: "
        "an operation ending in _ (add_, masked_fill_, relu_), an augmented assignment such as x += ..., or an "
        "assignment into x[...] or w.data. Compute a new tensor instead (x = x + ..., masked_fill without _), "
        "or work on a .clone()."
    )


# ---------------------------------------------------------------- comparing observations


def _same(a: Any, b: Any, atol: float, rtol: float) -> bool:
    if isinstance(a, Crash) or isinstance(b, Crash):
        return isinstance(a, Crash) and isinstance(b, Crash) and type(a.error) is type(b.error)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return _same(torch.from_numpy(a), torch.from_numpy(b), atol, rtol)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return False
        if a.is_meta or b.is_meta:  # shapes without values: only two meta tensors (of one dtype) are alike
            return a.is_meta and b.is_meta and a.dtype == b.dtype
        a, b = (t.to_dense() if t.layout != torch.strided else t for t in (a, b))  # sparse: compare the values
        if a.dtype == torch.bool or b.dtype == torch.bool:
            return a.dtype == b.dtype and bool(torch.equal(a.cpu(), b.cpu()))
        # equal_nan: a reader's NaN (a fully masked row) must match the wrong variant that produces it.
        a, b = a.detach().double().cpu(), b.detach().double().cpu()
        return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, atol, rtol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key], atol, rtol) for key in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, numbers.Integral) or isinstance(b, numbers.Integral):  # a count: exact, even as a float
        return isinstance(a, numbers.Real) and isinstance(b, numbers.Real) and float(a) == float(b)
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.dtype):
        return a == b
    if type(a).__eq__ is object.__eq__:
        return True  # objects without a notion of equality (a module, a generator): compared by type only
    return bool(a == b)


def _structure_differs(got: Any, expected: Any) -> bool:
    """True where got is a crash, None, or of another type, shape or length than expected."""
    if isinstance(got, Crash) or (got is None) != (expected is None):
        return True
    if isinstance(expected, torch.Tensor):
        return not isinstance(got, torch.Tensor) or got.shape != expected.shape
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return True
        return any(_structure_differs(g, e) for g, e in zip(got, expected))
    return False


def _dtype_difference(got: Any, expected: Any) -> tuple[Any, Any, str] | None:
    """(what got is, what was expected, where) if the types of two results of the same shape differ, else None.

    `where` is "value i: " for the i-th tensor of a tuple; a torch.dtype inside an observation (the dtype of a
    module's parameters in a summary) is reported without it.
    """
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
        return (got.dtype, expected.dtype, "") if got.dtype != expected.dtype and got.shape == expected.shape else None
    if isinstance(got, torch.dtype) and isinstance(expected, torch.dtype):
        return (got, expected, "") if got != expected else None
    if isinstance(got, (tuple, list)) and isinstance(expected, (tuple, list)) and len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected)):
            difference = _dtype_difference(g, e)
            if difference is not None:
                return difference if difference[2] or isinstance(e, torch.dtype) else (*difference[:2], f"value {i}: ")
        return None
    if isinstance(expected, numbers.Real) and not isinstance(expected, bool):
        wanted = "a Python int" if isinstance(expected, numbers.Integral) else "a Python float"
        if isinstance(got, torch.Tensor) and got.dim() == 0:
            return f"a {got.dtype} tensor", wanted, ""
        if wanted == "a Python int" and isinstance(got, numbers.Real) and not isinstance(got, numbers.Integral):
            # The right count as a float (from /); a float far from it is a wrong value, not a wrong type.
            return (f"a float ({got!r})", wanted, "") if math.isclose(got, expected, rel_tol=1e-9) else None
    return None


def _labels(cases: Sequence[Case]) -> str:
    return ", ".join(c.label for c in cases)


def _brief(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
