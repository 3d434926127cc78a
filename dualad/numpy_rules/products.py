"""Rules for products: matmul, dot, vdot, inner, outer, tensordot, kron, cross, trace, ...

``matmul`` has hand-written gradients for every operand rank (1-D, 2-D, batched with
broadcast batch dimensions). The other products are written as one einsum each (see
:class:`~dualad.numpy_rules.contractions.Contraction`), which gives both their gradients
and their tangents: ``dot`` of N-D by M-D operands, ``tensordot`` with every ``axes``
form, ``kron`` (an outer product reshaped), ``cross`` (a contraction with the
Levi-Civita tensor; 2-vectors are embedded in 3-D by a constant matrix), and numpy 2's
``matvec``, ``vecmat``, ``vecdot`` and the ``np.linalg`` spellings.

Example:
    >>> import numpy as np, dualad as ad
    >>> a, b = np.ones((2, 3)), np.arange(12.0).reshape(3, 4)
    >>> ad.grad(lambda a: np.trace(a @ b[:, :2]))(a)
    array([[0., 4., 8.],
           [1., 5., 9.]])
    >>> ad.grad(lambda a: np.einsum("ij,jk->", a, b))(a)
    array([[ 6., 22., 38.],
           [ 6., 22., 38.]])
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_composite,
    declare_contraction,
    declare_probed,
    gradients_needed,
    innermost_tag,
    note_linear,
    shape_of,
    tangent_parts,
    unbroadcast,
)
from ._signatures import bind
from ._support import (
    dual_or_value,
    gradient_rule,
    is_plain_array,
    ndim_of,
    normalize_axis,
    split_duals,
    tangent_rule,
    unsupported_tangent,
)
from .complex_parts import is_complex
from .contractions import Contraction, contraction_rules, parse_einsum

__all__ = ["matmul_gradients"]

_L = "abcdefghijklmnopqrstuvwxyz"
_U = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def matmul_gradients(grad: Any, a: Any, b: Any,
                     needs: list[bool] | None = None) -> tuple[Any, Any]:
    """Gradients of ``a @ b`` for 1-D, 2-D and batched (broadcast) operands.

    ``needs`` (from :func:`~dualad.reverse_mode.backward.gradients_needed`) skips constants.
    """
    if type(a) is np.ndarray and type(b) is np.ndarray and type(grad) is np.ndarray \
            and a.ndim == 2 and b.ndim == 2:  # the common case, without helper calls
        if needs is None or (needs[0] and needs[1]):
            return grad @ b.T, a.T @ grad
        return (grad @ b.T if needs[0] else None), (a.T @ grad if needs[1] else None)
    if needs is not None and not (needs[0] and needs[1]):
        ga = gb = None
        if needs[0]:
            ga = _matmul_left(grad, a, b)
        if needs[1]:
            gb = _matmul_right(grad, a, b)
        return ga, gb
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) == 1 and len(sb) == 1:
        return grad * b, grad * a
    if len(sa) == 1:  # (n) @ (..., n, m) -> (..., m)
        ga = np.matmul(b, np.expand_dims(grad, -1))[..., 0]
        gb = np.expand_dims(a, -1) * np.expand_dims(grad, -2)
        return unbroadcast(ga, sa), unbroadcast(gb, sb)
    if len(sb) == 1:  # (..., n, m) @ (m) -> (..., n)
        ga = np.expand_dims(grad, -1) * b
        gb = np.matmul(_mT(a), np.expand_dims(grad, -1))[..., 0]
        return unbroadcast(ga, sa), unbroadcast(gb, sb)
    return unbroadcast(np.matmul(grad, _mT(b)), sa), unbroadcast(np.matmul(_mT(a), grad), sb)


def _matmul_left(grad: Any, a: Any, b: Any) -> Any:
    """The gradient of ``a @ b`` w.r.t. ``a`` alone."""
    if type(b) is np.ndarray and type(grad) is np.ndarray and b.ndim == 2 and \
            np.ndim(a) == 2:
        return grad @ b.T
    return matmul_gradients(grad, a, b)[0]


def _matmul_right(grad: Any, a: Any, b: Any) -> Any:
    """The gradient of ``a @ b`` w.r.t. ``b`` alone."""
    if type(a) is np.ndarray and type(grad) is np.ndarray and a.ndim == 2 and \
            np.ndim(b) == 2:
        return a.T @ grad
    return matmul_gradients(grad, a, b)[1]


@gradient_rule(np.matmul, np.linalg.matmul)
def _matmul(grad: Any, output: Any, a: Any, b: Any, **kwargs: Any) -> tuple:
    needs = gradients_needed()
    if kwargs and (kwargs.get("axes") is not None or kwargs.get("axis") is not None):
        raise NotImplementedError("dualad: np.matmul(..., axes=) is not differentiable yet; "
                                  "move the axes with np.moveaxis first.")
    return matmul_gradients(grad, a, b, needs)


@tangent_rule(np.linalg.matmul, duals=(0, 1))
def _linalg_matmul(a: Any, b: Any) -> Any:
    return np.matmul(a, b)


# -- dot, vdot, inner, outer, tensordot --------------------------------------------------


def _scaled(na: int, nb: int) -> Contraction:
    """``a * b`` where one operand is 0-d."""
    if na == 0:
        return Contraction(["", _L[:nb]], _L[:nb])
    return Contraction([_L[:na], ""], _L[:na])


def _dot_contraction(a: Any, b: Any, out: Any = None) -> tuple[Contraction, list[int]]:
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return _scaled(na, nb), [0, 1]
    sa = _L[: na - 1] + "z"
    if nb == 1:
        return Contraction([sa, "z"], sa[:-1]), [0, 1]
    sb = _U[: nb - 2] + "zy"
    return Contraction([sa, sb], sa[:-1] + sb[:-2] + "y"), [0, 1]


@gradient_rule(np.dot)
def _dot(grad: Any, output: Any, a: Any, b: Any, *args: Any):
    needs = gradients_needed()
    na, nb = ndim_of(a), ndim_of(b)
    if 0 < nb <= 2 and na > 0:
        return matmul_gradients(grad, a, b, needs) + (None,) * len(args)
    con, _ = _dot_contraction(a, b)
    return tuple(con.gradients(grad, [a, b])) + (None,) * len(args)


def _inner_contraction(a: Any, b: Any) -> tuple[Contraction, list[int]]:
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return _scaled(na, nb), [0, 1]
    sa, sb = _L[: na - 1] + "z", _U[: nb - 1] + "z"
    return Contraction([sa, sb], sa[:-1] + sb[:-1]), [0, 1]


def _outer_contraction(a: Any, b: Any, out: Any = None) -> tuple[Contraction, list[int]]:
    na, nb = shape_of(a), shape_of(b)
    size_a = int(np.prod(na, dtype=np.int64))
    size_b = int(np.prod(nb, dtype=np.int64))
    return Contraction(["i", "j"], "ij", [("reshape", (size_a,)), ("reshape", (size_b,))]), [0, 1]


def _linalg_outer_contraction(a: Any, b: Any) -> tuple[Contraction, list[int]]:
    if ndim_of(a) != 1 or ndim_of(b) != 1:
        raise ValueError(f"np.linalg.outer: both operands must be 1-D, got shapes "
                         f"{shape_of(a)} and {shape_of(b)}")
    return Contraction(["i", "j"], "ij"), [0, 1]


def _vdot_contraction(a: Any, b: Any) -> tuple[Contraction, list[int]]:
    size_a = int(np.prod(shape_of(a), dtype=np.int64))
    size_b = int(np.prod(shape_of(b), dtype=np.int64))
    return Contraction(["i", "i"], "", [("reshape", (size_a,)), ("reshape", (size_b,))]), [0, 1]


def _tensordot_axes(axes: Any, na: int, nb: int) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(na, nb):
            raise ValueError(f"np.tensordot: axes={n} is out of range for operands of "
                             f"{na} and {nb} dimensions")
        return list(range(na - n, na)), list(range(n))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise ValueError("np.tensordot: the two axes lists must have the same length")
    return ([normalize_axis(i, na, "tensordot") for i in ax_a],
            [normalize_axis(i, nb, "tensordot") for i in ax_b])


def _tensordot_contraction(a: Any, b: Any, axes: Any = 2) -> tuple[Contraction, list[int]]:
    na, nb = ndim_of(a), ndim_of(b)
    ax_a, ax_b = _tensordot_axes(axes, na, nb)
    sa = list(_L[:na])
    sb = list(_U[:nb])
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = "".join(c for i, c in enumerate(sa) if i not in ax_a) + \
        "".join(c for j, c in enumerate(sb) if j not in ax_b)
    return Contraction(["".join(sa), "".join(sb)], out), [0, 1]


def _kron_contraction(a: Any, b: Any) -> tuple[Contraction, list[int]]:
    sa, sb = tuple(shape_of(a)), tuple(shape_of(b))
    nd = max(len(sa), len(sb))
    pa = (1,) * (nd - len(sa)) + sa
    pb = (1,) * (nd - len(sb)) + sb
    la, lb = _L[:nd], _U[:nd]
    out = "".join(x + y for x, y in zip(la, lb))
    prepare = [("reshape", pa) if pa != sa else None, ("reshape", pb) if pb != sb else None]
    return Contraction([la, lb], out, prepare,
                       result_shape=tuple(x * y for x, y in zip(pa, pb))), [0, 1]


def _shaped(shape: tuple[int, ...]) -> SimpleNamespace:
    """A stand-in with only a ``shape`` (for parsing subscripts)."""
    return SimpleNamespace(shape=tuple(shape))


def _moved(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """``shape`` with ``axis`` moved to the end."""
    shape = tuple(shape)
    return shape[:axis] + shape[axis + 1:] + (shape[axis],)


def _levi_civita() -> np.ndarray:
    eps = np.zeros((3, 3, 3))
    eps[0, 1, 2] = eps[1, 2, 0] = eps[2, 0, 1] = 1.0
    eps[0, 2, 1] = eps[2, 1, 0] = eps[1, 0, 2] = -1.0
    return eps


_EPS = _levi_civita()
_EMBED = np.eye(2, 3)  # a 2-vector as a 3-vector with zero z
_Z = np.array([0.0, 0.0, 1.0])


def _cross_contraction(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
                       axis: Any = None) -> tuple[Contraction, list[int]]:
    if axis is not None:
        axisa = axisb = axisc = axis
    na, nb = ndim_of(a), ndim_of(b)
    ax_a, ax_b = normalize_axis(axisa, na, "cross"), normalize_axis(axisb, nb, "cross")
    da, db = shape_of(a)[ax_a], shape_of(b)[ax_b]
    if da not in (2, 3) or db not in (2, 3):
        raise ValueError(f"np.cross: vectors must have 2 or 3 components, got {da} and {db}")
    prepare = [("moveaxis", ax_a, na - 1) if ax_a != na - 1 else None,
               ("moveaxis", ax_b, nb - 1) if ax_b != nb - 1 else None]
    specs = ["...p" if da == 2 else "...i", "...q" if db == 2 else "...j"]
    consts: list[np.ndarray] = []
    if da == 2:
        specs.append("pi")
        consts.append(_EMBED)
    if db == 2:
        specs.append("qj")
        consts.append(_EMBED)
    specs.append("ijk")
    consts.append(_EPS)
    if da == 2 and db == 2:
        specs.append("k")
        consts.append(_Z)
        out_spec, move = "...", None
    else:
        out_spec = "...k"
        batch = len(np.broadcast_shapes(shape_of(a)[:ax_a] + shape_of(a)[ax_a + 1:],
                                        shape_of(b)[:ax_b] + shape_of(b)[ax_b + 1:]))
        ax_c = normalize_axis(axisc, batch + 1, "cross")
        move = (batch, ax_c) if ax_c != batch else None
    shapes = [_shaped(_moved(shape_of(a), ax_a)), _shaped(_moved(shape_of(b), ax_b))] + consts
    parsed, out = parse_einsum(",".join(specs) + "->" + out_spec, shapes)
    return Contraction(parsed, out, prepare, consts, result_move=move), [0, 1]


def _matvec_contraction(x1: Any, x2: Any, **kwargs: Any) -> tuple[Contraction, list[int]]:
    _no_gufunc_axes("matvec", kwargs)
    specs, out = parse_einsum("...ij,...j->...i", [x1, x2])
    return Contraction(specs, out), [0, 1]


def _vecmat_contraction(x1: Any, x2: Any, **kwargs: Any) -> tuple[Contraction, list[int]]:
    _no_gufunc_axes("vecmat", kwargs)
    specs, out = parse_einsum("...j,...jk->...k", [x1, x2])
    return Contraction(specs, out), [0, 1]


def _vecdot_contraction(x1: Any, x2: Any, axis: int = -1, **kwargs: Any
                        ) -> tuple[Contraction, list[int]]:
    _no_gufunc_axes("vecdot", kwargs)
    n1, n2 = ndim_of(x1), ndim_of(x2)
    a1, a2 = normalize_axis(axis, n1, "vecdot"), normalize_axis(axis, n2, "vecdot")
    prepare = [("moveaxis", a1, n1 - 1) if a1 != n1 - 1 else None,
               ("moveaxis", a2, n2 - 1) if a2 != n2 - 1 else None]
    shapes = [_shaped(_moved(shape_of(x1), a1)), _shaped(_moved(shape_of(x2), a2))]
    specs, out = parse_einsum("...i,...i->...", shapes)
    return Contraction(specs, out, prepare), [0, 1]


def _no_gufunc_axes(name: str, kwargs: dict) -> None:
    extra = {k for k, v in kwargs.items() if v is not None and k not in ("dtype", "casting")}
    if extra:
        raise NotImplementedError(
            f"dualad: np.{name} with {sorted(extra)} is not differentiable yet; move the "
            f"axes with np.moveaxis and call it without them."
        )


class _ConjugateFirst:
    """A contraction whose first operand is conjugated first (``vdot``, ``vecdot``,
    ``vecmat``): conj is its own adjoint under the pairing ``Re(sum(g * dz))``."""

    def __init__(self, con: Contraction) -> None:
        self.con = con

    def gradients(self, grad: Any, operands: Sequence[Any], wanted: Any = None) -> list:
        if not is_complex(operands[0]):
            return self.con.gradients(grad, operands, wanted)
        ops = [np.conj(operands[0])] + list(operands[1:])
        grads = list(self.con.gradients(grad, ops, wanted))
        if grads[0] is not None:
            grads[0] = np.conj(grads[0])
        return grads

    def value_and_tangent(self, values: Sequence[Any], partials: Sequence[Any]) -> tuple:
        values, partials = list(values), list(partials)
        if is_complex(values[0]):
            values[0] = np.conj(values[0])
            if partials[0] is not None:
                partials[0] = np.conj(partials[0])
        return self.con.value_and_tangent(values, partials)


def _conjugating_first(build: Any) -> Any:
    def conjugating(*args: Any, **kwargs: Any) -> tuple[Any, list[int]]:
        con, positions = build(*args, **kwargs)
        return _ConjugateFirst(con), positions
    return conjugating


contraction_rules([np.vdot], _conjugating_first(_vdot_contraction))
contraction_rules([np.inner], _inner_contraction)
contraction_rules([np.outer], _outer_contraction)
contraction_rules([np.linalg.outer], _linalg_outer_contraction)
contraction_rules([np.tensordot, np.linalg.tensordot], _tensordot_contraction)
contraction_rules([np.kron], _kron_contraction)
contraction_rules([np.cross, np.linalg.cross], _cross_contraction)
contraction_rules([np.linalg.vecdot], _conjugating_first(_vecdot_contraction))


def _gufunc_rules(ufunc: Any, build: Any) -> None:
    """Rules for a numpy 2 gufunc (reached as ``Method[ufunc]``)."""

    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        con, _ = build(*args, **kwargs)
        return tuple(con.gradients(grad, list(args)))

    def tangent_impl(*args: Any, **kwargs: Any) -> Any:
        tag = innermost_tag(args)
        con, _ = build(*args, **kwargs)
        values, partials = split_duals(args, tag)
        value, tangent = con.value_and_tangent(values, partials)
        return dual_or_value(value, tangent, tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{ufunc.__name__}"
    gradient_rule(ufunc)(grad_impl)
    tangent_rule(ufunc, duals=(0, 1), ufunc=True)(tangent_impl)


for _uf, _build in (("matvec", _matvec_contraction),
                    ("vecmat", _conjugating_first(_vecmat_contraction)),
                    ("vecdot", _conjugating_first(_vecdot_contraction))):
    if hasattr(np, _uf):
        _gufunc_rules(getattr(np, _uf), _build)


# -- trace ---------------------------------------------------------------------------------


def _trace_params(x: Any, args: tuple, kwargs: dict) -> tuple[int, int, int]:
    p = bind(("a", "offset", "axis1", "axis2"), (x,) + args, kwargs)
    ndim = ndim_of(x)
    return (int(p.get("offset", 0)), normalize_axis(p.get("axis1", 0), ndim, "trace"),
            normalize_axis(p.get("axis2", 1), ndim, "trace"))


@gradient_rule(np.trace)
def _trace(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    if not args and not kwargs and type(x) is np.ndarray and x.ndim == 2 \
            and type(grad) in (np.float64, float):
        # the common case, plain numbers: write the diagonal directly
        out = np.zeros(x.shape)
        np.fill_diagonal(out, grad)
        return (out,)
    offset, a1, a2 = _trace_params(x, args, kwargs)
    shape = shape_of(x)
    ndim = len(shape)
    eye = np.eye(shape[a1], shape[a2], k=offset)
    mask_shape = [1] * ndim
    mask_shape[a1], mask_shape[a2] = shape[a1], shape[a2]
    if a1 > a2:
        eye = eye.T
    mask = eye.reshape(mask_shape)
    kept = tuple(1 if i in (a1, a2) else n for i, n in enumerate(shape))
    return (np.reshape(grad, kept) * mask,) + (None,) * len(args)


@tangent_rule(np.trace)
def _trace_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    offset, a1, a2 = _trace_params(x, args, kwargs)
    return dual_or_value(np.trace(x.value, offset, a1, a2),
                         np.trace(x.partials, offset, a1, a2), x.tag)


@gradient_rule(np.linalg.trace)
def _linalg_trace(grad: Any, output: Any, x: Any, *, offset: int = 0, dtype: Any = None
                  ) -> tuple:
    return _trace(grad, output, x, offset, -2, -1)[:1]


@tangent_rule(np.linalg.trace)
def _linalg_trace_tangent(x: Any, *, offset: int = 0, dtype: Any = None) -> Any:
    return np.trace(x, offset, -2, -1)


# -- tangents of matmul and dot --------------------------------------------------------


def _left_term(ap: Any, bv: Any, na: int, nb: int) -> Any:
    """Partials of ``da @ b`` (``ap`` is ``shape(a) + (k,)``)."""
    if nb == 1:  # (..., m, k) -> (..., k, m) @ (m,) -> (..., k)
        return np.matmul(np.swapaxes(ap, -1, -2), bv)
    if na == 1:  # (m, k) -> (k, m) @ (..., m, p) -> (..., k, p) -> (..., p, k)
        return np.swapaxes(np.matmul(np.swapaxes(ap, -1, -2), bv), -1, -2)
    if nb == 2 and is_plain_array(ap) and is_plain_array(bv):  # (..., n, m, k) . (m, p) -> (..., n, k, p)
        return np.swapaxes(np.tensordot(ap, bv, axes=([na - 1], [0])), -1, -2)
    b = bv if nb == 2 else np.reshape(bv, shape_of(bv)[:-2] + (1,) + shape_of(bv)[-2:])
    return np.swapaxes(np.matmul(np.swapaxes(ap, -1, -2), b), -1, -2)


def _right_term(av: Any, bp: Any, nb: int, out_shape: tuple[int, ...]) -> Any:
    """Partials of ``a @ db`` (``bp`` is ``shape(b) + (k,)``)."""
    if nb == 1:  # a @ (m, k)
        return np.matmul(av, bp)
    bs = shape_of(bp)
    k = bs[-1]
    flat = np.reshape(bp, bs[:-2] + (bs[-2] * k,))
    return np.reshape(np.matmul(av, flat), out_shape + (k,))


def _product_tangent(a: Any, b: Any, fname: str) -> Any:
    tag, ((av, ap), (bv, bp)) = tangent_parts((a, b))
    y = np.matmul(av, bv)
    na, nb = ndim_of(av), ndim_of(bv)
    if na == 0 or nb == 0:
        raise ValueError(f"{fname}: operands must not be 0-d (shapes {shape_of(av)}, "
                         f"{shape_of(bv)}); use * for scalars.")
    acc = None
    if ap is not None:
        acc = _left_term(ap, bv, na, nb)
    if bp is not None:
        term = _right_term(av, bp, nb, shape_of(y))
        acc = term if acc is None else acc + term
    return Dual._make(y, acc, tag)


@tangent_rule(np.matmul, duals=(0, 1))
def _matmul(a: Any, b: Any, **kwargs: Any) -> Any:
    if kwargs:
        raise unsupported_tangent("matmul", f"keyword arguments {sorted(kwargs)}")
    return _product_tangent(a, b, "matmul")


@tangent_rule(np.dot, duals=(0, 1))
def _dot(a: Any, b: Any, out: Any = None) -> Any:
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    if nb <= 2:
        return _product_tangent(a, b, "dot")
    # N-D by M-D: a sum over the last axis of a and the second-to-last of b
    tag, ((av, ap), (bv, bp)) = tangent_parts((a, b))
    y = np.dot(av, bv)
    acc = None
    if ap is not None:
        acc = np.moveaxis(np.tensordot(ap, bv, axes=([na - 1], [nb - 2])), na - 1, -1)
    if bp is not None:
        term = np.tensordot(av, bp, axes=([na - 1], [nb - 2]))
        acc = term if acc is None else acc + term
    return Dual._make(y, acc, tag)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------

declare_contraction(np.matmul, np.dot)
declare_composite(np.outer, lambda a, b, out=None: np.ravel(a)[:, None] * np.ravel(b)[None, :])
declare_composite(np.vdot, lambda a, b: np.sum(np.ravel(a) * np.ravel(b)))
declare_composite(np.trace, lambda a, offset=0, axis1=0, axis2=1, dtype=None, out=None:
                  np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1))

declare_contraction(np.linalg.matmul)
declare_probed(np.kron, np.cross, np.linalg.cross, np.inner, np.tensordot, np.linalg.tensordot,
               np.matvec, np.vecmat, np.vecdot, np.linalg.vecdot)
declare_composite(np.linalg.outer, lambda a, b, /: np.ravel(a)[:, None] * np.ravel(b)[None, :])
declare_composite(np.linalg.trace, lambda x, /, *, offset=0, dtype=None:
                  np.trace(x, offset=offset, axis1=-2, axis2=-1))
# linear in each operand (for compilers: a call with one computed operand is a matrix)
note_linear(np.trace, np.linalg.trace, args=(0,))
note_linear(np.outer, np.linalg.outer, np.vdot, args=(0, 1))
declare_composite(np.linalg.multi_dot, lambda arrays, *, out=None:
                  functools.reduce(np.matmul, arrays))
