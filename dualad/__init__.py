"""dualad: automatic differentiation of plain numpy code, in forward and reverse mode.

Example:
    >>> import numpy as np, dualad as ad
    >>> f = lambda x: np.sum(np.sin(x) * x ** 2)
    >>> ad.grad(f)(np.array([1.0, 2.0])).round(4)
    array([2.2232, 1.9726])

The package is layered; each layer imports only the ones below it (the same list as the
import-linter contract in ``pyproject.toml`` and the README's layout table):

* ``dualad`` (this module) and :mod:`dualad.__main__`: the user API and the demonstration;
* :mod:`dualad.scipy_rules` (scipy's names: special, stats, linalg, integrate) and
  :mod:`dualad.diagnostics` (gradcheck, taylor_test, to_dot);
* :mod:`dualad.api` (transforms that combine the modes: jacobian, hessian, hvp),
  :mod:`dualad.sparse` (colouring, compressed passes), :mod:`dualad.tape` (recorded
  programs) and :mod:`dualad.vmap` (mapping over a batch axis);
* :mod:`dualad.numpy_rules`: the derivative rules of numpy, one file per family;
* :mod:`dualad.extend`: the rule writer's API (all that rules use);
* :mod:`dualad.forward_mode` and :mod:`dualad.reverse_mode`: the two modes, and
  :mod:`dualad.sparsity`: the index sets that sparsity detection traces; independent of
  each other;
* :mod:`dualad.njit`: dual numbers in nopython mode;
* :mod:`dualad.derivatives`: the rule tables, their language and registry;
* :mod:`dualad.core`: operators, dispatch, tracing, numpy's protocols, trees, errors.

The rule families (:mod:`dualad.numpy_rules`, :mod:`dualad.scipy_rules`) reach the layers
below :mod:`dualad.extend` through it only (a second contract).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import numpy_rules as _numpy_rules  # noqa: F401  (registers the rules)
from .api import hessian, hvp, jacobian
from .core.arguments import value
from .core.dispatch import backward, forward, gradient
from .core.errors import (
    ConversionError,
    DualadError,
    GradcheckError,
    MissingRuleError,
    RuleError,
    RuleTableError,
    ShapeError,
    TagMismatchError,
)
from .core.operators import Broadcasted, Method, Operator
from .core.ravel import ravel_pytree
from .core.tracing import pause_recording, primitive
from .core.trees import register_tree
from .core.unbroadcast import unbroadcast
from .derivatives.registry import define_rule
from .diagnostics import gradcheck, taylor_test, to_dot
from .forward_mode.dual import Dual
from .forward_mode.transforms import derivative, jvp
from .reverse_mode.graph import AbstractNode, CachedNode, LeafNode, Node, Variable, register
from .reverse_mode.transforms import grad, value_and_grad, vjp
from .scipy_rules.jacobians import ode_jacobian
from .sparse import color_columns, jacobian_sparsity, sparse_hessian, sparse_jacobian
from .tape import Tape, TapeRetraceWarning, record
from .tape.jit import JitError, JitFallbackWarning
from .tape.jit import jit as _jit
from .vmap import vmap

__all__ = [
    "AbstractNode",
    "Broadcasted",
    "CachedNode",
    "ConversionError",
    "Dual",
    "DualadError",
    "GradcheckError",
    "JitError",
    "JitFallbackWarning",
    "LeafNode",
    "Method",
    "MissingRuleError",
    "Node",
    "Operator",
    "RuleError",
    "RuleTableError",
    "ShapeError",
    "TagMismatchError",
    "Tape",
    "TapeRetraceWarning",
    "Variable",
    "backward",
    "color_columns",
    "define_rule",
    "derivative",
    "forward",
    "grad",
    "gradcheck",
    "gradient",
    "hessian",
    "hvp",
    "jacobian",
    "jacobian_sparsity",
    "jit",
    "jvp",
    "ode_jacobian",
    "pause_recording",
    "primitive",
    "ravel_pytree",
    "record",
    "register",
    "register_tree",
    "sparse_hessian",
    "sparse_jacobian",
    "taylor_test",
    "to_dot",
    "unbroadcast",
    "value",
    "value_and_grad",
    "vjp",
    "vmap",
]

__version__ = "0.1.0"


def jit(fn: Callable[..., Any], *, fallback: str = "warn",
        background: bool = False) -> Callable[..., Any]:
    """``fn`` (a function, or ``ad.grad(f)``, ``ad.value_and_grad(f)``, ``ad.jacobian(f)``,
    ``ad.ode_jacobian(f)``, ``ad.sparse_jacobian(f)``) recorded at its first call and
    compiled with Numba; see :mod:`dualad.tape.jit`. ``fallback="error"`` raises
    :class:`JitError` where something cannot be compiled (else it runs as the tape's Python
    replay, with a :class:`JitFallbackWarning` once). ``background=True`` compiles in a
    thread while the replay serves the calls (a first call without the compile's wait).

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.jit(ad.grad(lambda x: np.sum(x ** 2)))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    return _jit(fn, fallback=fallback, coloring=color_columns, background=background)


def __dir__() -> list[str]:
    """The public API only (submodules stay importable: ``dualad.extend``, ...)."""
    return sorted([*__all__, "__version__"])
