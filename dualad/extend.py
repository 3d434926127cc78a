"""The rule writer's API: everything needed to teach dualad a new function.

dualad's own rules (``dualad/numpy_rules/``) are written with these names only, so a
library built on dualad never needs a private one. There are three ways to add a rule,
from the least to the most work:

1. **An elementwise function**: one line, :func:`define_rule`, with the derivatives as
   expressions; both modes (and the fused forward kernels) come from it::

       softplus = define_rule(softplus, args=("x",), derivatives=("1 / (1 + exp(-x))",))

2. **Any function, reverse mode**: :func:`gradient_rule` (a :func:`primitive` records
   itself as one operation). The rule returns one gradient per positional argument
   (``None`` where there is none)::

       @gradient_rule(f)
       def _f(grad, output, x):
           return (grad * <df/dx>,)

3. **Any function, forward mode**: :func:`tangent_rule`, a rule that receives the
   arguments (some of them :class:`Dual`) and returns the Dual result;
   :func:`tangent_parts` splits the arguments into values and partials (``None`` for
   constants).

Both decorators take several functions at once, and ``broadcasted=True`` to refine the
table rule of a ufunc for its elementwise calls (the table's forward-mode fast paths for
plain real values still run first; :func:`table_tangent` is the table's tangent, for the
calls a refinement leaves to it). The flows of sparsity detection are
declared beside the rule with the ``declare_*`` functions. dualad's own rules are written
this way only, so none of them is listed among ``gradient.user_methods``.

A method that a user adds with ``@gradient.dispatch`` / ``@forward.dispatch`` on
``Method[f]`` (the contract's spelling, as in the example below) wins over dualad's
built-in rule for the same function, in every transform, whenever it is added.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad import extend
    >>> def cube(x):
    ...     return x ** 3
    >>> cube = extend.primitive(cube)
    >>> @extend.gradient.dispatch
    ... def _(op: extend.Method[cube], grad, output, x):
    ...     return (grad * 3 * x ** 2,)
    >>> @extend.forward.dispatch
    ... def _(op: extend.Method[cube], x: extend.Dual):
    ...     tag, [(v, p)] = extend.tangent_parts((x,))
    ...     return extend.Dual(v ** 3, p * (3 * v ** 2)[..., None], tag)
    >>> float(ad.grad(cube)(2.0)), float(ad.derivative(cube)(2.0))
    (12.0, 12.0)
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .core.arguments import value
from .core.array_protocol import (
    lift_object_array,
    observed_level,
    register_ufunc_method,
    shape_of,
)
from .core.dispatch import forward, gradient
from .core.errors import MissingRuleError, TagMismatchError
from .core.operators import Broadcasted, Method
from .core.tracing import Traced, apply_operator, innermost, primitive, recording_paused
from .core.trees import register_tree, tree_flatten
from .core.unbroadcast import unbroadcast
from .derivatives.registry import (
    define_rule,
    define_table_rules,
    get_rule,
    not_differentiable_functions,
    traced_function,
)
from .derivatives.scalar_forms import declare_scalar_form
from .forward_mode.dual import (
    Dual,
    innermost_tag,
    partials_key,
    register_tangent_fallback,
    tangent_parts,
)
from .forward_mode.elementwise import define_value_rule, table_tangent
from .forward_mode.rules import tangent_rule
from .reverse_mode.backward import gradients_needed
from .reverse_mode.graph import (
    AbstractNode,
    CachedNode,
    MutableNode,
    not_writable_message,
    register_function_hook,
    register_keyword_aliases,
    register_write_hook,
)
from .reverse_mode.rules import gradient_rule
from .reverse_mode.transforms import vjp
from .sparsity.coarse import declare_dense, declare_probed
from .sparsity.flows import (
    declare_allocation,
    declare_bincount,
    declare_composite,
    declare_contraction,
    declare_elementwise,
    declare_index_map,
    declare_reduction,
    declare_scan,
    declare_select,
    declare_sort,
    declare_write,
    note_index_map,
    note_linear,
    note_order_statistic,
    note_scatter,
)

__all__ = [
    # dispatch: the rule functions and the operator traits they dispatch on
    "gradient",
    "forward",
    "Method",
    "Broadcasted",
    "primitive",
    # defining rules
    "define_rule",
    "define_table_rules",
    "define_value_rule",
    "get_rule",
    "not_differentiable_functions",
    "traced_function",
    "gradient_rule",
    "tangent_rule",
    "table_tangent",
    "gradients_needed",
    "vjp",
    # forward mode: dual numbers and their tags
    "Dual",
    "tangent_parts",
    "innermost_tag",
    "partials_key",
    "register_tangent_fallback",
    # reverse mode: graph objects and hooks for functions that write or alias
    "AbstractNode",
    "CachedNode",
    "MutableNode",
    "register_function_hook",
    "register_keyword_aliases",
    "register_write_hook",
    "register_ufunc_method",
    "not_writable_message",
    # tracing and values
    "Traced",
    "apply_operator",
    "innermost",
    "recording_paused",
    "value",
    "shape_of",
    "unbroadcast",
    "lift_object_array",
    "register_tree",
    "tree_flatten",
    # sparsity detection: how each family's entries flow
    "declare_allocation",
    "declare_bincount",
    "declare_composite",
    "declare_contraction",
    "declare_dense",
    "declare_elementwise",
    "declare_index_map",
    "declare_probed",
    "declare_reduction",
    "declare_scan",
    "declare_select",
    "declare_sort",
    "declare_write",
    # compiled programs (ad.jit): scalar forms of elementwise functions that are not ufuncs
    "declare_scalar_form",
    "observed_level",
    "note_index_map",
    "note_linear",
    "note_order_statistic",
    "note_scatter",
    # errors
    "MissingRuleError",
    "TagMismatchError",
]

# Names this module no longer exports: where each lives now. They keep working, with a
# DeprecationWarning, for code written against the older surface.
_MOVED = {
    "register_tables": ("dualad.derivatives.registry", "define_table_rules"),
    "register_value_rule": ("dualad.forward_mode.elementwise", "define_value_rule"),
    "register_write_rule": ("dualad.reverse_mode.graph", "register_write_hook"),
    "RuleFunction": ("dualad.core.dispatch", "RuleFunction"),
    "backward": ("dualad", "backward"),
    "Operator": ("dualad", "Operator"),
    "missing_rule_message": ("dualad.core.dispatch", "missing_rule_message"),
    "rules": ("dualad.derivatives.registry", "rules"),
    "ElementwiseRule": ("dualad.derivatives.registry", "ElementwiseRule"),
    "on_rule_registered": ("dualad.derivatives.registry", "on_rule_registered"),
    "Tag": ("dualad.forward_mode.dual", "Tag"),
    "value_at": ("dualad.forward_mode.dual", "value_at"),
    "partials_at": ("dualad.forward_mode.dual", "partials_at"),
    "dual_result": ("dualad.forward_mode.dual", "dual_result"),
    "zero_partials": ("dualad.forward_mode.dual", "zero_partials"),
    "Variable": ("dualad", "Variable"),
    "pause_recording": ("dualad", "pause_recording"),
    "tree_unflatten": ("dualad.core.trees", "tree_unflatten"),
    "tree_map": ("dualad.core.trees", "tree_map"),
    "ConversionError": ("dualad", "ConversionError"),
    "DualadError": ("dualad", "DualadError"),
    "RuleError": ("dualad", "RuleError"),
    "RuleTableError": ("dualad", "RuleTableError"),
    "ShapeError": ("dualad", "ShapeError"),
}


def __getattr__(name: str) -> Any:
    """The names this module no longer exports, with a ``DeprecationWarning``."""
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'dualad.extend' has no attribute {name!r}")
    module, new = moved
    warnings.warn(f"dualad.extend.{name} is deprecated; use {module}.{new}",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), new)


def __dir__() -> list[str]:
    """The rule writer's API only."""
    return sorted(__all__)
