"""Compiled drivers: the whole Jacobian (all chunks) or a JVP in one nopython call.

A driver is a small ``@numba.njit(cache=True)`` function written to a module in the
kernel cache directory. It seeds dual numbers, calls the dual version of the user's
function (:func:`dualad.njit.recompile.dual_version`) once per chunk of ``width``
directions, and writes values, Jacobian columns and the output layout. Its arguments are
plain numbers and float arrays, so Numba caches it on disk with everything it calls
inlined or linked in; the module's name hashes the user's source (and the helpers'), the
chunk width, the rules and the versions, so a new process finds the compiled code again.

Example:
    >>> src = driver_source("jacobian", nargs=2, seeded=(("array", 0),), width=4)
    >>> "def run(a0, p0, q0, a1):" in src
    True
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba.core.errors import NumbaError

from ..core.errors import DualadError, MissingRuleError
from ..derivatives.registry import import_kernel_module, kernel_cache_directory
from .dual_type import BUFFER_WRITE, ERROR_MARKER
from .recompile import dual_version, source_fingerprint
from .rule_overloads import rule_fingerprint

__all__ = ["FORMAT_VERSION", "NjitError", "driver", "driver_source", "translate_error"]

#: Bumped when the generated code changes meaning (part of the cache key).
FORMAT_VERSION = "1"


class NjitError(DualadError, TypeError):
    """A construct in an ``@njit`` function that cannot run on dual numbers."""


_HEADER = '''"""Compiled dualad driver ({mode}) for {qualname} (generated; safe to delete)."""
import numba
import numpy as np

from dualad.njit.dual_type import dual_array_maker, make_dual
from dualad.njit.outputs import (
    layout_size,
    output_size,
    write_layout,
    write_output,
)

make_input = dual_array_maker({width}, True)  # arguments: read-only, shared by all passes
user = None  # the dual version of the user's function, set before the first call
'''


def _fresh(name: str, partials: str) -> str:
    """The argument ``name`` as a read-only dual array with the partials ``partials``
    (read-only: the buffers are shared by every pass, so the user's code may not write
    into them)."""
    return f"make_input({name}, {partials})"


def driver_source(mode: str, *, nargs: int, seeded: Sequence[tuple[str, int]], width: int,
                  lifted: Sequence[int] = (), qualname: str = "f", cache: bool = True) -> str:
    """Python source of a driver module.

    Parameters of ``run``: each argument ``a{k}``; after a differentiated array its
    partials buffer ``p{k}`` (shape ``a.shape + (width,)``, zeros) and, for the Jacobian,
    the same buffer as ``(n, width)`` (``q{k}``); after a lifted float array (entering
    with zero partials, so arrays allocated from it hold dual numbers) its zero partials
    ``z{k}``; for ``mode="jvp"`` the tangent ``t{k}`` after each differentiated argument
    (arrays: shaped ``a.shape + (1,)``). ``run`` returns one float array: the length ``L``
    of the layout code, the code, the ``m`` output values, the ``(m, n)`` Jacobian. ``mode="jacobian"`` has one differentiated argument
    ``(kind, index)``, kind ``"scalar"`` or ``"array"``, seeded ``width`` directions per
    pass.
    """
    lines = [_HEADER.format(mode=mode, qualname=qualname, width=width), "",
             f"@numba.njit(cache={cache})"]
    kinds = {k: kind for kind, k in seeded}
    params = []
    for k in range(nargs):
        params.append(f"a{k}")
        if mode == "jvp" and k in kinds:
            params.append(f"t{k}")
        elif kinds.get(k) == "array":
            params += [f"p{k}", f"q{k}"]
        if k in lifted:
            params.append(f"z{k}")
    lines.append(f"def run({', '.join(params)}):")
    call = ", ".join(f"d{k}" if k in kinds or k in lifted else f"a{k}" for k in range(nargs))

    def make_args(indent: str) -> list[str]:
        out = []
        for k in range(nargs):
            if mode == "jvp" and kinds.get(k) == "scalar":
                out.append(f"{indent}d{k} = make_dual(a{k}, (t{k},))")
            elif mode == "jvp" and kinds.get(k) == "array":
                out.append(f"{indent}d{k} = {_fresh(f'a{k}', f't{k}')}")
            elif kinds.get(k) == "scalar":
                out.append(f"{indent}d{k} = make_dual(a{k}, (1.0,))")
            elif kinds.get(k) == "array":
                out.append(f"{indent}d{k} = {_fresh(f'a{k}', f'p{k}')}")
            if k in lifted:
                out.append(f"{indent}d{k} = {_fresh(f'a{k}', f'z{k}')}")
        return out

    finish = [
        "    m = output_size(out)",
        "    L = layout_size(out)",
        "    res = np.empty(1 + L + m + m * n)",
        "    res[0] = L",
        "    write_layout(out, res, 1)",
        "    voff = 1 + L",
        "    joff = 1 + L + m",
        "    write_output(out, res, voff, joff, 0, 0, w, n)",
    ]
    if mode == "jacobian" and kinds[seeded[0][1]] == "array":
        i = seeded[0][1]
        lines += [
            f"    P = q{i}",
            "    n = P.shape[0]",
            f"    K = {width}",
            "    w = min(K, n)",
            "    for j in range(w):",
            "        P[j, j] = 1.0",
            *make_args("    "),
            f"    out = user({call})",
            *finish,
            "    for start in range(K, n, K):",
            "        for j in range(K):",
            "            P[start - K + j, j] = 0.0",
            "        w = min(K, n - start)",
            "        for j in range(w):",
            "            P[start + j, j] = 1.0",
            *make_args("        "),
            f"        out = user({call})",
            "        write_output(out, res, voff, joff, 0, start, w, n)",
        ]
    elif mode in ("jacobian", "jvp"):
        lines += [*make_args("    "), f"    out = user({call})", "    n = 1", "    w = 1",
                  *finish]
    else:
        raise ValueError(f"unknown driver mode {mode!r}")
    lines.append("    return res")
    return "\n".join(lines) + "\n"


_lock = threading.Lock()
_DRIVERS: dict[tuple, Any] = {}


_FINGERPRINTS: dict[int, tuple[Any, str]] = {}


def _fingerprint(dispatcher: Any) -> str:
    entry = _FINGERPRINTS.get(id(dispatcher))
    if entry is None or entry[0] is not dispatcher:
        entry = (dispatcher, source_fingerprint(dispatcher))
        _FINGERPRINTS[id(dispatcher)] = entry
    return entry[1]


def driver(dispatcher: Any, mode: str, *, nargs: int, seeded: tuple[tuple[str, int], ...],
           width: int, lifted: tuple[int, ...] = ()) -> Any:
    """The compiled ``run`` of a driver for ``dispatcher`` (made, written and imported once).

    When typing fails because the function writes a dual number into a float buffer
    (``out = np.zeros(n); out[i] = ...``), the driver is made again from a dual version
    whose float allocations are dual arrays (:mod:`dualad.njit.idioms`), and kept.
    """
    rules = rule_fingerprint()
    key = (id(dispatcher), mode, nargs, seeded, width, lifted, rules)
    with _lock:
        entry = _DRIVERS.get(key)
        if entry is not None and entry[0] is dispatcher:
            return entry[1]
        plain = _build(dispatcher, mode, nargs, seeded, width, lifted, rules, promote=False)

    run = _PromotingRun(plain, lambda: _build(dispatcher, mode, nargs, seeded, width, lifted,
                                              rules, promote=True))
    with _lock:
        _DRIVERS[key] = (dispatcher, run)
    return run


class _PromotingRun:
    """A driver's ``run`` that switches, once, to the version with dual float buffers
    when typing the plain one fails on a dual number written into a float buffer.
    Other attributes (``stats``, ...) are the current dispatcher's."""

    def __init__(self, plain: Any, build_promoted: Any) -> None:
        self.current = plain
        self.build_promoted = build_promoted
        self.promoted = False

    def __call__(self, *args: Any) -> Any:
        if self.promoted:
            return self.current(*args)
        try:
            return self.current(*args)
        except NumbaError as exc:
            if BUFFER_WRITE not in str(exc):
                raise
        with _lock:
            if not self.promoted:
                self.current = self.build_promoted()
                self.promoted = True
        return self.current(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current, name)


