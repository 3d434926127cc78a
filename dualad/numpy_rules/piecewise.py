"""``np.piecewise``: the functions of the pieces run on the traced entries they select.

numpy's ``piecewise`` fills ``zeros_like(x)`` piece by piece (``y[cond] = f(x[cond])``);
dualad runs the same steps on traced values (reverse mode through a function hook, forward
mode and sparsity detection through the same code), so the functions of the pieces are
differentiated as written, including values they close over. Later conditions win where
conditions overlap, and constants in ``funclist`` give derivative 0, as numpy's values.

Example:
    >>> import numpy as np, dualad as ad
    >>> f = lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
    >>> ad.grad(lambda x: np.sum(f(x)))(np.array([-2.0, 3.0]))
    array([-1.,  6.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..extend import declare_composite, register_function_hook, shape_of, value
from ._support import tangent_rule

__all__: list[str] = []


def piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """``np.piecewise(x, condlist, funclist, *args, **kw)`` on traced ``x``."""
    zero_d = len(shape_of(x)) == 0
    n_funcs = len(funclist)
    if np.isscalar(condlist) or (not isinstance(value(condlist[0]), (list, np.ndarray))
                                 and not zero_d):
        condlist = [condlist]
    conds = np.asarray([np.asarray(value(c), dtype=bool) for c in condlist], dtype=bool)
    if zero_d:
        conds = np.reshape(conds, (-1, 1))
        x = np.reshape(x, (1,))
    if len(conds) == n_funcs - 1:  # the "otherwise" piece
        conds = np.concatenate([conds, ~np.any(conds, axis=0, keepdims=True)], axis=0)
    elif len(conds) != n_funcs:
        raise ValueError(f"np.piecewise: with {len(conds)} condition(s), either {len(conds)} "
                         f"or {len(conds) + 1} functions are expected (got {n_funcs})")
    y = np.zeros_like(x)
    for cond, func in zip(conds, funclist):
        cond = np.broadcast_to(cond, shape_of(x))
        if not isinstance(func, Callable):
            y[cond] = func
        elif np.any(cond):
            y[cond] = func(x[cond], *args, **kw)
    return np.reshape(y, ()) if zero_d else y


def _hook(func: Any, args: tuple, kwargs: dict) -> Any:
    return piecewise(*args, **kwargs)


register_function_hook(np.piecewise, _hook)
tangent_rule(np.piecewise, duals="any")(piecewise)
declare_composite(np.piecewise, piecewise)
