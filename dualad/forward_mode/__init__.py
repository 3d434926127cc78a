"""Forward mode: batched dual numbers, their tangent rules and transforms.

dual (``Dual``, ``Tag``, fast paths), kernels (fused Numba kernels of table rules),
lean (the elementwise rules' path for plain arrays), rows (scalars with a few directions,
their partials as lists of floats), elementwise (tangent methods made from the rule
tables), tangent_product (the rules of the NaN-safe product recorded on traced values),
rules (``tangent_rule``), transforms (``jvp``, ``derivative``, the chunked forward
Jacobian).
"""

from . import elementwise as _elementwise  # noqa: F401  (tangents of the rule tables)
from . import tangent_product as _tangent_product  # noqa: F401  (its gradient and tangent)

__all__: list[str] = []
