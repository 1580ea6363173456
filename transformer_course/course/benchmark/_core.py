"""What every benchmark section shares: the `Table` of results, interleaved timing, peak memory, the environment."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ... import efficient
from ...training import get_device

MiB = 2**20


@dataclass
class Table:
    """One section's measurements: `rows` of numbers keyed by `columns`, and notes (shapes, method).

    `curves` holds what does not fit in a row, e.g. the copy task's loss at every step.
    """

    section: str
    title: str
    columns: list[str]
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    curves: dict = field(default_factory=dict)

    def column(self, name: str, **where) -> list:
        """The values of column `name` in the rows whose other columns match `where`, e.g. mode="forward"."""
        if name not in self.columns:
            raise ValueError(f"column {name!r} is not one of {self.columns}")
        return [row[name] for row in self.rows if all(row[k] == v for k, v in where.items())]

    def format(self) -> str:
        """The table as aligned text, then its notes."""
        cells = [[_format_cell(row[c]) for c in self.columns] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        line = "  ".join("-" * w for w in widths)
        lines = [self.title, line, "  ".join(c.rjust(w) for c, w in zip(self.columns, widths)), line]
        lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
        lines += [line, *(f"  {note}" for note in self.notes)]
        return "\n".join(lines)


def _format_cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def target_note(what: str, value: float | None, bound: float, at_least: bool = True) -> str:
    """One line saying whether `value` meets its target, value >= bound (at_least) or <= bound; None: not measured."""
    target = f"{what} {'>=' if at_least else '<='} {bound:g}"
    if value is None:
        return f"target: {target}: not measured at these sizes"
    met = value >= bound if at_least else value <= bound
    return f"target: {target}: {value:.2f}, {'met' if met else 'NOT met'}"


def use_fused(model: torch.nn.Module) -> torch.nn.Module:
    """Switch every attention and every norm of `model` to PyTorch's fused kernels, by the package's names for
    them at this revision (`use_fused_attention`, formerly `keep_attention_weights(model, False)`; `use_fused_norms`
    where it exists): scripts/bench_before_after.py runs these sections on older revisions too."""
    switch = getattr(efficient, "use_fused_attention", None)
    model = switch(model) if switch is not None else efficient.keep_attention_weights(model, False)
    norms = getattr(efficient, "use_fused_norms", None)
    return norms(model) if norms is not None else model


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_variants(
    variants: dict[str, Callable[[], object]],
    repeats: int = 5,
    warmup: int = 2,
    device: torch.device | str = "cpu",
) -> dict[str, list[float]]:
    """Seconds taken by each call of each variant: `warmup` untimed calls each, then `repeats` rounds
    in which every variant runs once, in an order rotated from round to round."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats} must be >= 1 and warmup={warmup} >= 0")
    device = torch.device(device)
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            synchronize(device)
            start = time.perf_counter()
            variants[name]()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def resolve_device(device) -> torch.device:
    """`device` when given (a ValueError if PyTorch does not know it or this machine lacks it), else the best one."""
    if device is None:
        return get_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a device PyTorch knows (cpu, cuda, cuda:1, ...)") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: this PyTorch ({torch.__version__}) sees no CUDA GPU on this machine")
    return resolved


def _read_status_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise OSError(f"{field_name} not in /proc/self/status")


def peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> int | None:
    """Bytes by which memory use peaked above its level before `fn()` ran; None where it cannot be measured.

    CUDA: `torch.cuda.max_memory_allocated`. CPU: the growth of the process's peak resident set size
    (VmHWM, reset through /proc/self/clear_refs: Linux only), after returning freed heap memory to the
    system, so it counts every byte touched, tensors and library buffers alike.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    try:
        libc_name = ctypes.util.find_library("c")
        if libc_name and hasattr(ctypes.CDLL(libc_name), "malloc_trim"):
            ctypes.CDLL(libc_name).malloc_trim(0)  # glibc keeps freed memory otherwise, hiding new allocations
        before = _read_status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the peak resident set size, to the current size
        fn()
        return (_read_status_kib("VmHWM") - before) * 1024
    except OSError:
        return None


def environment(device: torch.device) -> list[str]:
    """Lines describing where the numbers were measured: versions, processor, threads, load."""
    lines = [f"torch {torch.__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}"]
    if device.type == "cuda":
        lines.append(f"device: {torch.cuda.get_device_name(device)}")
    else:
        lines.append(f"device: CPU {_cpu_name()}, {os.cpu_count()} logical cores")
    lines.append(f"torch threads: {torch.get_num_threads()}")
    if hasattr(os, "getloadavg"):
        lines.append("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return lines


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "(unknown model)"
