"""Rules for ``np.einsum`` and the tensor contractions expressed through it.

An einsum call is first brought to an explicit form: every operand's subscripts spelled
out letter by letter (an ellipsis becomes letters of its own, right-aligned so that
ellipsis dimensions broadcast as numpy broadcasts them) and an explicit output. On that
form:

* the gradient w.r.t. operand ``i`` is one more einsum: the output gradient contracted
  with the other operands onto operand ``i``'s letters; letters that occur only in operand
  ``i`` are broadcast back, broadcast (size-1) dimensions are summed, and a letter repeated
  within the operand (a diagonal, ``"ii->i"``) puts the result on that diagonal;
* the tangent is the sum over the operands that carry partials of the same einsum with
  that operand replaced by its partials and one extra letter for the direction axis.

``tensordot``, ``inner``, ``outer``, ``vdot``, ``kron``, ``cross`` and the gufuncs
``matvec``, ``vecmat`` and ``vecdot`` reuse this through :class:`Contraction`.

Example:
    >>> import numpy as np
    >>> from dualad.numpy_rules.contractions import parse_einsum
    >>> parse_einsum("...ij,...jk", [np.ones((2, 3, 4)), np.ones((4, 5))])
    (['aij', 'jk'], 'aik')
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_probed,
    gradients_needed,
    innermost_tag,
    shape_of,
)
from ._support import add_terms, dual_or_value, gradient_rule, split_duals, tangent_rule

__all__ = [
    "parse_einsum",
    "einsum_operand_gradient",
    "einsum_tangent",
    "Contraction",
]

_LETTERS = string.ascii_letters


def _sublist_to_subscripts(sub: Sequence[Any]) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        else:
            i = int(s)
            if not 0 <= i < len(_LETTERS):
                raise ValueError(f"einsum: subscript {i} in a sublist is out of range [0, 52)")
            out.append(_LETTERS[i])
    return "".join(out)


def split_einsum_args(args: tuple) -> tuple[str, list[Any], list[int]]:
    """``(subscripts, operands, positions of the operands in args)`` of an einsum call."""
    if isinstance(args[0], str):
        return args[0], list(args[1:]), list(range(1, len(args)))
    operands, subs, positions = [], [], []
    i = 0
    while i + 1 < len(args):
        operands.append(args[i])
        positions.append(i)
        subs.append(_sublist_to_subscripts(args[i + 1]))
        i += 2
    text = ",".join(subs)
    if i < len(args):
        text += "->" + _sublist_to_subscripts(args[i])
    return text, operands, positions


def parse_einsum(subscripts: str, operands: Sequence[Any]) -> tuple[list[str], str]:
    """Explicit per-operand subscripts and output, with ellipses spelled out as letters."""
    text = subscripts.replace(" ", "")
    if "->" in text:
        lhs, out = text.split("->")
        explicit = True
    else:
        lhs, out, explicit = text, "", False
    specs = lhs.split(",")
    if len(specs) != len(operands):
        raise ValueError(
            f"einsum: the subscripts {subscripts!r} name {len(specs)} operand(s) but "
            f"{len(operands)} were given"
        )
    used = set(text) - set(".,->")
    free = [c for c in _LETTERS if c not in used]
    ell_dims = []
    for s, op in zip(specs, operands):
        nd = len(shape_of(op))
        if "..." in s:
            ell_dims.append(nd - (len(s) - 3))
        else:
            if len(s) != nd:
                raise ValueError(
                    f"einsum: operand subscripts {s!r} do not match an operand of "
                    f"{nd} dimension(s)"
                )
            ell_dims.append(0)
    n_ell = max(ell_dims, default=0)
    ell = "".join(free[:n_ell])
    full = [s.replace("...", ell[n_ell - e:] if e else "") for s, e in zip(specs, ell_dims)]
    if explicit:
        out = out.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for s in specs:
            for c in s.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    return full, out


def _fresh(used: str, n: int = 1) -> str:
    taken = set(used)
    letters = [c for c in _LETTERS if c not in taken]
    if len(letters) < n:
        raise ValueError("einsum: too many distinct subscripts to differentiate (at most 52)")
    return "".join(letters[:n])


def einsum_operand_gradient(specs: list[str], out: str, grad: Any, operands: Sequence[Any],
                            i: int) -> Any:
    """The gradient of ``einsum(specs -> out)`` w.r.t. operand ``i``."""
    spec = specs[i]
    shape = tuple(shape_of(operands[i]))
    unique = "".join(dict.fromkeys(spec))
    others = [j for j in range(len(specs)) if j != i]
    available = set(out).union(*[set(specs[j]) for j in others])
    keep = "".join(c for c in unique if c in available)
    terms = ",".join([out] + [specs[j] for j in others])
    t = np.einsum(f"{terms}->{keep}", grad, *[operands[j] for j in others])
    sizes = {c: shape[spec.index(c)] for c in unique}
    tshape = shape_of(t)
    if len(keep) != len(unique):
        got = dict(zip(keep, tshape))
        t = np.reshape(t, tuple(got.get(c, 1) for c in unique))
        tshape = shape_of(t)
    reduce = tuple(ax for ax, c in enumerate(unique) if sizes[c] == 1 and tshape[ax] != 1)
    if reduce:
        t = np.sum(t, axis=reduce, keepdims=True)
    target = tuple(sizes[c] for c in unique)
    if shape_of(t) != target:
        t = np.broadcast_to(t, target)
    if len(unique) == len(spec):
        if unique != spec:
            t = np.transpose(t, tuple(unique.index(c) for c in spec))
        return t
    # A letter repeated within the operand: the gradient lives on that diagonal.
    fresh = _fresh("".join(specs) + out, len(spec) - len(unique))
    seen: set[str] = set()
    target_spec, eyes, eye_specs, n_fresh = [], [], [], 0
    for c in spec:
        if c in seen:
            f = fresh[n_fresh]
            n_fresh += 1
            target_spec.append(f)
            eye_specs.append(c + f)
            eyes.append(np.eye(sizes[c]))
        else:
            seen.add(c)
            target_spec.append(c)
    return np.einsum(f"{','.join([unique] + eye_specs)}->{''.join(target_spec)}", t, *eyes)


def einsum_tangent(specs: list[str], out: str, values: Sequence[Any],
                   partials: Sequence[Any]) -> Any:
    """Partials of ``einsum(specs -> out)`` (``None`` entries of ``partials`` are constants)."""
    k = _fresh("".join(specs) + out)
    acc = None
    for i, p in enumerate(partials):
        if p is None:
            continue
        terms = ",".join(s + k if j == i else s for j, s in enumerate(specs))
        ops = [p if j == i else v for j, v in enumerate(values)]
        acc = add_terms(acc, np.einsum(f"{terms}->{out}{k}", *ops))
    return acc


_EINSUM_CONFIG = ("out", "dtype", "order", "casting", "optimize")


@gradient_rule(np.einsum)
def _einsum_gradient(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
    needs = gradients_needed()
    subscripts, operands, positions = split_einsum_args(args)
    specs, out = parse_einsum(subscripts, operands)
    result: list[Any] = [None] * len(args)
    for i, pos in enumerate(positions):
        if needs is None or needs[pos]:
            result[pos] = einsum_operand_gradient(specs, out, grad, operands, i)
    return tuple(result)


@tangent_rule(np.einsum, duals="any")
def _einsum_tangent(*args: Any, **kwargs: Any) -> Any:
    tag = innermost_tag(args)
    if tag is None:
        return np.einsum(*args, **kwargs)
    subscripts, operands, _ = split_einsum_args(args)
    specs, out = parse_einsum(subscripts, operands)
    values, partials = split_duals(operands, tag)
    expr = f"{','.join(specs)}->{out}"
    extra = {k: v for k, v in kwargs.items() if k == "optimize"}
    value = np.einsum(expr, *values, **extra)
    return dual_or_value(value, einsum_tangent(specs, out, values, partials), tag)


# -- contractions expressed as one einsum -----------------------------------------------


class Contraction:
    """A product written as ``einsum(specs -> out)`` of prepared operands.

    ``prepare[i]`` is ``None`` or a linear rearrangement of operand ``i`` that acts on
    leading axes only (``("reshape", shape)`` or ``("moveaxis", source, destination)`` with
    non-negative axes), so it applies to partials unchanged. ``constants`` are extra fixed
    operands appended after the prepared ones; ``result_shape`` reshapes the einsum output
    and ``result_move`` moves one of its axes (both are undone on the gradient).
    """

    def __init__(self, specs: list[str], out: str, prepare: list[Any] | None = None,
                 constants: Sequence[np.ndarray] = (), result_shape: tuple | None = None,
                 result_move: tuple[int, int] | None = None) -> None:
        self.specs = specs
        self.out = out
        self.prepare = prepare
        self.constants = list(constants)
        self.result_shape = result_shape
        self.result_move = result_move

    def _prep(self, i: int, x: Any, ndim: int) -> Any:
        """Operand ``i`` (or its partials: ``ndim`` value axes, then extra axes) prepared."""
        step = self.prepare[i] if self.prepare else None
        if step is None or x is None:
            return x
        if step[0] == "reshape":
            return np.reshape(x, tuple(step[1]) + tuple(shape_of(x)[ndim:]))
        return np.moveaxis(x, step[1], step[2])

    def _unprep(self, i: int, g: Any, shape: tuple[int, ...]) -> Any:
        step = self.prepare[i] if self.prepare else None
        if step is None:
            return g
        if step[0] == "reshape":
            return np.reshape(g, shape)
        return np.moveaxis(g, step[2], step[1])

    def gradients(self, grad: Any, operands: Sequence[Any],
                  wanted: Sequence[bool] | None = None) -> list[Any]:
        """One gradient per operand (shaped like the original operands; None if unwanted)."""
        ops = [self._prep(i, x, len(shape_of(x))) for i, x in enumerate(operands)]
        ops += self.constants
        if self.result_move is not None:
            grad = np.moveaxis(grad, self.result_move[1], self.result_move[0])
        if self.result_shape is not None:
            grad = np.reshape(grad, self._einsum_shape(ops))
        out: list[Any] = []
        for i, x in enumerate(operands):
            if wanted is not None and not wanted[i]:
                out.append(None)
                continue
            g = einsum_operand_gradient(self.specs, self.out, grad, ops, i)
            out.append(self._unprep(i, g, tuple(shape_of(x))))
        return out

    def _einsum_shape(self, ops: Sequence[Any]) -> tuple[int, ...]:
        sizes: dict[str, int] = {}
        for s, x in zip(self.specs, ops):
            for c, n in zip(s, shape_of(x)):
                if n != 1 or c not in sizes:
                    sizes[c] = n
        return tuple(sizes[c] for c in self.out)

    def value_and_tangent(self, values: Sequence[Any], partials: Sequence[Any]) -> tuple:
        """The product's value and partials (``None`` when no operand has partials)."""
        ndims = [len(shape_of(x)) for x in values]
        vals = [self._prep(i, x, n) for i, (x, n) in enumerate(zip(values, ndims))]
        vals += self.constants
        parts = [self._prep(i, p, n) for i, (p, n) in enumerate(zip(partials, ndims))]
        parts += [None] * len(self.constants)
        expr = f"{','.join(self.specs)}->{self.out}"
        value = np.einsum(expr, *vals)
        tangent = einsum_tangent(self.specs, self.out, vals, parts)
        if self.result_shape is not None:
            value = np.reshape(value, self.result_shape)
            if tangent is not None:
                tangent = np.reshape(tangent, tuple(self.result_shape) + shape_of(tangent)[-1:])
        if self.result_move is not None:
            src, dst = self.result_move
            value = np.moveaxis(value, src, dst)
            if tangent is not None:
                nd = len(shape_of(value))
                tangent = np.moveaxis(tangent, src % nd, dst % nd)
        return value, tangent


