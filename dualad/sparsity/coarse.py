"""Flows of functions that mix their entries: dense blocks and probed multilinear maps.

Two declarations for functions whose entries do not simply move or reduce:

- :func:`declare_dense` (``np.linalg.inv``, ``np.fft.fft``): every entry of a result depends
  on every entry of the arguments in the same *batch* (the leading dimensions before the
  ``core`` trailing ones); everything meets nonlinearly. With no batch this is the
  conservative flow, which is exact for a dense matrix function.
- :func:`declare_probed` (``np.einsum``, ``np.kron``, ``np.tensordot``): functions linear in
  each traced argument. The dependence on a traced argument is read from the function
  applied to that argument's unit vectors minus the function at zero (which removes what
  does not depend on it), with the other traced arguments set to ones and constants to
  their absolute values (nonnegative numbers, so no term cancels another): a structural
  zero of a constant factor stays a zero of the pattern. Two traced arguments
  meet wherever they reach the same result entry.

Example:
    >>> import numpy as np
    >>> from dualad.sparsity.detection import jacobian_sparsity
    >>> jacobian_sparsity(lambda x: np.kron(np.eye(2), x[:2]))(np.ones(3)).toarray().astype(int)
    array([[1, 0, 0],
           [0, 1, 0],
           [0, 0, 0],
           [0, 0, 0],
           [0, 0, 0],
           [0, 0, 0],
           [1, 0, 0],
           [0, 1, 0]])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.arguments import is_differentiable_output
from ..core.operators import function_name
from .flows import (
    PROBE_LIMIT,
    SparsityTracer,
    _op_types,
    _register,
    _result,
    _size,
    conservative_result,
    note_linear,
    plain,
    probed_flow,
    rebuild,
    reduce_groups,
)
from .index_sets import union

__all__ = ["PROBE_LIMIT", "declare_dense", "declare_probed", "probed_flow"]

def _leaves(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [leaf for o in out for leaf in _leaves(o)]
    return [out]


def _dense(func: Callable[..., Any], core: int | None) -> Callable[..., Any]:
    def impl(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            out = func(*plain(args), **{k: plain(v) for k, v in kwargs.items()})
        tracers = [a for a in list(args) + list(kwargs.values())
                   if isinstance(a, SparsityTracer)]
        if not tracers:
            return out
        if core is None:
            return conservative_result(out, tracers)
        batches = {t.value.shape[:max(t.value.ndim - core, 0)] for t in tracers}
        batch = batches.pop() if len(batches) == 1 else ()
        leaves = _leaves(out)
        if not batch or any(np.shape(leaf)[:len(batch)] != batch for leaf in leaves
                            if is_differentiable_output(leaf)):
            return conservative_result(out, tracers)
        trace = tracers[0].trace
        b = _size(batch)
        groups = []
        for t in tracers:
            flat = (b, t.value.size // max(b, 1))
            groups.append(reduce_groups(t.rows, flat, (1,)))
        per_batch = union(groups, b, trace.n)
        trace.interact(per_batch, per_batch)

        def build(o: Any) -> Any:
            if isinstance(o, (list, tuple)):
                return rebuild(o, [build(x) for x in o])
            if not is_differentiable_output(o):
                return o
            width = _size(np.shape(o)) // max(b, 1)
            return _result(o, per_batch.take(np.repeat(np.arange(b), width)), trace)

        return build(out)

    return impl


def declare_dense(*funcs: Any, core: int | None = None) -> None:
    """Every result entry of ``funcs`` depends on every entry of their traced arguments
    in the same batch: the leading dimensions before the ``core`` trailing ones (``core=2``
    for stacked matrices, ``None``: no batch, all entries together).

    Example: ``declare_dense(np.linalg.inv, np.linalg.det, core=2)``.
    """
    for func in funcs:
        for t in _op_types(func):
            _register(t, _dense(func, core), function_name(func))


def declare_probed(*funcs: Any) -> None:
    """``funcs`` are linear in each traced positional argument (products, contractions,
    ``np.linspace`` in its end points): the flow is read from unit-vector probes.

    Example: ``declare_probed(np.einsum, np.kron, np.tensordot)``.
    """
    note_linear(*funcs)  # so a compiler may write a call with one computed argument as a matrix
    for func in funcs:
        for t in _op_types(func):
            _register(t, probed_flow(func), function_name(func))

