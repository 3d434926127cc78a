"""Jacobian patterns and colourings kept on disk by program (dualad.tape.pattern_cache):
a second function of the same program reads the pattern instead of detecting it; another
program, a damaged file or a foreign one is detected again; results always match eager
mode and central differences."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import jit as jit_module
from dualad.tape.pattern_cache import Pattern, digest, load_pattern, store_pattern

pytest.importorskip("numba")


def brusselator(y, n=4, alpha=10.0):
    u, v = y[:n * n].reshape(n, n), y[n * n:].reshape(n, n)

    def lap(a):
        return (np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1)
                + np.roll(a, -1, 1) - 4 * a) * n * n

    uuv = u * u * v
    return np.concatenate([(1.0 + uuv - 4.4 * u + alpha * lap(u)).ravel(),
                           (3.4 * u - uuv + alpha * lap(v)).ravel()])


def chain_rhs(y):  # tridiagonal: a dense Jacobian seeded compressed
    out = -2.0 * y ** 3
    out[1:] += np.sin(y[:-1])
    out[:-1] += y[1:] * y[1:]
    return out


@pytest.fixture
def detections(monkeypatch):
    """The number of patterns detected (not read from disk) so far."""
    count = [0]
    original = jit_module.Jitted._pattern

    def counting(self, code, wanted):
        detect = self.options.get("detect")
        if detect is not None:
            def counted(*args):
                count[0] += 1
                return detect(*args)
            self.options["detect"] = counted
        try:
            return original(self, code, wanted)
        finally:
            if detect is not None:
                self.options["detect"] = detect

    monkeypatch.setattr(jit_module.Jitted, "_pattern", counting)
    return count


def _check_sparse(jac, f, y):
    J = jac(y)
    expected = ad.sparse_jacobian(f)(y)
    assert J.format == "csr" and J.shape == expected.shape and J.nnz == expected.nnz
    np.testing.assert_allclose(J.toarray(), expected.toarray(), rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(J.toarray(), numerical_jacobian(f, (y,), 0), rtol=1e-6, atol=1e-6)


def test_a_second_function_of_the_same_program_reads_the_pattern(cache, detections):
    y = np.random.default_rng(0).uniform(0.5, 2.0, 32)
    _check_sparse(ad.jit(ad.sparse_jacobian(brusselator), fallback="error"), brusselator, y)
    assert detections[0] == 1 and len(list((cache / "patterns").iterdir())) == 1
    again = ad.jit(ad.sparse_jacobian(brusselator), fallback="error")
    for y in np.random.default_rng(1).uniform(0.5, 2.0, (2, 32)):
        _check_sparse(again, brusselator, y)
    assert detections[0] == 1  # read, not detected


def test_another_program_detects_its_own_pattern(cache, detections):
    y = np.random.default_rng(2).uniform(0.5, 2.0, 32)
    ad.jit(ad.sparse_jacobian(brusselator), fallback="error")(y)

    def other(y):  # another constant: another program, the same pattern
        return brusselator(y, alpha=3.0)

    def wider(y):  # another pattern: a coupling the first lacks
        return brusselator(y) + y[0] * y[-1]

    _check_sparse(ad.jit(ad.sparse_jacobian(other), fallback="error"), other, y)
    _check_sparse(ad.jit(ad.sparse_jacobian(wider), fallback="error"), wider, y)
    assert detections[0] == 3 and len(list((cache / "patterns").iterdir())) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_a_damaged_pattern_file_is_detected_again(cache, detections, damage):
    y = np.random.default_rng(3).uniform(0.5, 2.0, 8)
    ad.jit(ad.jacobian(chain_rhs), fallback="error")(y)
    assert detections[0] == 1
    (path,) = (cache / "patterns").iterdir()
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":  # one byte of the column indices: the checksum sees it
        data[-12] ^= 0x01
    else:  # another program's file under this name
        data = b"0" * 64 + data[data.index(b"\n"):]
    path.write_bytes(bytes(data))
    jac = ad.jit(ad.jacobian(chain_rhs), fallback="error")
    for x in (y, y[::-1].copy()):
        np.testing.assert_allclose(jac(x), ad.jacobian(chain_rhs)(x), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(jac(x), numerical_jacobian(chain_rhs, (x,), 0), rtol=1e-6,
                                   atol=1e-6)
    assert detections[0] == 2  # detected again, and kept anew
    assert load_pattern(path.read_bytes().split(b"\n")[0].decode()) is not None


def test_store_and_load_round_trip(cache):
    p = Pattern((3, 4), np.array([0, 2, 3, 5]), np.array([0, 3, 1, 2, 3]),
                np.array([0, 1, 0, 1]))
    key = digest(["a program", np.arange(3)])
    assert load_pattern(key) is None
    store_pattern(key, p)
    got = load_pattern(key)
    assert got is not None and got.shape == (3, 4)
    for name in ("indptr", "indices", "colors"):
        np.testing.assert_array_equal(getattr(got, name), getattr(p, name))
    assert load_pattern(digest(["another program"])) is None


def test_digest_tells_programs_apart():
    from dualad.tape.lowering import Operand

    base = [Operand(1, np.arange(3)), "sin", (2, 0.5)]
    assert digest(base) == digest([Operand(1, np.arange(3)), "sin", (2, 0.5)])
    for other in ([Operand(2, np.arange(3)), "sin", (2, 0.5)],
                  [Operand(1, np.arange(3)[::-1]), "sin", (2, 0.5)],
                  [Operand(1, np.arange(3)), "cos", (2, 0.5)],
                  [Operand(1, np.arange(3)), "sin", (2, 0.25)],
                  [Operand(1, np.arange(3)), "sin", [2, 0.5]],
                  [Operand(1, np.arange(3.0)), "sin", (2, 0.5)]):
        assert digest(other) != digest(base)
    assert digest([object()]) is None  # what it cannot read: no digest, nothing kept
