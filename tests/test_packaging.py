"""Installs, checked from outside the checkout: a wheel, and an editable install.

Both run in one fresh virtual environment (the wheel first, with its declared
dependencies; then the editable install over it). They take a minute or two and are
marked ``packaging``: CI runs them, ``pytest -m "not packaging"`` skips them locally.
"""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]

# Imported and differentiated from a directory outside the checkout: the tables must be
# found (arccosh comes from rules/numpy_ufuncs.toml) and no top-level `rules` package exists.
SCRIPT = (
    "import numpy as np, dualad, importlib.util\n"
    "g = dualad.grad(lambda x: np.sum(np.arccosh(x)))(np.array([1.5, 3.0]))\n"
    "assert np.allclose(g, 1 / np.sqrt(np.array([1.5, 3.0]) ** 2 - 1)), g\n"
    "j = dualad.jacobian(lambda x: np.sin(x) * x, mode='forward')(np.array([0.5, 1.0]))\n"
    "assert np.allclose(np.diag(j), np.cos([0.5, 1.0]) * [0.5, 1.0] + np.sin([0.5, 1.0]))\n"
    "assert importlib.util.find_spec('rules') is None\n"
    "print(dualad.__file__)\n"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{result.stdout}\n{result.stderr}")
    wheels = list(out.glob("dualad-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin" / "python"


def _run_outside(python, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    return subprocess.run([str(python), "-c", SCRIPT], capture_output=True, text=True,
                          cwd=outside, env=env, timeout=300)


def test_wheel_holds_only_the_dualad_package_and_its_tables(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"dualad"}, top_level
    assert "dualad/_rules/numpy_ufuncs.toml" in names
    assert "dualad/_rules/scipy_special.toml" in names
    assert "dualad/py.typed" in names  # an embedding library's type checker reads dualad


def test_wheel_install_works_outside_the_checkout(wheel, venv_python, tmp_path):
    subprocess.run([str(venv_python), "-m", "pip", "install", "--quiet", str(wheel)],
                   check=True, timeout=900)
    result = _run_outside(venv_python, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "site-packages" in result.stdout, result.stdout


def test_editable_install_works_outside_the_checkout(venv_python, tmp_path):
    subprocess.run([str(venv_python), "-m", "pip", "uninstall", "--quiet", "-y", "dualad"],
                   timeout=300)
    subprocess.run([str(venv_python), "-m", "pip", "install", "--quiet", "-e", str(ROOT)],
                   check=True, timeout=900)
    site = subprocess.run([str(venv_python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert not (Path(site) / "dualad").exists(), "a stray dualad/ directory shadows the install"
    result = _run_outside(venv_python, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(ROOT / "dualad" / "__init__.py")
