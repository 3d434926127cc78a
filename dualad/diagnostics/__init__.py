"""Checks and pictures of derivatives: :func:`gradcheck` (against central differences),
:func:`taylor_test` (convergence rates) and :func:`to_dot` (Graphviz text of a graph or tape).

Example:
    >>> import numpy as np
    >>> from dualad.diagnostics import gradcheck
    >>> gradcheck(lambda x: np.sum(np.sin(x)), np.array([0.5, 1.0]))
    True
"""

from .gradcheck import gradcheck
from .graph_dot import to_dot
from .taylor import taylor_test

__all__ = ["gradcheck", "taylor_test", "to_dot"]


def __dir__() -> list[str]:
    """This module's face: its checks."""
    return sorted(__all__)