def contraction_rules(funcs: Sequence[Any], build: Callable[..., tuple[Contraction, list[int]]],
                      duals: tuple[int, ...] = (0, 1)) -> None:
    """Register gradient and tangent rules for ``funcs`` from ``build(*args, **kwargs)``.

    ``build`` returns the :class:`Contraction` and the positions of its operands in args.
    """

    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        needs = gradients_needed()
        con, positions = build(*args, **kwargs)
        wanted = None if needs is None else [needs[p] for p in positions]
        grads = con.gradients(grad, [args[p] for p in positions], wanted)
        result: list[Any] = [None] * len(args)
        for p, g in zip(positions, grads):
            result[p] = g
        return tuple(result)

    def tangent_impl(*args: Any, **kwargs: Any) -> Any:
        tag = innermost_tag(list(args) + list(kwargs.values()))
        con, positions = build(*args, **kwargs)
        values, partials = split_duals([args[p] for p in positions], tag)
        value, tangent = con.value_and_tangent(values, partials)
        return dual_or_value(value, tangent, tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{funcs[0].__name__}"
    gradient_rule(*funcs)(grad_impl)
    tangent_rule(*funcs, duals=duals)(tangent_impl)


def is_dual(x: Any) -> bool:
    """Whether ``x`` is a Dual."""
    return isinstance(x, Dual)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_probed(np.einsum)
