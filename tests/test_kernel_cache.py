"""The kernel cache survives corrupt and truncated files (a crash mid-write, a full disk):
each kind of cached file, damaged, is detected, removed and rebuilt with one warning; and
four processes filling an empty cache at once all get the right answer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import json, warnings
import numpy as np
from dualad.derivatives.codegen import KernelCacheWarning, import_kernel_module

SOURCE = """
import numba


@numba.njit(cache=True)
def kernel(x):
    return x * x + 1.0

# kernel cache test
"""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = import_kernel_module(SOURCE)
    y = module.kernel(np.arange(3.0))
print(json.dumps({
    "y": y.tolist(),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, KernelCacheWarning)],
    "hits": sum(module.kernel.stats.cache_hits.values()),
}))
'''


def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env["DUALAD_KERNEL_CACHE"] = str(cache)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(cache: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=_env(cache), capture_output=True,
                          text=True, timeout=300, cwd=cache.parent)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["y"] == [1.0, 2.0, 5.0]
    return result


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])


def _garble(path: Path) -> None:
    path.write_bytes(b"\x80\x05garbage" + os.urandom(40))


@pytest.mark.slow
@pytest.mark.parametrize("pattern, damage", [
    ("*.nbi", _truncate), ("*.nbc", _garble), ("*.nbc", _truncate), ("*.pyc", _garble),
    ("dualad_kernel_*.py", _truncate),
], ids=["index_truncated", "data_garbled", "data_truncated", "pyc_garbled", "module_truncated"])
def test_a_damaged_cache_file_is_rebuilt_with_one_warning(tmp_path, pattern, damage):
    cache = tmp_path / "cache"
    first = _run(cache)
    assert first["warnings"] == [] and first["hits"] == 0
    assert _run(cache)["hits"] == 1  # a second process loads the cache
    files = sorted(cache.rglob(pattern))
    if not files:
        pytest.skip(f"no {pattern} written here")
    for f in files:
        damage(f)
    repaired = _run(cache)
    if pattern == "*.pyc":  # Python itself checks the header and compiles the source again
        assert len(repaired["warnings"]) <= 1
    else:
        assert len(repaired["warnings"]) == 1, repaired
        assert "rebuilt" in repaired["warnings"][0]
    after = _run(cache)  # rebuilt: the next process loads it again, silently
    assert after["warnings"] == [] and after["hits"] == 1


@pytest.mark.slow
def test_four_processes_on_an_empty_cache_at_once(tmp_path):
    cache = tmp_path / "cache"
    runs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=_env(cache), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    for p in runs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["y"] == [1.0, 2.0, 5.0] and result["warnings"] == []
    assert _run(cache)["hits"] == 1


@pytest.mark.slow
def test_bytecode_and_intact_marks_are_kept_where_bytecode_writing_is_off(tmp_path):
    """PYTHONDONTWRITEBYTECODE keeps .pyc files out of source trees; the kernel cache keeps
    its modules' bytecode anyway (and marks the Numba files it found intact), and a
    damaged file is still found after that mark."""
    cache = tmp_path / "cache"

    def run() -> dict:
        env = dict(_env(cache), PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["y"] == [1.0, 2.0, 5.0]
        return result

    assert run()["hits"] == 0
    assert len(list(cache.rglob("dualad_kernel_*.pyc"))) == 1
    second = run()
    assert second["hits"] == 1 and second["warnings"] == []
    assert len(list(cache.rglob("dualad_kernel_*.intact"))) == 1
    for f in cache.rglob("*.nbc"):
        _truncate(f)
    repaired = run()
    assert len(repaired["warnings"]) == 1 and "rebuilt" in repaired["warnings"][0]
    assert run()["hits"] == 1
