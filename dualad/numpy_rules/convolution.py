"""Rules for ``np.convolve``, ``np.correlate`` and ``sliding_window_view``.

``convolve`` is written as a sum of shifted copies of the longer operand, one per entry of
the shorter one (``len(short)`` operations of ``len(long)`` entries each), ``correlate`` as
the convolution with the reversed conjugate, and ``sliding_window_view`` as an index map
(fancy indexing): all with calls that have rules of their own, which gives both modes,
complex operands, every order and the sparsity flow
(:func:`~dualad.numpy_rules._support.composite_rules`). The modes ``"full"``, ``"same"``
and ``"valid"`` return what numpy returns (numpy's swap of the operands included).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.jacobian(lambda v: np.convolve([1.0, 2.0, 3.0], v))(np.ones(2))
    array([[1., 0.],
           [2., 1.],
           [3., 2.],
           [0., 3.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..extend import declare_index_map, note_linear, shape_of
from ._support import composite_rules

__all__: list[str] = []


def _as_vector(x: Any, fname: str, name: str) -> Any:
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    shape = shape_of(x)
    if len(shape) > 1:
        raise ValueError(f"np.{fname}: {name} must be 1-D (got shape {shape})")
    if len(shape) == 0:
        x = np.reshape(x, (1,))
    if shape_of(x)[0] == 0:
        raise ValueError(f"np.{fname}: {name} cannot be empty")
    return x


def _full_convolution(a: Any, v: Any) -> Any:
    """``out[k] = sum_i a[i] v[k - i]`` as a sum of shifted copies of the longer operand."""
    long, short = (a, v) if shape_of(a)[0] >= shape_of(v)[0] else (v, a)
    m = shape_of(short)[0]
    zeros = np.zeros(m - 1)
    out = None
    for j in range(m):
        shifted = np.concatenate([zeros[:j], long, zeros[:m - 1 - j]])
        term = short[j] * shifted
        out = term if out is None else out + term
    return out


def _window(full: Any, n: int, m: int, mode: str, fname: str, start_same: int) -> Any:
    if mode == "full":
        return full
    if mode == "same":
        return full[start_same:start_same + max(n, m)]
    if mode == "valid":
        start = min(n, m) - 1
        return full[start:start + max(n, m) - min(n, m) + 1]
    raise ValueError(f"np.{fname}: mode must be 'full', 'same' or 'valid' (got {mode!r})")


def _convolve(a: Any, v: Any, mode: str = "full") -> Any:
    a, v = _as_vector(a, "convolve", "a"), _as_vector(v, "convolve", "v")
    n, m = shape_of(a)[0], shape_of(v)[0]
    full = _full_convolution(a, v)
    return _window(full, n, m, mode, "convolve", (min(n, m) - 1) // 2)


def _correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    a, v = _as_vector(a, "correlate", "a"), _as_vector(v, "correlate", "v")
    n, m = shape_of(a)[0], shape_of(v)[0]
    full = _full_convolution(a, np.conj(v[::-1]))
    # numpy correlates the longer operand with the shorter one and reverses when it swaps
    start = (m - 1) // 2 if n >= m else (n - 1) - (n - 1) // 2
    return _window(full, n, m, mode, "correlate", start)


def _sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *,
                         subok: bool = False, writeable: bool = False) -> Any:
    if writeable:
        raise ValueError("dualad: sliding_window_view(..., writeable=True) of a traced "
                         "array cannot be written through; build the result with "
                         "np.concatenate or np.where instead.")
    shape = shape_of(x)
    index = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    return np.reshape(x, (-1,))[sliding_window_view(index, window_shape, axis)]


def _both(args: tuple, kwargs: dict) -> list[int]:
    """The operands, unless given as lists (lists of numbers are constants)."""
    return [i for i in (0, 1) if i < len(args) and not isinstance(args[i], (list, tuple))]


def _first(args: tuple, kwargs: dict) -> list[int]:
    return [0]


def _window_start(fname: str, n: int, m: int, mode: str) -> tuple[int, int]:
    """Where numpy's ``mode`` window starts in the full result, and its length."""
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        if fname == "correlate" and n < m:
            return (n - 1) - (n - 1) // 2, max(n, m)
        return (min(n, m) - 1) // 2, max(n, m)
    return min(n, m) - 1, max(n, m) - min(n, m) + 1


def _plain_gradient(fname: str, grad: Any, a: Any, v: Any, mode: str) -> tuple | None:
    """The gradients of a call on plain arrays by numpy's own convolutions (transposes:
    the full result's cotangent convolved with the other operand reversed), or None."""
    if not all(isinstance(x, np.ndarray) for x in (grad, a, v)) or a.ndim > 1 or v.ndim > 1:
        return None
    va, vv = np.reshape(a, (-1,)), np.reshape(v, (-1,))
    n, m = va.size, vv.size
    start, length = _window_start(fname, n, m, mode)
    g_full = np.zeros(n + m - 1, dtype=np.result_type(grad, va, vv))
    g_full[start:start + length] = grad
    other = vv if fname == "convolve" else np.conj(vv[::-1])
    ga = np.convolve(g_full, other[::-1], "valid")
    gv = np.convolve(g_full, va[::-1], "valid")
    if fname == "correlate":
        gv = np.conj(gv)[::-1]
    return np.reshape(ga, a.shape), np.reshape(gv, v.shape)


def _convolution_rules(func: Any, impl: Any) -> None:
    """Composite rules from ``impl`` (tangents, sparsity, nested gradients), with the
    gradient of a call on plain arrays by numpy's own convolutions (no reverse pass
    through ``impl``: measured in ``benchmarks/coverage.py``)."""
    fname = func.__name__

    def direct(grad: Any, args: tuple, kwargs: dict, chosen: list[int]) -> tuple | None:
        mode = kwargs.get("mode", args[2] if len(args) > 2 else
                          ("full" if fname == "convolve" else "valid"))
        if len(args) < 2 or mode not in ("full", "same", "valid"):
            return None
        plain = _plain_gradient(fname, grad, args[0], args[1], mode)
        if plain is None:
            return None
        return tuple(plain[i] if i in chosen else None for i in range(2)) + \
            (None,) * (len(args) - 2)

    composite_rules(func, impl, _both, direct_gradient=direct)


_convolution_rules(np.convolve, _convolve)
_convolution_rules(np.correlate, _correlate)
# linear in either operand while the other is a constant (for compilers: a banded matrix)
note_linear(np.convolve, np.correlate, args=(0, 1))
# sliding_window_view only moves entries: its flow is the function applied to indices
declare_index_map(sliding_window_view)
composite_rules(sliding_window_view, _sliding_window_view, _first)
