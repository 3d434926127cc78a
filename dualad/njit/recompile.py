"""Recompiling a user's ``@njit`` function (and the ``@njit`` helpers it calls) for duals.

The user's dispatcher keeps its own compiled code untouched: :func:`dual_version` makes a
new function object from the same code, with a copy of its globals in which every
``@njit`` helper it calls is replaced by the helper's own dual version, and every function
given a rule with ``ad.define_rule`` by a stub that applies the rule. Numba then types the
copies with dual-number arguments. :func:`source_fingerprint` hashes the source of the
function and everything it reaches (the disk-cache key).

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def square(x):
    ...     return x * x
    >>> dual_version(square).py_func is not square.py_func
    True
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import threading
import types as pytypes
from collections.abc import Callable, Iterator
from typing import Any

import numba
import numpy as np
from numba.core.registry import CPUDispatcher

from ..core.operators import Operator
from ..derivatives.registry import get_rule
from .dual_type import CREATION_STANDINS
from .idioms import ARRAY_STANDINS, allocation_standins
from .rule_overloads import user_rule_stub

__all__ = ["dual_version", "jit_options", "source_fingerprint"]

_lock = threading.RLock()
_VERSIONS: dict[Any, tuple[Any, Any]] = {}  # id(dispatcher)[, width] -> (dispatcher, version)
_STUBS: dict[int, tuple[Any, Any, Any]] = {}  # id(global) -> (global, rule, stub)


def _standins(width: int | None) -> dict[Any, Any]:
    """numpy function -> its stand-in in a dual version (``width``: float allocations are
    dual arrays of that width, see :mod:`dualad.njit.idioms`)."""
    found = {**CREATION_STANDINS, **ARRAY_STANDINS}
    if width is not None:
        allocators = allocation_standins(width)
        found.update({getattr(np, name): fn for name, fn in allocators.items()})
    return found


def _numpy_standin(width: int | None) -> pytypes.ModuleType:
    """A module like numpy whose array-creation functions are the dual-aware stand-ins."""
    module = pytypes.ModuleType("numpy")
    module.__dict__.update(np.__dict__)
    for fn, standin in _standins(width).items():
        setattr(module, fn.__name__, standin)
    return module


_NUMPY: dict[int | None, pytypes.ModuleType] = {}


def _numpy_for(width: int | None) -> pytypes.ModuleType:
    module = _NUMPY.get(width)
    if module is None:
        module = _NUMPY[width] = _numpy_standin(width)
    return module


def _names(code: pytypes.CodeType) -> Iterator[str]:
    """Global names the code (and code nested in it) may load."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            yield from _names(const)


def _rule_of(obj: Any) -> Any:
    """The rule of a global defined with ``ad.define_rule`` (not a ufunc), else ``None``."""
    if isinstance(obj, (np.ufunc, type, pytypes.ModuleType)) or not callable(obj):
        return None
    try:
        return get_rule(obj)
    except TypeError:  # unhashable
        return None


def _original(obj: Any) -> Callable[..., Any]:
    """The function a traced wrapper stands for, as a Numba-callable function."""
    f = obj
    while not isinstance(f, CPUDispatcher) and hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    if isinstance(f, CPUDispatcher):
        return f
    if isinstance(getattr(f, "__dualad_operator__", None), Operator):
        raise TypeError(f"{f!r} is a dualad primitive; it cannot be called in nopython code")
    return numba.njit(f)


def jit_options(dispatcher: CPUDispatcher) -> dict[str, Any]:
    """The user's jit options, minus those that do not apply to the dual copy."""
    options = dict(getattr(dispatcher, "targetoptions", {}))
    for key in ("cache", "nopython", "forceobj", "looplift", "parallel", "_dbg_optnone",
                "_dbg_extend_lifetimes", "boundscheck_off", "no_cpython_wrapper",
                "no_cfunc_wrapper"):
        options.pop(key, None)
    return options


def _stub_for(obj: Any, rule: Any) -> Any:
    entry = _STUBS.get(id(obj))
    if entry is not None and entry[0] is obj and entry[1] is rule:
        return entry[2]
    stub = user_rule_stub(rule, _original(obj))
    _STUBS[id(obj)] = (obj, rule, stub)
    return stub


def dual_version(dispatcher: CPUDispatcher, width: int | None = None) -> CPUDispatcher:
    """A fresh ``numba.njit`` copy of ``dispatcher.py_func`` whose helpers are copies too.

    With ``width``, its float allocations (``np.zeros(n)`` ...) are dual arrays of that
    width (the drivers ask for it when a dual number is written into a float buffer).
    """
    with _lock:
        key = id(dispatcher) if width is None else (id(dispatcher), width)
        entry = _VERSIONS.get(key)
        if entry is not None and entry[0] is dispatcher:
            return entry[1]
        py = dispatcher.py_func
        namespace = dict(py.__globals__)
        fn = pytypes.FunctionType(py.__code__, namespace, py.__name__, py.__defaults__,
                                  py.__closure__)
        fn.__kwdefaults__ = py.__kwdefaults__
        fn.__qualname__ = py.__qualname__
        fn.__module__ = py.__module__
        fn.__doc__ = py.__doc__
        # Called from compiled drivers only: no C or Python wrapper to build.
        version = numba.njit(no_cpython_wrapper=True, no_cfunc_wrapper=True,
                             **jit_options(dispatcher))(fn)
        _VERSIONS[key] = (dispatcher, version)
        standins = {id(fn): (fn, standin) for fn, standin in _standins(width).items()}
        for name in set(_names(py.__code__)):
            obj = namespace.get(name)
            if obj is None:
                continue
            if obj is np:
                namespace[name] = _numpy_for(width)
                continue
            if id(obj) in standins and standins[id(obj)][0] is obj:
                namespace[name] = standins[id(obj)][1]
                continue
            if isinstance(obj, CPUDispatcher):
                namespace[name] = dual_version(obj, width)
                continue
            rule = _rule_of(obj)
            if rule is not None:
                namespace[name] = _stub_for(obj, rule)
        return version


def _code_text(f: Callable[..., Any]) -> bytes:
    try:
        return inspect.getsource(f).encode()
    except (OSError, TypeError):
        return marshal.dumps(f.__code__)


def source_fingerprint(dispatcher: CPUDispatcher) -> str:
    """A hash of the source of ``dispatcher`` and of every ``@njit`` helper it reaches,
    plus the rules of functions given one with ``ad.define_rule`` it calls."""
    digest = hashlib.sha256()
    seen: set[int] = set()
    stack = [dispatcher]
    while stack:
        d = stack.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        py = d.py_func
        digest.update(py.__module__.encode() + b":" + py.__qualname__.encode() + b"\n")
        digest.update(_code_text(py))
        digest.update(repr(sorted(jit_options(d).items())).encode())
        for name in sorted(set(_names(py.__code__))):
            obj = py.__globals__.get(name)
            if isinstance(obj, CPUDispatcher):
                stack.append(obj)
            elif obj is not None:
                rule = _rule_of(obj)
                if rule is not None:
                    digest.update(repr(rule).encode())
                    original = _original_function(obj)
                    digest.update(_code_text(original))
    return digest.hexdigest()


def _original_function(obj: Any) -> Callable[..., Any]:
    f = obj
    while not isinstance(f, CPUDispatcher) and hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    return f.py_func if isinstance(f, CPUDispatcher) else f
