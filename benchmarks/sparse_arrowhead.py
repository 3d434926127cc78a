"""Bicolouring: an arrowhead (bordered) Jacobian by column colouring and bidirectionally."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, REFERENCE, Bench, require_dualad

TITLE = "Bidirectional sparse Jacobian of an arrowhead (bordered) system"
XLABEL = "n"
DESCRIPTION = """
`f(x)` has a dense first row (`sum(sin(x))`), a dense first column (`x * x[0]`) and a
diagonal (`x ** 2`): an arrowhead, the pattern of a PDE with a global constraint or an
integral term. One-sided colourings need n colours (the dense row joins every column,
the dense column every row). Baseline: `ad.sparse_jacobian(f, mode="forward")` (column
colouring, n directions in one forward pass); dualad `mode="bidirectional"` (the dense row
from one pullback, the rest from one forward pass with 2 colours) and `mode="auto"` (which
picks it); reference: `ad.jacobian(f)` (dense forward). The colours column gives the
counts. Pattern and colouring come from an untimed first call.
"""


def arrowhead(x):
    """Dense first row and column, diagonal elsewhere."""
    out = x ** 2 + x[0] * x
    return np.concatenate([np.sum(np.sin(x))[None], out[1:]])


def run(quick: bool = False):
    """n = 1000 (quick: 200)."""
    ad = require_dualad()
    from dualad.sparse.bicoloring import color_bidirectional

    bench = Bench("sparse_arrowhead")
    n = 200 if quick else 1000
    x = np.random.default_rng(0).uniform(0.5, 1.5, n)
    pattern = ad.jacobian_sparsity(arrowhead)(x)
    split = color_bidirectional(pattern)
    kc = int(ad.color_columns(pattern).max()) + 1
    ref = ad.jacobian(arrowhead)(x)

    def check(result):
        dense = result.toarray() if hasattr(result, "toarray") else result
        return {"max abs err": f"{np.max(np.abs(dense - ref)):.1e}"}

    def sparse(mode):
        def make():
            jac = ad.sparse_jacobian(arrowhead, mode=mode)
            jac(x)
            return lambda: jac(x)

        return make

    case = f"arrowhead n={n}"
    colours = {
        "forward": f"{kc} column colours",
        "bidirectional": f"{split.forward_count} forward + {split.reverse_count} reverse",
    }
    bench.time(case, "dualad sparse_jacobian mode=forward", BASELINE, sparse("forward"),
               size=n, check=check, extra={"colours": colours["forward"]})
    bench.time(case, "dualad sparse_jacobian mode=bidirectional", DUALAD,
               sparse("bidirectional"), size=n, check=check,
               extra={"colours": colours["bidirectional"]})
    bench.time(case, "dualad sparse_jacobian mode=auto", DUALAD, sparse("auto"), size=n,
               check=check, extra={"colours": colours["bidirectional"]})
    bench.time(case, "dualad jacobian (dense, forward)", REFERENCE,
               lambda: (lambda jac: lambda: jac(x))(ad.jacobian(arrowhead)), size=n,
               check=check)
    return bench.rows
