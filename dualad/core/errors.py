"""dualad's own exceptions.

Every error dualad raises on bad input derives from :class:`DualadError` and also from
the builtin exception a user would expect (``TypeError``, ``ValueError``, ...), so
``except TypeError`` keeps working.

Example:
    >>> import dualad as ad
    >>> issubclass(ad.MissingRuleError, TypeError)
    True
"""

from __future__ import annotations

__all__ = [
    "DualadError",
    "MissingRuleError",
    "ShapeError",
    "RuleError",
    "RuleTableError",
    "GradcheckError",
    "TagMismatchError",
    "ConversionError",
]


class DualadError(Exception):
    """Base of every error raised by dualad."""


class MissingRuleError(DualadError, TypeError):
    """A function was called on traced values but has no derivative rule for them."""


class ShapeError(DualadError, ValueError):
    """Shapes do not match (a seed, a cotangent, or what a rule returned)."""


class RuleError(DualadError, TypeError):
    """A derivative rule returned something of the wrong kind or number."""


class RuleTableError(DualadError, ValueError):
    """A rules table entry or a rule expression is malformed."""


class GradcheckError(DualadError, AssertionError):
    """Derivatives disagree with finite differences or with each other."""


class TagMismatchError(DualadError, ValueError):
    """Dual numbers of different differentiations were combined by hand."""


class ConversionError(DualadError, TypeError):
    """A traced value was turned into a plain number or array, which would drop its
    derivative (``float(x)``, ``x.item()``, writing it into ``np.empty(n)``)."""
