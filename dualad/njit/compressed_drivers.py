"""Compiled compressed Jacobians of ``@numba.njit`` functions: one direction per colour.

The driver is generated like the dense ones (:mod:`dualad.njit.drivers`): a small
``@numba.njit(cache=True)`` module in the kernel cache directory that calls the dual
version of the user's function. Here each pass seeds ``width`` columns of a given seed
matrix ``S`` (``n x (k + 1)``: the sum of the unit vectors of each colour's columns, and a
random check direction last), writes the compressed Jacobian ``J @ S`` (``m x (k + 1)``),
and, still in compiled code, reads every nonzero of the pattern from it (``data[p] =
JS[rows[p], colour of cols[p]]``) and compares ``J @ r`` two ways: from the check
direction and from the decompressed nonzeros. The caller gets the CSR data and a flag.

Example:
    >>> src = compressed_driver_source(nargs=2, index=0, width=4)
    >>> "def run(a0, p0, q0, a1, S, take, rows, r_cols, data):" in src
    True
"""

from __future__ import annotations

import hashlib
import sys
import threading
from typing import Any

import numba
import numpy as np

from ..derivatives.registry import import_kernel_module
from .drivers import FORMAT_VERSION, _fingerprint, _importable
from .recompile import dual_version
from .rule_overloads import rule_fingerprint

__all__ = ["CHECK_RTOL", "compressed_driver", "compressed_driver_source"]

#: Relative tolerance of the in-driver pattern check (as ``dualad.sparse.compressed``).
CHECK_RTOL = 1e-9

_HEADER = '''"""Compiled dualad compressed-Jacobian driver for {qualname} (generated; safe to delete)."""
import numba
import numpy as np

from dualad.njit.dual_type import dual_array_maker
from dualad.njit.outputs import layout_size, output_size, write_layout, write_output

make_input = dual_array_maker({width}, True)
user = None  # the dual version of the user's function, set before the first call
'''


def compressed_driver_source(*, nargs: int, index: int, width: int,
                             lifted: tuple[int, ...] = (), qualname: str = "f",
                             cache: bool = True, rtol: float = CHECK_RTOL) -> str:
    """Source of a driver module whose ``run`` returns ``(res, ok)``.

    ``run``'s parameters: each argument ``a{k}`` (after the differentiated array
    ``a{index}`` its partials buffer ``p`` and the same buffer as ``(n, width)``, ``q``;
    after a lifted float array its zero partials ``z{k}``), then ``S`` (the ``n x K`` seed
    matrix, ``K = k + 1``), ``take`` (where each nonzero sits in the compressed ``m x K``
    result), ``rows`` and ``r_cols`` (each nonzero's row, and the check direction at its
    column) and ``data`` (written). ``res`` is laid out as the dense drivers' result
    (layout code, values, then the compressed Jacobian); ``ok`` is the check.
    """
    params = []
    for k in range(nargs):
        params.append(f"a{k}")
        if k == index:
            params += [f"p{k}", f"q{k}"]
        if k in lifted:
            params.append(f"z{k}")
    params += ["S", "take", "rows", "r_cols", "data"]
    call = ", ".join(f"d{k}" if k == index or k in lifted else f"a{k}" for k in range(nargs))
    make = [f"        d{index} = make_input(a{index}, p{index})"]
    make += [f"        d{k} = make_input(a{k}, z{k})" for k in lifted]
    lines = [
        _HEADER.format(qualname=qualname, width=width), "",
        f"@numba.njit(cache={cache})",
        f"def run({', '.join(params)}):",
        f"    P = q{index}",
        "    n = S.shape[0]",
        "    K = S.shape[1]",
        f"    W = {width}",
        "    res = np.empty(0)",
        "    joff = 0",
        "    for start in range(0, K, W):",
        "        w = min(W, K - start)",
        "        for i in range(n):",
        "            for j in range(w):",
        "                P[i, j] = S[i, start + j]",
        "            for j in range(w, W):",
        "                P[i, j] = 0.0",
        *make,
        f"        out = user({call})",
        "        if start == 0:",
        "            m = output_size(out)",
        "            L = layout_size(out)",
        "            res = np.empty(1 + L + m + m * K)",
        "            res[0] = L",
        "            write_layout(out, res, 1)",
        "            joff = 1 + L + m",
        "        write_output(out, res, 1 + int(res[0]), joff, 0, start, w, K)",
        "    m = (res.shape[0] - joff) // K",
        "    product = np.zeros(m)",
        "    scale = np.zeros(m)",
        "    for p in range(take.shape[0]):",
        "        v = res[joff + take[p]]",
        "        data[p] = v",
        "        t = v * r_cols[p]",
        "        product[rows[p]] += t",
        "        scale[rows[p]] += abs(t)",
        "    ok = True",
        "    for i in range(m):",
        "        direct = res[joff + i * K + K - 1]",
        "        diff = abs(direct - product[i])",
        f"        if not diff <= {rtol!r} * (scale[i] + abs(direct)) + 1e-300:",
        "            if not (direct != direct and product[i] != product[i]) "
        "and direct != product[i]:",
        "                ok = False",
        "    return res, ok",
    ]
    return "\n".join(lines) + "\n"


_lock = threading.Lock()
_DRIVERS: dict[tuple, Any] = {}


def compressed_driver(dispatcher: Any, *, nargs: int, index: int, width: int,
                      lifted: tuple[int, ...] = ()) -> Any:
    """The compiled ``run`` of a compressed driver for ``dispatcher`` (made once)."""
    rules = rule_fingerprint()
    key = (id(dispatcher), nargs, index, width, lifted, rules)
    with _lock:
        entry = _DRIVERS.get(key)
        if entry is not None and entry[0] is dispatcher:
            return entry[1]
        qualname = getattr(dispatcher.py_func, "__qualname__", "f")
        cache = _importable(dispatcher.py_func)
        source = compressed_driver_source(nargs=nargs, index=index, width=width,
                                          lifted=lifted, qualname=qualname, cache=cache)
        digest = hashlib.sha256()
        for part in (FORMAT_VERSION, numba.__version__, np.__version__, sys.version,
                     _fingerprint(dispatcher), rules, source):
            digest.update(part.encode() + b"\0")
        modname = f"dualad_njit_sparse_{digest.hexdigest()[:24]}"
        module = import_kernel_module(source, modname, subdirectory="njit")
        module.user = dual_version(dispatcher)
        _DRIVERS[key] = (dispatcher, module.run)
        return module.run
