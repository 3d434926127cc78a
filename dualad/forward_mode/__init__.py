"""Forward mode: batched dual numbers, their tangent rules and transforms.

dual (``Dual``, ``Tag``, fast paths), kernels (fused Numba kernels of table rules),
elementwise (tangent methods made from the rule tables), rules (``tangent_rule``),
transforms (``jvp``, ``derivative``, the chunked forward Jacobian).
"""

from . import elementwise as _elementwise  # noqa: F401  (tangents of the rule tables)

__all__: list[str] = []
