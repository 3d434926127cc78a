"""taylor_test and to_dot."""

import shutil
import subprocess

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.graph_dot import to_dot
from dualad.diagnostics.taylor import taylor_test
from dualad.tape import record


def f(x):
    return np.sum(np.sin(x) * x ** 2) + np.prod(x)


X = np.array([0.3, -1.2, 2.0])
DX = np.array([1.0, 0.5, -2.0])


@pytest.mark.parametrize("order, rate", [(1, 2.0), (2, 3.0)])
def test_taylor_rates(order, rate):
    rates = taylor_test(f, X, DX, order=order)
    assert rates.shape == (4,)
    np.testing.assert_allclose(rates, rate, atol=0.1)


def test_taylor_with_a_tape_gradient():
    tape = record(f, X)
    np.testing.assert_allclose(taylor_test(tape, X * 2, DX, gradient=tape.grad), 2.0,
                               atol=0.1)


def test_taylor_catches_a_wrong_gradient():
    wrong = lambda x: ad.grad(f)(x) * 2.0  # noqa: E731
    with pytest.raises(ad.GradcheckError, match=r"rates \[.*expected about 2"):
        taylor_test(f, X, DX, gradient=wrong)


def test_taylor_catches_a_wrong_rule():
    def cube(x):
        return x ** 3

    cube = ad.primitive(cube)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[cube], grad, output, x):
        return (grad * 2.0 * x ** 2,)  # should be 3 x^2

    with pytest.raises(ad.GradcheckError, match="order=1"):
        taylor_test(lambda x: np.sum(cube(x)), X, DX)


def test_taylor_exact_for_polynomials_and_errors():
    assert np.all(np.isinf(taylor_test(lambda x: np.sum(3 * x), X, DX)))
    assert np.all(np.isinf(taylor_test(lambda x: np.sum(x * x), X, DX, order=2)))
    with pytest.raises(ValueError, match="dx is zero"):
        taylor_test(f, X, np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        taylor_test(f, X, np.ones(2))
    with pytest.raises(ValueError, match="order"):
        taylor_test(f, X, DX, order=3)


def _parse_with_dot(text):
    dot = shutil.which("dot")
    if dot is None:
        pytest.skip("Graphviz's dot program is not installed (apt-get install graphviz)")
    done = subprocess.run([dot, "-Tsvg"], input=text.encode(), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert b"<svg" in done.stdout


def test_dot_of_a_graph():
    x = ad.Variable(np.ones(3))
    y = np.sum(np.sin(x) * 2.0 + x @ np.eye(3))
    text = to_dot(y)
    assert text.startswith("digraph")
    for word in ("sin", "multiply", "matmul", "sum", "input 0", "(3,)", "peripheries=2",
                 "output"):
        assert word in text
    _parse_with_dot(text)


def test_dot_of_a_tape():
    def g(x, w):
        y = np.where(x > 0, x, 0.1 * x) @ w
        return np.sum(y ** 2) if np.sum(y) > 0 else np.sum(y)

    tape = record(g, np.ones(3), np.ones((3, 2)))
    text = to_dot(tape)
    for word in ("tape of g", "input 0", "input 1", "(3, 2)", "where", "matmul", "greater",
                 "guard: bool = True", "style=dashed", "output 0"):
        assert word in text
    _parse_with_dot(text)


def test_dot_of_anything_else_is_a_type_error():
    with pytest.raises(TypeError, match="to_dot expects a graph node"):
        to_dot(np.ones(3))
    with pytest.raises(TypeError, match="got function"):
        to_dot(f)


def test_dot_to_a_file(tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed (apt-get install graphviz)")
    out = tmp_path / "g.svg"
    to_dot(record(f, X), file=str(out))
    assert out.read_text().lstrip().startswith("<?xml")
