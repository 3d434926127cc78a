"""The compiled Jacobian of an @njit function is cached on disk and reused by a new process."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]

MODEL = """
import numba
import numpy as np


@numba.njit
def model(x, k):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = {body}
    return out
"""

SCRIPT = """
import json, sys
import numpy as np
import dualad as ad
from dualad.njit.drivers import driver
import model_module

x = np.array([0.5, -1.0, 2.0])
jac = ad.jacobian(model_module.model)(x, 3.0)
run = driver(model_module.model, "jacobian", nargs=2, seeded=(("array", 0),), width=4)
print(json.dumps({"jac": jac.tolist(), "hits": sum(run.stats.cache_hits.values()),
                  "misses": sum(run.stats.cache_misses.values())}))
"""


def _run(tmp_path: Path, body: str) -> dict:
    (tmp_path / "model_module.py").write_text(MODEL.format(body=body))
    env = dict(os.environ)
    env["DUALAD_KERNEL_CACHE"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_new_process_loads_the_compiled_jacobian_and_a_changed_source_recompiles(tmp_path):
    import numpy as np

    x = np.array([0.5, -1.0, 2.0])
    first = _run(tmp_path, "x[i] * x[i] * k + x[0]")
    expected = np.diag(2 * x * 3.0)
    expected[:, 0] += 1.0
    np.testing.assert_allclose(first["jac"], expected, rtol=1e-14)
    assert first["misses"] == 1 and first["hits"] == 0

    second = _run(tmp_path, "x[i] * x[i] * k + x[0]")
    np.testing.assert_allclose(second["jac"], expected, rtol=1e-14)
    assert second["hits"] == 1 and second["misses"] == 0

    # An edited function is compiled again, not served stale from the cache.
    third = _run(tmp_path, "x[i] * x[i] * x[i] * k")
    np.testing.assert_allclose(third["jac"], np.diag(3 * x**2 * 3.0), rtol=1e-14)
    assert third["misses"] == 1
