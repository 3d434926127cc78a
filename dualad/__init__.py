"""dualad: automatic differentiation of plain numpy code, in forward and reverse mode.

Example:
    >>> import numpy as np, dualad as ad
    >>> f = lambda x: np.sum(np.sin(x) * x ** 2)
    >>> ad.grad(f)(np.array([1.0, 2.0])).round(4)
    array([2.2232, 1.9726])
"""

from __future__ import annotations

from . import backward_pass as _backward_pass  # noqa: F401  (registers graph methods)
from . import numpy_rules as _numpy_rules  # noqa: F401  (registers the rules)
from .dispatch import backward, forward, gradient
from .dual import Dual
from .errors import (
    DualadError,
    GradcheckError,
    MissingRuleError,
    RuleError,
    RuleTableError,
    ShapeError,
    TagMismatchError,
)
from .forward_transforms import derivative, jvp
from .gradcheck import gradcheck
from .nodes import AbstractNode, CachedNode, LeafNode, Node, Variable, value
from .operators import Broadcasted, Method, Operator
from .rule_generator import define_rule
from .scipy_interop import ode_jacobian
from .tracing import pause_recording, primitive, register
from .transforms import grad, hessian, jacobian, value_and_grad, vjp
from .unbroadcast import unbroadcast

__all__ = [
    "AbstractNode",
    "Broadcasted",
    "CachedNode",
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
    "Variable",
    "backward",
    "define_rule",
    "derivative",
    "forward",
    "grad",
    "gradcheck",
    "gradient",
    "hessian",
    "jacobian",
    "jvp",
    "ode_jacobian",
    "pause_recording",
    "primitive",
    "register",
    "unbroadcast",
    "value",
    "value_and_grad",
    "vjp",
]

__version__ = "0.1.0"
