"""Derivative rules for numpy, one module per family; importing this registers them all.

The engine knows no particular function: everything numpy-specific lives here (and, for
elementwise functions, in the declarative tables under ``rules/``).
"""

from __future__ import annotations

from . import (  # noqa: F401
    binning,
    casts,
    complex_parts,
    contractions,
    convolution,
    derived,
    eigen,
    elementwise,
    fft,
    functions,
    indexing,
    joining,
    linalg,
    piecewise,
    polynomials,
    products,
    reductions,
    selection,
    shapes,
    statistics,
    tangent_fallback,
    ufunc_methods,
    writes,
)

__all__: list[str] = []
