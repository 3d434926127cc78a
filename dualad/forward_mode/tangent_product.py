"""The rules of :func:`~dualad.derivatives.tangent_product.tangent_product`, the NaN-safe
tangent product that forward mode records on traced values: its gradient (reverse over
forward: ``ad.grad`` of a function calling ``ad.jvp``) and its own tangent (forward over
forward).

Both are the product's: ``y = p * d`` gives ``(g * d, g * p)`` (summed back to each
argument's shape) and ``dy = dp * d + dd * p``, each term a NaN-safe tangent product again
(an exactly zero tangent adds nothing).

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.derivatives.tangent_product import tangent_product
    >>> ad.grad(lambda p: np.sum(tangent_product(p, np.array([2.0, np.inf]))))(
    ...     np.array([1.0, 3.0]))
    array([ 2., inf])
    >>> ad.jvp(lambda d: tangent_product(np.array([0.0, 2.0]), d), (np.ones(2),),
    ...        (np.ones(2),))[1]
    array([0., 2.])
"""

from __future__ import annotations

from typing import Any

import plum

from ..core.array_protocol import shape_of
from ..core.dispatch import gradient
from ..core.unbroadcast import unbroadcast
from ..derivatives.kinds import column
from ..derivatives.tangent_product import TANGENT_PRODUCT, tangent_product
from .dual import Dual, dual_signatures, register_forward, tangent_parts

__all__: list[str] = []


def _gradient(op: Any, grad: Any, output: Any, p: Any, d: Any):  # no annotation (plum)
    return (unbroadcast(grad * d, shape_of(p)), unbroadcast(grad * p, shape_of(d)))


def _tangent(op: Any, p: Any, d: Any):  # no annotation (plum)
    tag, ((pv, pp), (dv, dp)) = tangent_parts((p, d))
    value = tangent_product(pv, dv)
    terms = []
    if pp is not None:
        terms.append(tangent_product(pp, column(dv)))
    if dp is not None:
        terms.append(tangent_product(dp, column(pv)))
    partials = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return Dual._make(value, partials, tag)


gradient.register(_gradient, plum.Signature(type(TANGENT_PRODUCT), Any, Any, Any, Any),
                  builtin=True)
for _types in dual_signatures(2):
    register_forward(type(TANGENT_PRODUCT), _types, _tangent)
del _types
