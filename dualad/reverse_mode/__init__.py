"""Reverse mode: graph objects, the reverse pass, gradient rules of the tables, transforms.

graph (``Variable``, ``Node``, ``CachedNode``; ``record_call``, the one entry of numpy's
protocols and Python's operators), fast_path (one record per operator and value types: how
a call is evaluated, and the scalar pullbacks of table rules on float64 numbers), aliases
(in-place writes reach every name and view of a computed value, as in numpy), backward
(the iterative reverse pass),
elementwise (gradient methods made from the rule tables), rules (``gradient_rule``),
transforms (``grad``, ``value_and_grad``, ``vjp``, the reverse Jacobian).
"""

from . import aliases as _aliases  # noqa: F401  (numpy's aliasing for computed values)
from . import backward as _backward  # noqa: F401  (the reverse pass of graph nodes)
from . import elementwise as _elementwise  # noqa: F401  (gradients of the rule tables)

__all__: list[str] = []
