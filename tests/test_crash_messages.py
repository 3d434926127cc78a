"""The crash and message list: each case once crashed or misled; now it works or says what
happened and what to do."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

X = np.array([0.3, 1.2, 2.1, 0.7])
MODES = ("forward", "reverse")


def test_interp_with_a_list_of_traced_values_says_to_stack():
    def f(x):
        return np.interp(np.array([0.5, 0.2]), np.array([0.0, 1.0]), [x[0], x[1]])

    for mode in MODES:
        with pytest.raises(TypeError, match=r"np.interp .*np.stack\(\[a, b\]\)"):
            ad.jacobian(f, mode=mode)(X)
    with pytest.raises(TypeError, match=r"record\(f\): np.interp .*np.stack"):
        ad.record(f, X)


@pytest.mark.parametrize("density", [False, True])
def test_histogram_with_traced_weights(density):
    a = np.array([0.1, 0.5, 0.7, 0.9])

    def f(w):
        return np.histogram(a, bins=3, weights=w * w, density=density)[0]

    expected = numerical_jacobian(f, (X,), 0)
    for mode in MODES:
        np.testing.assert_allclose(ad.jacobian(f, mode=mode)(X), expected, atol=1e-6)
    tape = ad.record(lambda w: np.sum(f(w) ** 2), X)
    np.testing.assert_allclose(tape.grad(X + 0.5), ad.grad(lambda w: np.sum(f(w) ** 2))(X + 0.5))
    # the counts are a step function of the samples: derivative zero
    for mode in MODES:
        j = ad.jacobian(lambda s: np.histogram(s, bins=2, range=(0, 1))[0], mode=mode)(a)
        np.testing.assert_array_equal(j, np.zeros((2, 4)))


def test_clip_method_takes_numpys_keywords():
    for mode in MODES:
        for f in (lambda x: x.clip(min=1.0), lambda x: x.clip(max=1.0),
                  lambda x: x.clip(0.5, 2.0), lambda x: x.clip(0.5, max=2.0)):
            np.testing.assert_allclose(ad.jacobian(f, mode=mode)(X),
                                       numerical_jacobian(f, (X,), 0), atol=1e-6)


def test_mean_with_a_where_mask_inside_record():
    def f(x):
        return np.mean(x ** 2, where=x > 1.0)

    tape = ad.record(f, X)
    for x in (X, X[::-1] * 0.9):
        np.testing.assert_allclose(tape.grad(x), ad.grad(f)(x))


@pytest.mark.parametrize("fname, combine", [
    ("sum", r"np.sum\(a\) \+ x"), ("prod", r"np.prod\(a\) \* x"),
    ("max", r"np.maximum\(np.max\(a\), x\)"), ("min", r"np.minimum\(np.min\(a\), x\)"),
])
def test_traced_initial_of_a_plain_reduction_names_the_function_and_the_fix(fname, combine):
    """numpy converts initial= of a reduction of a plain array itself (dualad never sees the
    call) and wraps the refusal in "setting an array element with a sequence"."""
    plain = np.array([1.0, 2.0])
    func = getattr(np, fname)
    f = lambda x: func(plain, initial=x[0]) * x  # noqa: E731
    for mode in ("forward", "reverse"):
        with pytest.raises(ad.DualadError, match=rf"np.{fname}\(a, ..., initial=") as info:
            ad.jacobian(f, mode=mode)(np.array([0.5, 3.0]))
        assert "initial=" in str(info.value) and "plain number" in str(info.value)
        assert info.match(combine)
    with pytest.raises(ad.DualadError, match=combine):
        ad.record(lambda x: np.sum(f(x)), np.array([0.5, 3.0]))
    # the same through a ufunc's reduce (no numpy frame to read): the float() message
    with pytest.raises(ad.DualadError, match=r"initial=x\): write np.sum\(a\) \+ x"):
        ad.grad(lambda x: np.add.reduce(plain, initial=x[0]))(np.array([0.5, 3.0]))


def test_asarray_with_dtype_names_astype():
    for mode in MODES:
        with pytest.raises(ad.ConversionError, match=r"np.asarray\(x, dtype=float\)"):
            ad.jacobian(lambda x: np.asarray(x, dtype=float) * 2.0, mode=mode)(X)


def test_masked_arrays_of_traced_values():
    f = lambda x: np.ma.masked_less(x, 1.0) * 2.0  # noqa: E731
    for mode in MODES:
        j = ad.jacobian(lambda x: np.ma.getdata(f(x)), mode=mode)(X)
        assert j.shape == (4, 4)


def test_scipy_integrate_on_a_traced_value_says_compiled_code():
    integrate = pytest.importorskip("scipy.integrate")

    def by_odeint(p):
        return integrate.odeint(lambda y, t: -p * y, 1.0, [0.0, 1.0])[-1, 0]

    def by_solve_ivp(p):
        return integrate.solve_ivp(lambda t, y: -p * y, (0.0, 1.0), [1.0]).y[0, -1]

    for f, name in ((by_odeint, "odeint"), (by_solve_ivp, "solve_ivp")):
        with pytest.raises(ad.DualadError, match=rf"scipy.integrate.{name} runs compiled"):
            ad.grad(f)(0.5)


@pytest.mark.parametrize("call, dropin", [
    (lambda x: __import__("scipy.special").special.logsumexp(x), "special.logsumexp"),
    (lambda x: np.sum(__import__("scipy.stats").stats.norm.logpdf(x)), "stats.norm.logpdf"),
    (lambda x: np.sum(__import__("scipy.stats").stats.gamma.logpdf(x, 2.0)),
     "stats.gamma.logpdf"),
    (lambda x: np.sum(__import__("scipy.linalg").linalg.expm(x.reshape(2, 2))),
     "linalg.expm"),
])
def test_scipy_function_with_a_dropin_names_it(call, dropin):
    for f in (ad.grad(call), lambda x: ad.jacobian(call, mode="forward")(x)):
        with pytest.raises(ad.DualadError, match=rf"dualad.scipy_rules.{dropin}"):
            f(X)


def test_missing_forward_rule_of_two_arguments_suggests_tangent_rule():
    def times(x, y):
        return x * y

    times = ad.primitive(times)
    with pytest.raises(ad.MissingRuleError, match=r"extend.tangent_rule\(times, duals=\(0, 1\)\)"):
        ad.jacobian(lambda x: times(x, 2.0), mode="forward")(X)
    # the template, followed, works in forward mode and leaves reverse mode alone
    from dualad import extend

    @extend.tangent_rule(times, duals=(0, 1))
    def _(x0, x1):
        tag, [(v0, p0), (v1, p1)] = extend.tangent_parts((x0, x1))
        partials = 0.0
        if p0 is not None:
            partials = partials + p0 * np.asarray(v1)[..., None]
        if p1 is not None:
            partials = partials + p1 * np.asarray(v0)[..., None]
        return extend.Dual(v0 * v1, partials, tag)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[times], grad, output, x0, x1):
        return (grad * x1, grad * x0)

    np.testing.assert_allclose(ad.jacobian(lambda x: times(x, x), mode="forward")(X),
                               np.diag(2 * X))
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(times(x, 2.0)))(X), np.full(4, 2.0))


def test_scipy_array_api_mode_is_a_clear_error_not_a_key_error():
    import os
    import subprocess
    import sys

    code = ("import numpy as np, dualad as ad, scipy.special as sp\n"
            "try:\n"
            "    ad.jacobian(lambda x: sp.betainc(2.0, 3.0, x), mode='forward')(np.ones(2) / 3)\n"
            "except ad.DualadError as e:\n"
            "    print('CLEAR', e)\n")
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, cwd=os.path.dirname(os.path.abspath(__file__)))
    assert "KeyError" not in run.stderr, run.stderr
    assert "CLEAR" in run.stdout and "SCIPY_ARRAY_API=1" in run.stdout, run.stdout + run.stderr


def test_define_rule_on_an_njit_helper_keeps_the_model_callable_by_numba(tmp_path,
                                                                         monkeypatch):
    pytest.importorskip("numba")
    import importlib

    (tmp_path / "njit_helper_model.py").write_text(
        "import numba\nimport numpy as np\n\n\n"
        "@numba.njit\ndef softplus(x):\n    return np.log1p(np.exp(x))\n\n\n"
        "@numba.njit\ndef model(x):\n    out = np.empty_like(x)\n"
        "    for i in range(x.shape[0]):\n        out[i] = softplus(x[i]) * 2.0\n"
        "    return out\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("njit_helper_model")
    mod.softplus = ad.define_rule(mod.softplus, args=("x",),
                                  derivatives=("1 / (1 + exp(-x))",))
    x = np.array([0.1, -0.3])
    expected = 2.0 * np.log1p(np.exp(x))
    np.testing.assert_allclose(mod.model(x), expected)  # numba, outside dualad
    np.testing.assert_allclose(ad.jacobian(mod.model)(x), np.diag(2.0 / (1.0 + np.exp(-x))))
    np.testing.assert_allclose(mod.model(x), expected)
    np.testing.assert_allclose(ad.grad(lambda v: np.sum(mod.softplus(v)))(x),
                               1.0 / (1.0 + np.exp(-x)))
