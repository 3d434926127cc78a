"""The rule writer's API: everything needed to teach dualad a new function.

dualad's own rules (``dualad/numpy_rules/``) are written with these names only, so a
library built on dualad never needs a private one. There are three ways to add a rule,
from the least to the most work:

1. **An elementwise function**: one line, :func:`define_rule`, with the derivatives as
   expressions; both modes (and the fused forward kernels) come from it::

       softplus = define_rule(softplus, args=("x",), derivatives=("1 / (1 + exp(-x))",))

2. **Any function, reverse mode**: a ``gradient`` method for ``Method[f]`` (a
   :func:`primitive` records itself as one operation). It returns one gradient per
   positional argument (``None`` where there is none)::

       @gradient.dispatch
       def gradient(op: Method[f], grad, output, x):
           return (grad * <df/dx>,)

   :func:`gradient_rule` registers one implementation for several functions at once.

3. **Any function, forward mode**: a ``forward`` method for ``Method[f]`` with :class:`Dual`
   arguments, returning the Dual result; :func:`tangent_parts` splits the arguments into
   values and partials (``None`` for constants); :func:`tangent_rule` registers one
   implementation for several functions.

A method registered at any time wins over dualad's built-in rule for the same function,
in every transform.

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

from .core.arguments import value
from .core.array_protocol import lift_object_array, register_ufunc_method, shape_of
from .core.dispatch import RuleFunction, backward, forward, gradient, missing_rule_message
from .core.errors import (
    ConversionError,
    DualadError,
    MissingRuleError,
    RuleError,
    RuleTableError,
    ShapeError,
    TagMismatchError,
)
from .core.operators import Broadcasted, Method, Operator
from .core.tracing import (
    Traced,
    apply_operator,
    innermost,
    pause_recording,
    primitive,
    recording_paused,
)
from .core.trees import register_tree, tree_flatten, tree_map, tree_unflatten
from .core.unbroadcast import unbroadcast
from .derivatives.registry import (
    ElementwiseRule,
    define_rule,
    get_rule,
    not_differentiable_functions,
    on_rule_registered,
    register_tables,
    rules,
)
from .forward_mode.dual import (
    Dual,
    Tag,
    dual_result,
    innermost_tag,
    partials_at,
    partials_key,
    tangent_parts,
    value_at,
    zero_partials,
)
from .forward_mode.elementwise import register_value_rule
from .forward_mode.rules import tangent_rule
from .reverse_mode.backward import gradients_needed
from .reverse_mode.graph import (
    AbstractNode,
    CachedNode,
    MutableNode,
    Variable,
    not_writable_message,
    register_function_hook,
    register_keyword_aliases,
    register_write_rule,
)
from .reverse_mode.rules import gradient_rule
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
)

__all__ = [
    # dispatch: the rule functions and the operator traits they dispatch on
    "RuleFunction",
    "gradient",
    "forward",
    "backward",
    "Operator",
    "Method",
    "Broadcasted",
    "primitive",
    "missing_rule_message",
    # registering rules
    "define_rule",
    "get_rule",
    "rules",
    "ElementwiseRule",
    "on_rule_registered",
    "register_tables",
    "not_differentiable_functions",
    "register_value_rule",
    "gradient_rule",
    "tangent_rule",
    "gradients_needed",
    # forward mode: dual numbers and their tags
    "Dual",
    "Tag",
    "tangent_parts",
    "innermost_tag",
    "value_at",
    "partials_at",
    "partials_key",
    "dual_result",
    "zero_partials",
    # reverse mode: graph objects and hooks for functions that write or alias
    "AbstractNode",
    "CachedNode",
    "MutableNode",
    "Variable",
    "register_function_hook",
    "register_keyword_aliases",
    "register_write_rule",
    "register_ufunc_method",
    "not_writable_message",
    # tracing and values
    "Traced",
    "apply_operator",
    "innermost",
    "pause_recording",
    "recording_paused",
    "value",
    "shape_of",
    "unbroadcast",
    "lift_object_array",
    "tree_flatten",
    "tree_unflatten",
    "tree_map",
    "register_tree",
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
    # errors
    "ConversionError",
    "DualadError",
    "MissingRuleError",
    "RuleError",
    "RuleTableError",
    "ShapeError",
    "TagMismatchError",
]
