"""Hints for errors of scipy functions called on traced values: the drop-in dualad offers
(``scipy.special.logsumexp`` -> ``dualad.scipy_rules.special.logsumexp``), or why there is
none (``scipy.integrate``'s compiled solvers, scipy.special under ``SCIPY_ARRAY_API=1``).
Registered with :func:`dualad.core.arguments.register_library_hint` on import.

Example:
    >>> from dualad.scipy_rules._hints import drop_in_hint
    >>> drop_in_hint("numpy.linalg", "solve", None) is None
    True
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..core.arguments import register_library_hint

__all__ = ["drop_in_hint"]

_DROP_IN_MODULES = ("special", "stats", "linalg", "integrate")


def drop_in_hint(module: str, name: str, frame: Any) -> str | None:
    """The drop-in for the scipy function that failed on a traced value, if dualad has one."""
    parts = module.split(".")
    if parts[0] != "scipy" or len(parts) < 2 or parts[1] not in _DROP_IN_MODULES:
        return None
    if parts[1] == "special" and os.environ.get("SCIPY_ARRAY_API", "0") not in ("", "0"):
        return ("with SCIPY_ARRAY_API=1, scipy.special's functions are Python wrappers that "
                "convert their arguments through the array API, which cannot carry traced "
                "values (dualad differentiates scipy.special's ufuncs); run without "
                "SCIPY_ARRAY_API=1, or use the drop-ins of dualad.scipy_rules.special")
    ours = importlib.import_module(f"{__package__}.{parts[1]}")
    path = None
    owner = frame.f_locals.get("self")
    dist = getattr(owner, "name", None)
    if parts[1] == "stats" and isinstance(dist, str) and hasattr(getattr(ours, dist, None),
                                                                  name):
        path, public = f"{parts[1]}.{dist}.{name}", f"scipy.stats.{dist}.{name}"
    elif callable(getattr(ours, name, None)) and not name.startswith("_"):
        path, public = f"{parts[1]}.{name}", f"scipy.{parts[1]}.{name}"
    if path is None:
        if parts[1] == "integrate":
            return (f"scipy.integrate.{name} runs compiled code (it calls the right-hand "
                    f"side from C / Fortran), which cannot carry a traced value; make the "
                    f"solve an ad.primitive with a derivative rule, or differentiate the "
                    f"right-hand side alone (ad.ode_jacobian(f) gives the solver's jac=)")
        return None
    kind = "runs compiled code" if parts[1] == "integrate" else \
        "converts its arguments with np.asarray"
    return (f"{public} {kind}, which cannot carry a traced value; use the drop-in "
            f"dualad.scipy_rules.{path} (scipy's signature, differentiable): "
            f"from dualad.scipy_rules import {parts[1]}")


register_library_hint(drop_in_hint)
