"""Reading a compiled function's output: values, partial columns and the tree layout.

The compiled drivers flatten whatever the user's function returns — a dual number, an
array of them, a plain number or float array (no dependence on the input), or a tuple of
these — into a value vector, the rows of a Jacobian block, and an int64 *layout* from
which :func:`decode_layout` rebuilds the shapes and the tuple structure in Python.

Layout code: a leaf is ``[ndim, dim0, ...]``; a tuple is ``[-1, len, children...]``.

Example:
    >>> decode_layout([-1, 2, 1, 3, 0])
    ('tuple', [('leaf', (3,)), ('leaf', ())])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numba import types
from numba.extending import overload

from .dual_type import OVERLOAD_OPTIONS, DualArrayType, DualType, user_error

__all__ = ["decode_layout", "layout_size", "output_size", "write_layout", "write_output"]


def output_size(out):  # pragma: no cover - replaced by its overload in compiled code
    """Number of scalars in ``out``."""
    raise NotImplementedError


def write_output(out, res, voff, joff, row, col, width, n):  # pragma: no cover
    """Write ``out``'s values at ``res[voff + row:]`` and partials ``0..width-1`` into the
    Jacobian flattened at ``res[joff:]`` (``n`` columns), at rows ``row..`` and columns
    ``col..col+width``; return the next row."""
    raise NotImplementedError


def layout_size(out):  # pragma: no cover
    """Length of ``out``'s layout code."""
    raise NotImplementedError


def write_layout(out, code, pos):  # pragma: no cover
    """Write ``out``'s layout code at ``code[pos:]``; return the next position."""
    raise NotImplementedError


def _plain_array(t: types.Type) -> bool:
    return isinstance(t, types.Array) and isinstance(t.dtype, (types.Float, types.Integer,
                                                               types.Boolean))


def _unsupported(out: types.Type) -> Exception:
    return user_error(
        f"the function returns {out}; return a number, a numpy array, or a tuple of these"
    )


def _tuple_source(name: str, params: str, call: str, n: int, first: str, ret: str) -> Any:
    lines = [f"def tuple_{name}({params}):", f"    {first}"]
    for i in range(n):
        lines.append(f"    {call.format(i=i)}")
    lines.append(f"    return {ret}")
    ns = {"output_size": output_size, "write_output": write_output,
          "layout_size": layout_size, "write_layout": write_layout}
    exec(compile("\n".join(lines) + "\n", f"<dualad njit {name}>", "exec"), ns)  # noqa: S102
    return ns[f"tuple_{name}"]


@overload(output_size, jit_options=OVERLOAD_OPTIONS)
def _output_size(out):
    if isinstance(out, (DualType, types.Number, types.Boolean)):
        return lambda out: 1
    if isinstance(out, DualArrayType):
        return lambda out: out.values.size
    if _plain_array(out):
        return lambda out: out.size
    if isinstance(out, types.BaseTuple):
        return _tuple_source("output_size", "out", "n += output_size(out[{i}])",
                             len(out.types), "n = 0", "n")
    raise _unsupported(out)


@overload(write_output, jit_options=OVERLOAD_OPTIONS)
def _write_output(out, res, voff, joff, row, col, width, n):
    if isinstance(out, DualType):
        def impl(out, res, voff, joff, row, col, width, n):
            res[voff + row] = out.v
            p = out.p
            base = joff + row * n + col
            for j in range(width):
                res[base + j] = p[j]
            return row + 1
        return impl
    if isinstance(out, (types.Number, types.Boolean)):
        def impl(out, res, voff, joff, row, col, width, n):
            res[voff + row] = out
            base = joff + row * n + col
            for j in range(width):
                res[base + j] = 0.0
            return row + 1
        return impl
    if isinstance(out, DualArrayType) and out.ndim == 1:
        def impl(out, res, voff, joff, row, col, width, n):
            v = out.values
            p = out.partials
            for i in range(v.shape[0]):
                res[voff + row + i] = v[i]
                base = joff + (row + i) * n + col
                for j in range(width):
                    res[base + j] = p[i, j]
            return row + v.shape[0]
        return impl
    if isinstance(out, DualArrayType):
        def impl(out, res, voff, joff, row, col, width, n):
            size = out.values.size
            v = out.values.reshape(size)
            p = out.partials.reshape(size, out.partials.shape[-1])
            for i in range(size):
                res[voff + row + i] = v[i]
                base = joff + (row + i) * n + col
                for j in range(width):
                    res[base + j] = p[i, j]
            return row + size
        return impl
    if _plain_array(out):
        def impl(out, res, voff, joff, row, col, width, n):
            size = out.size
            v = out.ravel()
            for i in range(size):
                res[voff + row + i] = v[i]
                base = joff + (row + i) * n + col
                for j in range(width):
                    res[base + j] = 0.0
            return row + size
        return impl
    if isinstance(out, types.BaseTuple):
        return _tuple_source(
            "write_output", "out, res, voff, joff, row, col, width, n",
            "row = write_output(out[{i}], res, voff, joff, row, col, width, n)",
            len(out.types), "pass", "row",
        )
    raise _unsupported(out)


def _ndim(out: types.Type) -> int | None:
    if isinstance(out, (DualType, types.Number, types.Boolean)):
        return 0
    if isinstance(out, (DualArrayType, types.Array)):
        return out.ndim
    return None


@overload(layout_size, jit_options=OVERLOAD_OPTIONS)
def _layout_size(out):
    nd = _ndim(out)
    if nd is not None:
        return lambda out: 1 + nd
    if isinstance(out, types.BaseTuple):
        return _tuple_source("layout_size", "out", "n += layout_size(out[{i}])",
                             len(out.types), "n = 2", "n")
    raise _unsupported(out)


@overload(write_layout, jit_options=OVERLOAD_OPTIONS)
def _write_layout(out, code, pos):
    nd = _ndim(out)
    if nd == 0:
        def impl(out, code, pos):
            code[pos] = 0
            return pos + 1
        return impl
    if nd is not None:
        def impl(out, code, pos):
            shape = out.shape
            code[pos] = len(shape)
            for d in range(len(shape)):
                code[pos + 1 + d] = shape[d]
            return pos + 1 + len(shape)
        return impl
    if isinstance(out, types.BaseTuple):
        n = len(out.types)
        return _tuple_source(
            "write_layout", "out, code, pos", "pos = write_layout(out[{i}], code, pos)",
            n, f"code[pos] = -1; code[pos + 1] = {n}; pos += 2", "pos",
        )
    raise _unsupported(out)


def decode_layout(code: Sequence[int]) -> Any:
    """The output tree: ``('leaf', shape)`` or ``('tuple', [children])``."""
    code = [int(c) for c in code]

    def read(pos: int) -> tuple[Any, int]:
        head = code[pos]
        if head >= 0:
            return ("leaf", tuple(code[pos + 1: pos + 1 + head])), pos + 1 + head
        n = code[pos + 1]
        pos += 2
        children = []
        for _ in range(n):
            child, pos = read(pos)
            children.append(child)
        return ("tuple", children), pos

    tree, _ = read(0)
    return tree
