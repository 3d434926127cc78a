"""The wheel ships the rules tables as package data and installs no other top-level package."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


def test_wheel_holds_only_the_dualad_package_and_its_tables(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"dualad"}, top_level
    assert "dualad/_rules/numpy_ufuncs.toml" in names
    assert "dualad/_rules/scipy_special.toml" in names


def test_installed_wheel_differentiates_arccosh(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # A fresh environment: the wheel and its declared dependencies, nothing else.
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)],
                   check=True, timeout=900)
    script = (
        "import numpy as np, dualad, pathlib\n"
        "assert 'site-packages' in dualad.__file__, dualad.__file__\n"
        "g = dualad.grad(lambda x: np.sum(np.arccosh(x)))(np.array([1.5, 3.0]))\n"
        "expected = 1 / np.sqrt(np.array([1.5, 3.0]) ** 2 - 1)\n"
        "assert np.allclose(g, expected), (g, expected)\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('rules') is None\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
