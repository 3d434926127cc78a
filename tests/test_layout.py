"""The layers import on their own, each in a fresh interpreter, and every module of the
package imports (the architecture itself is checked by ``lint-imports`` in CI)."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

import dualad

LAYERS = ["dualad.core", "dualad.derivatives", "dualad.forward_mode", "dualad.reverse_mode",
          "dualad.extend", "dualad.numpy_rules", "dualad.api"]


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_in_a_fresh_interpreter(layer):
    script = f"import importlib; importlib.import_module({layer!r}); print('ok')"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_every_module_imports():
    names = [m.name for m in pkgutil.walk_packages(dualad.__path__, "dualad.")]
    assert "dualad.core.dispatch" in names and "dualad.forward_mode.dual" in names
    for name in names:
        importlib.import_module(name)
