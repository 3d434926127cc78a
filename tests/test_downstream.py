"""A library built on dualad (tests/downstream/): a package with its own pyproject.toml that
depends on dualad and adds derivative rules for its own function through dualad.extend only.

It is pip-installed (no dependencies: dualad is the one under test) into a directory put on
the running interpreter's path, and used from a directory outside the checkout, as a
third party would. Marked ``packaging`` (it builds a wheel), like tests/test_packaging.py.
"""

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "downstream"

SCRIPT = """
import numpy as np
import dualad as ad
import dualad_downstream as dd
from dualad.diagnostics.gradcheck import numerical_jacobian

assert "site-packages" not in dd.__file__ and "tests/downstream" not in dd.__file__, dd.__file__
x = np.array([0.3, -1.0, 2.0, 700.0])
g = ad.grad(dd.logsumexp)(x)
assert np.allclose(g, dd.softmax(x)), g
small = x[:3]
fd = numerical_jacobian(dd.logsumexp, (small,), 0)
assert np.allclose(ad.grad(dd.logsumexp)(small), fd, rtol=1e-6)
assert np.allclose(ad.jacobian(dd.logsumexp, mode="forward")(small), fd, rtol=1e-6)
assert ad.gradcheck(dd.logsumexp, small)
hess = ad.hessian(dd.logsumexp)(small)
s = dd.softmax(small)
assert np.allclose(hess, np.diag(s) - np.outer(s, s))
rules = [m for m in ad.gradient.methods
         if getattr(m.implementation, "__module__", "") == "dualad_downstream"]
assert len(rules) == 1, rules
params = dd.Mixture(np.array([0.1, -0.2]), np.array([-1.0, 1.0]))
data = np.array([0.5, -0.7, 1.2])
grad = ad.grad(dd.mixture_log_likelihood)(params, data)
assert type(grad) is dd.Mixture
fd_means = numerical_jacobian(
    lambda m: dd.mixture_log_likelihood(dd.Mixture(params.log_weights, m), data),
    (params.means,), 0)
assert np.allclose(grad.means, fd_means, rtol=1e-6)
print("ok")
"""


def test_declares_dualad_and_uses_only_the_public_rule_api():
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    assert any(dep.split(">")[0].split("=")[0].strip() == "dualad"
               for dep in project["dependencies"])
    for source in (PACKAGE / "src").rglob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("dualad") or alias.name == "dualad", \
                        f"{source}: import {alias.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dualad"):
                assert node.module == "dualad" and [a.name for a in node.names] == ["extend"], \
                    f"{source}: from {node.module} import ..."
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "extend":
                assert not node.attr.startswith("_"), f"{source}: extend.{node.attr}"


def test_installed_package_adds_its_rules_and_they_win(tmp_path):
    target = tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
               "--target", str(target), str(PACKAGE)]
    if importlib.util.find_spec("hatchling") is not None:
        command.insert(5, "--no-build-isolation")  # no download of the build backend
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "dualad_downstream" / "__init__.py").exists()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = dict(os.environ)
    # the package from its install directory; dualad from the environment under test
    paths = [str(target)] + ([str(ROOT)] if importlib.util.find_spec("dualad") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         cwd=outside, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "ok"
