"""Small timing helpers: repeat, warm-up, median/min/max in microseconds."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

# Defaults, changed by ``configure`` (``--quick`` uses smaller ones).
SETTINGS = {
    "repeat": 7,  # measured repeats (each of ``number`` loops)
    "warmup": 1,  # un-timed calls before measuring (JIT compiles, caches)
    "target": 0.02,  # seconds one repeat should last; picks ``number``
    "budget": 2.0,  # seconds after which no further repeat is started
    "min_repeat": 3,  # repeats always done, whatever the budget
}


def configure(**kwargs: float) -> None:
    """Change the default timing settings (keys of ``SETTINGS``)."""
    for key, val in kwargs.items():
        if key not in SETTINGS:
            raise KeyError(key)
        SETTINGS[key] = val


@dataclass
class Timing:
    """Per-call times of one measurement, in microseconds."""

    median: float
    min: float
    max: float
    number: int  # loops per repeat
    repeat: int  # repeats measured
    samples: tuple[float, ...] = ()

    def scaled(self, factor: float) -> Timing:
        """The same timing with every time multiplied by ``factor``."""
        return Timing(
            self.median * factor,
            self.min * factor,
            self.max * factor,
            self.number,
            self.repeat,
            tuple(s * factor for s in self.samples),
        )


def _loop(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - t0


def pick_number(fn, target: float) -> int:
    """Loops per repeat so that one repeat lasts about ``target`` seconds."""
    number = 1
    while True:
        elapsed = _loop(fn, number)
        if elapsed >= target:
            return number
        if elapsed >= target / 10 or number >= 100_000:
            return max(1, min(1_000_000, math.ceil(number * target / max(elapsed, 1e-9))))
        number *= 10


def measure(
    fn,
    *,
    repeat: int | None = None,
    warmup: int | None = None,
    number: int | None = None,
    target: float | None = None,
    budget: float | None = None,
) -> Timing:
    """Time ``fn()``; return per-call median/min/max in microseconds.

    ``number`` loops per repeat is chosen automatically unless given. Repeats stop
    early once ``budget`` seconds have been spent (after at least ``min_repeat``).
    """
    s = SETTINGS
    repeat = int(s["repeat"] if repeat is None else repeat)
    warmup = int(s["warmup"] if warmup is None else warmup)
    target = float(s["target"] if target is None else target)
    budget = float(s["budget"] if budget is None else budget)
    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    if number is None:
        number = pick_number(fn, target)
    samples = []
    for i in range(repeat):
        if i >= s["min_repeat"] and time.perf_counter() - start > budget:
            break
        samples.append(_loop(fn, number) / number * 1e6)
    return Timing(
        statistics.median(samples), min(samples), max(samples), number, len(samples), tuple(samples)
    )


def once(fn) -> tuple[float, object]:
    """Run ``fn()`` once; return (elapsed microseconds, result)."""
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e6, out


def format_us(us: float | None) -> str:
    """Human-readable time from microseconds (µs, ms or s, 3 significant digits)."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "—"
    if us < 1000:
        return f"{us:.3g} µs"
    if us < 1e6:
        return f"{us / 1e3:.3g} ms"
    return f"{us / 1e6:.3g} s"
