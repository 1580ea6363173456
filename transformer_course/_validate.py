"""Argument checks shared by every module: each error names the argument and what was expected."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])

# Which checked calls are running on this thread: "build" (a constructor) and "call" (any other function). A
# constructor's checks cover everything it calls; a function's cover the functions it calls, but not a constructor
# called inside it (in a hook, say), whose arguments did not come through them.
_door = threading.local()


def at_the_door() -> bool:
    """True unless a constructor's checked call is running on this thread (a config made there is checked there)."""
    return not getattr(_door, "build", False)


@contextlib.contextmanager
def inside_the_door(kind: str = "call") -> Iterator[None]:
    """Inside the block, checked calls of this kind skip their checks, as inside a checked call: the caller
    checked what they receive."""
    was_inside = getattr(_door, kind, False)
    setattr(_door, kind, True)
    try:
        yield
    finally:
        setattr(_door, kind, was_inside)


def checked(check: Callable[..., object]) -> Callable[[F], F]:
    """Run `check(*args, **kwargs)` before the function, at the door only.

    The outermost checked call checks its arguments; the calls of the same kind it makes inside (a model's
    layers, their attention; the modules a constructor builds) skip theirs, since the door's checks already cover
    what they receive. So every error is raised once, by the public function the user called, and a model's hot
    path runs no checks at all. While torch.compile traces, nothing is checked: the compiled graph is for speed.
    """

    def decorate(function: F) -> F:
        kind = "build" if function.__name__ == "__init__" else "call"

        @functools.wraps(function)
        def door(*args: Any, **kwargs: Any) -> Any:
            # Inside a constructor everything was derived from its checked arguments; inside a forward, the
            # functions it calls were, but a module built there (in a hook, say) was not.
            inside = getattr(_door, "build", False) or (kind == "call" and getattr(_door, "call", False))
            if inside or torch.compiler.is_compiling():
                return function(*args, **kwargs)
            check(*args, **kwargs)
            setattr(_door, kind, True)
            try:
                return function(*args, **kwargs)
            finally:
                setattr(_door, kind, False)

        return door  # type: ignore[return-value]

    return decorate


def check_positive_int(value: object, name: str) -> int:
    """Return `value` if it is a positive int, else raise an error that names the argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name}={value} must be a positive integer")
    return value


def check_probability(value: object, name: str) -> float:
    """Return `value` if it is a probability in [0, 1), else raise an error that names the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}={value} must be in [0, 1)")
    return float(value)


def check_tensor(x: object, name: str, ndim: int | None = None, floating: bool | None = None) -> torch.Tensor:
    """Return `x` if it is a tensor with `ndim` dimensions (and a float dtype, or token ids' dtype, when asked)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if floating is True and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    # Token ids: torch.long or torch.int, the dtypes nn.Embedding accepts (uint8 ids would wrap at 256).
    if floating is False and x.dtype not in (torch.long, torch.int):
        raise TypeError(f"{name} must be an integer tensor of token ids (torch.long or torch.int), got dtype {x.dtype}")
    return x


def check_bool(value: object, name: str) -> bool:
    """Return `value` if it is a bool, else raise a TypeError that names the argument."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def check_device(x: torch.Tensor, name: str, model: torch.nn.Module) -> None:
    """A ValueError naming `name` unless the tensor x is on the device of `model`'s parameters."""
    parameter = next(model.parameters(), None)
    if parameter is not None and x.device != parameter.device:
        raise ValueError(f"{name} is on {x.device} but the model is on {parameter.device}: move one with .to()")


def check_token_id(value: object, name: str, vocab_size: int) -> int:
    """Return `value` if it is an int id in [0, vocab_size), else raise an error that names the argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int token id, got {type(value).__name__}")
    if not 0 <= value < vocab_size:
        raise ValueError(f"{name}={value} must be a token id in [0, {vocab_size - 1}] (vocabulary of {vocab_size})")
    return value


def check_token_ids(ids: torch.Tensor, name: str, vocab_size: int, wait: bool = False) -> None:
    """A ValueError naming `name` unless every id of `ids` lies in [0, vocab_size): the one token-range check.

    On the CPU the ids are read and the error says which ids were found. On a GPU, reading them makes the host
    wait for the device. A door that runs once per call (decoding, generation) passes `wait=True` and gets the
    same ValueError there. A model's forward, run at every training step, does not wait: the check is queued on
    the device instead (`torch._assert_async`). A bad id then fails a later CUDA call as a device-side
    assertion, not as this ValueError, and PyTorch's documentation of `_assert_async` warns that the CUDA
    context is then unusable until the process restarts: run the same input on the CPU to see the message.
    """
    check_tensor(ids, name, floating=False)
    check_positive_int(vocab_size, "vocab_size")
    if ids.numel() == 0:
        return
    if ids.device.type != "cpu" and not wait:
        in_range = ((ids >= 0) & (ids < vocab_size)).all()
        torch._assert_async(in_range, f"{name}: expected ids in [0, {vocab_size - 1}] (vocab_size={vocab_size})")
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name}: ids in [{low}, {high}], expected ids in [0, {vocab_size - 1}] (vocab_size={vocab_size})"
        )


def named_list(items: Iterable[object], limit: int = 10) -> str:
    """'a', 'b', 'c' for an error message: at most `limit` items, then how many more (a message stays short)."""
    items = list(items)
    shown = ", ".join(repr(item) for item in items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


def shortened(text: str, limit: int = 80) -> str:
    """repr(text), cut in the middle when longer than `limit` characters (an error message stays readable)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[: limit // 2]!r} ... {text[-limit // 2 :]!r} ({len(text)} characters)"
