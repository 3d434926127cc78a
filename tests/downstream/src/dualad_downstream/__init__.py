"""A stable log-sum-exp whose derivatives dualad learns from this package's own rules.

``logsumexp(x) = log(sum(exp(x)))`` of all entries, computed without overflow. Its gradient
is the softmax of ``x``; the rules below give it to dualad in both modes, through
``dualad.extend`` (the rule writer's API) only. ``Mixture`` is a parameter container
registered as a tree, so gradients come back as a ``Mixture``.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad_downstream import logsumexp
    >>> x = np.array([1000.0, 1000.0])
    >>> round(float(logsumexp(x)) - 1000.0, 12) == round(float(np.log(2.0)), 12)
    True
    >>> ad.grad(logsumexp)(x)
    array([0.5, 0.5])
"""

from __future__ import annotations

import numpy as np

from dualad import extend

__all__ = ["logsumexp", "softmax", "Mixture", "mixture_log_likelihood"]


def softmax(x):
    """``exp(x) / sum(exp(x))`` over all entries, without overflow."""
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


@extend.primitive
def logsumexp(x):
    """``log(sum(exp(x)))`` over all entries, without overflow."""
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


@extend.gradient.dispatch
def _logsumexp_gradient(op: extend.Method[logsumexp], grad, output, x):
    return (grad * softmax(x),)


@extend.forward.dispatch
def _logsumexp_tangent(op: extend.Method[logsumexp], x: extend.Dual):
    tag, [(value, partials)] = extend.tangent_parts((x,))
    weights = softmax(value)
    k = partials.shape[-1]
    tangent = np.reshape(weights, (-1,)) @ np.reshape(partials, (-1, k))
    return extend.Dual(logsumexp(value), tangent, tag)


class Mixture:
    """Log-weights and means of a 1-D Gaussian mixture with unit variances."""

    def __init__(self, log_weights, means):
        self.log_weights, self.means = log_weights, means


extend.register_tree(Mixture, lambda m: ((m.log_weights, m.means), None),
                     lambda aux, children: Mixture(*children))


def mixture_log_likelihood(params: Mixture, data):
    """Sum over ``data`` of the mixture's log density (up to a constant)."""
    log_w = params.log_weights - logsumexp(params.log_weights)
    total = 0.0
    for point in data:
        total = total + logsumexp(log_w - 0.5 * (point - params.means) ** 2)
    return total
