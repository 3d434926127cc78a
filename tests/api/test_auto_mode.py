"""jacobian(mode="auto") chooses forward mode when the input is not larger than the output
and reverse mode otherwise, with one plain trial call of f per argument signature (the
first time), not per Jacobian; results equal the forced modes."""

import numpy as np
import pytest

import dualad as ad


def counting(f):
    calls = []

    def g(*args, **kwargs):
        calls.append(1)
        return f(*args, **kwargs)

    return g, calls


@pytest.mark.parametrize("n_in, n_out, mode", [(3, 5, "forward"), (4, 4, "forward"),
                                               (6, 2, "reverse"), (5, 1, "reverse")])
def test_auto_calls_f_once_per_jacobian_after_the_first(n_in, n_out, mode, monkeypatch):
    a = np.arange(1.0, n_out * n_in + 1).reshape(n_out, n_in) / 10.0

    def f(x):
        return np.tanh(a @ x) if n_out > 1 else np.sum(np.tanh(a @ x))

    g, calls = counting(f)
    import dualad.api as api
    used = []
    for name in ("jacobian_forward", "jacobian_reverse"):
        real = getattr(api, name)
        monkeypatch.setattr(api, name, lambda *a, _r=real, _n=name, **k: (used.append(_n),
                                                                           _r(*a, **k))[1])
    jac = ad.jacobian(g)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n_in)
    first = jac(x)
    assert len(calls) == 2  # the trial call, then the Jacobian's pass
    for _ in range(3):
        x = rng.standard_normal(n_in)
        before = len(calls)
        used.clear()
        got = jac(x)
        assert len(calls) - before == 1  # no trial call any more
        assert used == [f"jacobian_{mode}"]
        np.testing.assert_allclose(got, ad.jacobian(f, mode=mode)(x), rtol=1e-12)
        other = "reverse" if mode == "forward" else "forward"
        np.testing.assert_allclose(got, ad.jacobian(f, mode=other)(x), rtol=1e-12)
    assert first.shape == np.shape(f(x)) + (n_in,)


def test_auto_decides_again_for_a_new_signature():
    def f(x, m):
        return np.sum(x) * np.ones(m)  # the output size is set by the int m

    g, calls = counting(f)
    jac = ad.jacobian(g)
    x = np.ones(4)
    np.testing.assert_allclose(jac(x, 8), np.ones((8, 4)))  # forward (4 <= 8)
    np.testing.assert_allclose(jac(x, 1), np.ones((1, 4)))  # a new signature: decided again
    assert len(calls) == 4
    jac(x, 8)
    jac(x, 1)
    assert len(calls) == 6
    y = np.ones(5)  # a new shape: decided again
    jac(y, 8)
    assert len(calls) == 8


def test_auto_with_trees_and_keywords():
    def f(p, scale=1.0):
        return {"a": p["w"] * scale, "b": np.sum(p["v"])}

    g, calls = counting(f)
    jac = ad.jacobian(g)
    p = {"w": np.ones(2), "v": np.arange(3.0)}
    j1 = jac(p, scale=2.0)
    j2 = jac(p, scale=3.0)
    assert len(calls) == 3
    np.testing.assert_allclose(j2["a"]["w"], 3.0 * np.eye(2))
    np.testing.assert_allclose(j1["b"]["v"], np.ones(3))
