"""Fixtures of the compiled-tape tests."""

import os

import pytest

import dualad.tape.numba_backend as backend


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """Generated modules and Numba's caches in a directory of the test module's own (the
    jit test modules use it for every test: ``pytestmark = usefixtures("kernel_cache")``)."""
    path = tmp_path_factory.mktemp("kernels")
    old = os.environ.get("DUALAD_KERNEL_CACHE")
    os.environ["DUALAD_KERNEL_CACHE"] = str(path)
    yield path
    if old is None:
        del os.environ["DUALAD_KERNEL_CACHE"]
    else:
        os.environ["DUALAD_KERNEL_CACHE"] = old


@pytest.fixture
def small_cap(monkeypatch):
    """A compile-cost cap that every program exceeds: they all run interpreted."""
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 1)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty kernel cache of the test's own (``$DUALAD_KERNEL_CACHE``): what it keeps
    on disk is read back by the test alone."""
    monkeypatch.setenv("DUALAD_KERNEL_CACHE", str(tmp_path))
    return tmp_path
