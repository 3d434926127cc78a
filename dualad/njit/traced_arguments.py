"""A clear error when plain Python code passes a value being differentiated to ``@njit``.

``ad.jacobian(g)`` of a plain Python ``g`` that calls an ``@njit`` function hands that
function dualad's Python objects (dual numbers, graph nodes), which Numba cannot compile.
Registered as Numba's type of those objects, :func:`refuse_traced` raises an error saying
to differentiate the ``@njit`` function itself instead (its compiled code then runs on
compiled dual numbers).

Example:
    >>> import numba, numpy as np, dualad as ad
    >>> @numba.njit
    ... def square(x):
    ...     return x * x
    >>> _ = ad.derivative(np.sin)  # any transform, once Numba is imported, registers it
    >>> try:
    ...     ad.grad(lambda x: square(x))(1.0)
    ... except ad.DualadError as exc:
    ...     print(str(exc)[:42])
    an @njit function was called with a dualad
"""

from __future__ import annotations

from typing import Any

from numba.extending import typeof_impl

from ..core.errors import DualadError
from ..core.tracing import Traced

__all__ = ["TracedArgumentError", "refuse_traced"]


class TracedArgumentError(DualadError, TypeError):
    """A value being differentiated in numpy mode was passed to an ``@njit`` function."""


@typeof_impl.register(Traced)
def refuse_traced(value: Any, context: Any) -> None:
    """Numba's type of a dualad traced value: none; raise a dualad error instead."""
    raise TracedArgumentError(
        f"an @njit function was called with a dualad {type(value).__name__} (a value being "
        f"differentiated in numpy mode), which Numba cannot compile. Differentiate the "
        f"@njit function itself — ad.jacobian(f), ad.jvp(f, ...), ad.derivative(f) or "
        f"ad.ode_jacobian(f) with f the @njit function — which runs its compiled code on "
        f"compiled dual numbers."
    )
