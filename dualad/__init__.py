"""dualad: automatic differentiation of plain numpy code, in forward and reverse mode.

Example:
    >>> import numpy as np, dualad as ad
    >>> f = lambda x: np.sum(np.sin(x) * x ** 2)
    >>> ad.grad(f)(np.array([1.0, 2.0])).round(4)
    array([2.2232, 1.9726])

The package is layered; each layer imports only the ones below it:

* ``dualad`` (this module), :mod:`dualad.api`, :mod:`dualad.scipy_dropins`,
  :mod:`dualad.gradcheck`: the user API;
* :mod:`dualad.numpy_rules`: the derivative rules of numpy, one file per family;
* :mod:`dualad.extend`: the rule writer's API (all that rules use);
* :mod:`dualad.sparse`: sparse Jacobians and Hessians (colouring, compressed passes);
* :mod:`dualad.forward` and :mod:`dualad.reverse`: the two modes, and
  :mod:`dualad.sparsity`: the index sets that sparsity detection traces; independent of
  each other;
* :mod:`dualad.derivatives`: the rule tables, their language and registry;
* :mod:`dualad.core`: operators, dispatch, tracing, numpy's protocols, trees, errors.
"""

from __future__ import annotations

from . import numpy_rules as _numpy_rules  # noqa: F401  (registers the rules)
from .api import hessian, jacobian
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
from .core.tracing import pause_recording, primitive
from .core.trees import register_tree
from .core.unbroadcast import unbroadcast
from .derivatives.registry import define_rule
from .forward.dual import Dual
from .forward.transforms import derivative, jvp
from .gradcheck import gradcheck
from .graph_dot import to_dot
from .hvp import hvp
from .reverse.graph import AbstractNode, CachedNode, LeafNode, Node, Variable, register
from .reverse.transforms import grad, value_and_grad, vjp
from .scipy_dropins import ode_jacobian
from .sparse import color_columns, jacobian_sparsity, sparse_hessian, sparse_jacobian
from .tape import Tape, TapeRetraceWarning, record
from .taylor import taylor_test

__all__ = [
    "AbstractNode",
    "Broadcasted",
    "CachedNode",
    "ConversionError",
    "Dual",
    "DualadError",
    "GradcheckError",
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
    "jvp",
    "ode_jacobian",
    "pause_recording",
    "primitive",
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
]

__version__ = "0.1.0"


def __dir__() -> list[str]:
    """The public API only (submodules stay importable: ``dualad.extend``, ...)."""
    return sorted([*__all__, "__version__"])
