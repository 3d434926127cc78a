"""Elementwise rules: registered from the declarative tables under ``rules/``.

The numpy table is registered here; the scipy.special table when ``scipy.special`` has been
imported (see :func:`~dualad.derivatives.registry.define_table_rules`). Ufuncs the tables
declare not differentiable with a boolean result (comparisons, predicates) act on values
in forward mode.
"""

from __future__ import annotations

import numpy as np

from ..extend import define_table_rules, define_value_rule, not_differentiable_functions

__all__: list[str] = []

define_table_rules()

for _f in not_differentiable_functions():
    if isinstance(_f, np.ufunc) and _f.nout == 1 and all(t.endswith("?") for t in _f.types if "O" not in t):
        define_value_rule(_f)
