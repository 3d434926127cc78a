"""import dualad imports no part of scipy; the drop-ins import only what they stand for."""

import subprocess
import sys

import pytest

pytest.importorskip("scipy")


def _modules_after(code):
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                          "print(' '.join(sorted(m for m in sys.modules if m.startswith('scipy'))))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_dualad_does_not_import_scipy():
    assert _modules_after("import numpy as np, dualad as ad\n"
                          "ad.grad(lambda x: np.sum(np.abs(np.fft.rfft(x))))(np.ones(4))") == set()


def test_scipy_special_table_loads_when_scipy_special_is_imported_later():
    code = ("import numpy as np, dualad as ad\n"
            "import scipy.special as sp\n"
            "for mode in ('forward', 'reverse'):\n"
            "    j = ad.jacobian(lambda x: sp.gammaln(x) + sp.beta(x, 2.0), mode=mode)(np.ones(2))\n"
            "    assert abs(j[0, 0] - (-0.5772156649 - 0.75)) < 1e-8, j\n")
    assert "scipy.special" in _modules_after(code)


def test_special_drop_in_does_not_import_stats_or_linalg():
    loaded = _modules_after("import dualad.scipy_rules.special")
    assert "scipy.special" in loaded
    assert "scipy.stats" not in loaded