def _build(dispatcher: Any, mode: str, nargs: int, seeded: tuple, width: int,
           lifted: tuple[int, ...], rules: str, *, promote: bool) -> Any:
    qualname = getattr(dispatcher.py_func, "__qualname__", "f")
    # A function of no importable module (code run with exec) compiles afresh in each
    # process: Numba cannot reload compiled code that refers to such a module.
    cache = _importable(dispatcher.py_func)
    source = driver_source(mode, nargs=nargs, seeded=seeded, width=width,
                           lifted=lifted, qualname=qualname, cache=cache)
    digest = hashlib.sha256()
    for part in (FORMAT_VERSION, numba.__version__, np.__version__, sys.version,
                 _fingerprint(dispatcher), rules, source, "promote" if promote else ""):
        digest.update(part.encode() + b"\0")
    modname = f"dualad_njit_{digest.hexdigest()[:24]}"
    module = import_kernel_module(source, modname, subdirectory="njit")
    module.user = dual_version(dispatcher, width if promote else None)
    return module.run


def _importable(func: Any) -> bool:
    """Whether ``func`` lives in a module a new process can import (or ``__main__``)."""
    return inspect.getmodule(func) is not None


# -- errors in the user's words ---------------------------------------------------------

_LOCATION = re.compile(r'^File "([^"]+)", line (\d+):$')
_SIGNATURE = re.compile(r">>> (.*)")
_UNTYPED = re.compile(r"Untyped global name '([^']+)'")


