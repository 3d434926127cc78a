"""Sparsity detection through ``@numba.njit`` functions: their Python source on index sets.

A Numba dispatcher keeps the plain Python function it compiles (``py_func``). Detection
runs that function on sparsity tracers, with the ``@njit`` helpers it names (globals or
closure variables) replaced by their own Python versions (recursively) and the ``math`` module by numpy's ufuncs of the
same names (``math.sin(x[i])`` would convert the tracer to a float); ``np.zeros`` /
``np.empty`` / ``np.ones`` / ``np.full`` give buffers that traced entries can be written
into (as compiled dual code may allow). Loop-style code then
takes the tracer's scalar fast path, so a loop over a few thousand entries is detected in
milliseconds; compiled code is not involved.

Example:
    >>> import numba, numpy as np
    >>> from dualad.sparsity.detection import jacobian_sparsity
    >>> @numba.njit
    ... def shift(x):
    ...     out = np.empty_like(x)
    ...     for i in range(x.shape[0]):
    ...         out[i] = x[i - 1] * x[i]
    ...     return out
    >>> jacobian_sparsity(shift)(np.ones(3)).toarray().astype(int)
    array([[1, 0, 1],
           [1, 1, 0],
           [0, 1, 1]])
"""

from __future__ import annotations

import math
import threading
import types
from typing import Any

import numpy as np

from ..njit import is_njit
from .flows import CURRENT_TRACE, SparsityTracer
from .index_sets import IndexSets

__all__ = ["python_version"]

_MATH_AS_NUMPY = {
    name: getattr(np, numpy_name)
    for name, numpy_name in (
        ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("asin", "arcsin"),
        ("acos", "arccos"), ("atan", "arctan"), ("atan2", "arctan2"), ("sinh", "sinh"),
        ("cosh", "cosh"), ("tanh", "tanh"), ("asinh", "arcsinh"), ("acosh", "arccosh"),
        ("atanh", "arctanh"), ("exp", "exp"), ("expm1", "expm1"), ("log", "log"),
        ("log1p", "log1p"), ("log2", "log2"), ("log10", "log10"), ("sqrt", "sqrt"),
        ("pow", "power"), ("fabs", "abs"), ("hypot", "hypot"), ("floor", "floor"),
        ("ceil", "ceil"), ("copysign", "copysign"), ("erf", None), ("erfc", None),
        ("cbrt", "cbrt"), ("exp2", "exp2"),
    )
    if numpy_name is not None
}


def _numpy_allocation(func: Any) -> Any:
    """``np.zeros`` & co. that, during a detection, give a tracer whose entries depend on
    nothing (so the loop may write traced entries into it, as compiled code may)."""
    def allocate(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        trace = CURRENT_TRACE.get()
        if trace is None or not isinstance(out, np.ndarray) or out.dtype.kind != "f":
            return out
        return SparsityTracer(out, IndexSets.empty(out.size, trace.n), trace)

    allocate.__name__ = func.__name__
    return allocate


def _numpy_module() -> types.SimpleNamespace:
    names = {k: getattr(np, k) for k in dir(np) if not k.startswith("__")}
    for name in ("zeros", "empty", "ones", "full"):
        names[name] = _numpy_allocation(getattr(np, name))
    return types.SimpleNamespace(**names)


def _math_module() -> types.SimpleNamespace:
    names = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}
    names.update(_MATH_AS_NUMPY)
    return types.SimpleNamespace(**names)


_lock = threading.Lock()
_VERSIONS: dict[int, tuple[Any, Any]] = {}


def python_version(f: Any) -> Any:
    """``f``'s Python function with its ``@njit`` helpers (and ``math``) swapped for
    versions that run on sparsity tracers; ``f`` itself when it is not ``@njit``."""
    if not is_njit(f):
        return f
    with _lock:
        entry = _VERSIONS.get(id(f))
        if entry is not None and entry[0] is f:
            return entry[1]
    py = f.py_func
    shim = (_math_module(), _numpy_module())
    namespace = dict(py.__globals__)
    cells = [types.CellType() for _ in py.__closure__ or ()]
    rewritten = types.FunctionType(py.__code__, namespace, py.__name__, py.__defaults__,
                                   tuple(cells) if py.__closure__ else None)
    rewritten.__kwdefaults__ = py.__kwdefaults__
    rewritten.__qualname__ = py.__qualname__
    with _lock:
        _VERSIONS[id(f)] = (f, rewritten)  # before the helpers: recursion ends here
    for name in py.__code__.co_names:
        if name in namespace:
            namespace[name] = _swapped(namespace[name], shim)
    for cell, old in zip(cells, py.__closure__ or ()):
        try:
            cell.cell_contents = _swapped(old.cell_contents, shim)
        except ValueError:  # an empty cell (a name bound later): left empty
            pass
    return rewritten


def _swapped(value: Any, shim: Any) -> Any:
    """What a global or closure variable of an ``@njit`` function becomes for detection."""
    if value is math:
        return shim[0]
    if value is np:
        return shim[1]
    if getattr(value, "__module__", None) == "math" and \
            getattr(value, "__name__", None) in _MATH_AS_NUMPY:
        return _MATH_AS_NUMPY[value.__name__]
    if is_njit(value):
        return python_version(value)
    return value
