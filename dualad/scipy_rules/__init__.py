"""scipy drop-ins: ``special``, ``stats`` and ``linalg`` with scipy's names and signatures.

scipy.special's ufuncs (``gammaln``, ``erf``, ``beta``, ``iv``, ...) reach dualad from
plain code, through numpy's ``__array_ufunc__``; their derivatives come from the table
``rules/scipy_special.toml``. scipy's Python functions (``logsumexp``, ``scipy.stats``,
``scipy.linalg``) convert their arguments with ``np.asarray``, which no numpy protocol
lets dualad see, and dualad patches neither numpy nor scipy. So, as ``jax.scipy`` and
``autograd.scipy`` do, these modules offer the same functions: on plain arrays they call
scipy itself; on traced values they record one operation with the rules written next to
them (or run a numpy composition that dualad differentiates).

Importing a module here imports the scipy module it stands for; ``import dualad`` imports
none of them.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules import special
    >>> ad.grad(lambda x: special.logsumexp(x))(np.zeros(2))
    array([0.5, 0.5])
"""

from . import _hints  # noqa: F401  (drop-in hints in the errors of traced scipy calls)

__all__ = ["integrate", "linalg", "special", "stats"]