def _locations(text: str) -> list[tuple[str, str, str]]:
    """``(path, line, source line)`` of each location Numba's report shows (the source
    line is the one its caret marks)."""
    lines = text.splitlines()
    found = []
    for k, line in enumerate(lines):
        match = _LOCATION.match(line.strip())
        if not match:
            continue
        source = ""
        for j in range(k + 1, min(k + 40, len(lines))):
            if lines[j].strip() == "^" or set(lines[j].strip()) == {"^"}:
                source = lines[j - 1].strip()
                break
            if _LOCATION.match(lines[j].strip()) or lines[j].startswith("During:"):
                source = lines[k + 1].strip() if k + 1 < len(lines) else ""
                break
        found.append((match.group(1), match.group(2), source))
    return found


def _user_location(text: str) -> str:
    here = str(Path(__file__).parent)
    cache = str(kernel_cache_directory())
    found = []
    for path, line, src in _locations(text):
        if path.startswith("<"):
            continue
        path = os.path.abspath(path)
        if path.startswith(here) or path.startswith(cache):
            continue
        found.append(f"line {line} of {path} (`{src}`)" if src else f"line {line} of {path}")
    return found[-1] if found else ""


def _readable(text: str) -> str:
    text = re.sub(r"DualNumber\(width=\d+\)", "dual", text)
    return re.sub(r"DualArray\(ndim=(\d+), width=\d+(, readonly)?\)", r"dual array (\1-d)", text)


def translate_error(exc: NumbaError, fname: str) -> Exception:
    """A dualad error for a Numba error raised while compiling the dual version."""
    text = str(exc)
    where = _user_location(text)
    head = f"{fname}, {where}" if where else fname
    start = text.find(ERROR_MARKER)
    if start >= 0:
        end = text.find(" [end]", start)
        message = text[start + len(ERROR_MARKER): end if end >= 0 else None]
        if message.startswith("missing-rule: "):
            return MissingRuleError(f"{head}: {message[len('missing-rule: '):]}.")
        return NjitError(f"{head}: {message}.")
    untyped = _UNTYPED.search(text)
    if untyped:
        return NjitError(
            f"{head}: the global {untyped.group(1)!r} cannot be compiled by Numba; "
            f"nopython code can call numpy, math, other @njit functions, and functions "
            f"given a rule with ad.define_rule."
        )
    signature = _SIGNATURE.search(text)
    if signature:
        construct = _readable(signature.group(1).strip())
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()
                 and not ln.startswith(("Failed in", "During:", "File ", "<source"))]
        construct = _readable(lines[0]) if lines else type(exc).__name__
    return NjitError(
        f"{head}: Numba cannot compile {construct} for dual numbers (values that depend "
        f"on the differentiated input). Supported are arithmetic, comparisons, the "
        f"math/np scalar functions that have derivative rules, np.empty_like/zeros_like/"
        f"ones_like/copy of such arrays, element indexing and calls of other @njit "
        f"functions; give a missing function a rule with ad.define_rule."
    )
