"""Messages in the user's words: the transform the user called is the one named, traced
values are described as arrays (not graph nodes or Duals), scipy functions are named as
the user imported them, every lossy conversion of a traced value fails alike (naming
ad.value), format() prints the value, compiled code reached by a traced value gets advice,
no RuntimeWarning comes from a derivative formula at its documented special points, and the
public surfaces (dir(dualad), help(ad.gradient)) are short."""

import math
import pydoc
import warnings

import numpy as np
import pytest

import dualad as ad

INTERNAL_NAMES = ("CachedNode", "MutableNode", "value_and_grad(", "_jacobian", "plum")


def _message(call):
    with pytest.raises(Exception) as info:
        call()
    return str(info.value)


# -- the transform the user called is the one named --------------------------------------------

@pytest.mark.parametrize("name, call", [
    ("grad(", lambda: ad.grad(lambda x: x * 2.0)(np.ones(2))),
    ("value_and_grad(", lambda: ad.value_and_grad(lambda x: x * 2.0)(np.ones(2))),
    ("hessian(", lambda: ad.hessian(lambda x: x * 2.0)(np.ones(2))),
    ("jacobian(", lambda: ad.jacobian(lambda x: None)(np.ones(2))),
    ("vjp(", lambda: ad.vjp(lambda x: None, np.ones(2))),
    ("jvp(", lambda: ad.jvp(lambda x: None, (np.ones(2),), (np.ones(2),))),
    ("derivative(", lambda: ad.derivative(lambda x: None)(1.0)),
    ("grad(", lambda: ad.grad(lambda x: np.sum(x), argnums=3)(np.ones(2))),
])
def test_errors_name_the_transform_called(name, call):
    message = _message(call)
    assert message.startswith(name), message
    if name != "value_and_grad(":
        assert "value_and_grad(" not in message


@pytest.mark.parametrize("call", [
    lambda: ad.grad(lambda x: np.sum(x), has_aux=True)(np.ones(2)),
    lambda: ad.grad(lambda x: float(x) * x)(1.0),
    lambda: ad.jacobian(lambda x: float(x[0]) * x, mode="forward")(np.ones(2)),
    lambda: ad.grad(lambda x: np.sum(np.empty(2).__setitem__(0, x[0]) or x),
                    allocations="strict")(np.ones(2)),
])
def test_messages_use_user_facing_type_names(call):
    message = _message(call)
    for internal in INTERNAL_NAMES:
        assert internal not in message, message
    assert "traced Variable" not in message and "traced Dual" not in message


# -- scipy functions as the user imported them --------------------------------------------------

@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_missing_scipy_special_rule_names_scipy_special(mode):
    special = pytest.importorskip("scipy.special")
    name = next((n for n in ("gammainc", "gammaincc", "betainc", "ellipkinc")
                 if _has_no_rule(getattr(special, n), mode)), None)
    if name is None:
        pytest.skip("every candidate scipy.special function has a rule now")
    f = getattr(special, name)
    with pytest.raises(ad.MissingRuleError) as info:
        ad.jacobian(lambda x: f(2.0, x) if f.nin == 2 else f(2.0, 0.5, x),
                    mode=mode)(np.array([0.5, 0.7]))
    message = str(info.value)
    assert f"scipy.special.{name}" in message
    assert f"np.{name}" not in message


def _has_no_rule(f, mode):
    try:
        ad.jacobian(lambda x: f(2.0, x) if f.nin == 2 else f(2.0, 0.5, x),
                    mode=mode)(np.array([0.5, 0.7]))
    except ad.MissingRuleError:
        return True
    except Exception:  # noqa: BLE001 - another failure: not a candidate
        return False
    return False


def test_missing_numpy_rule_still_says_np():
    f = next(getattr(np, n) for n in ("i0", "sinc", "unwrap", "ediff1d") if hasattr(np, n)
             and _no_grad_rule(getattr(np, n)))
    message = _message(lambda: ad.grad(lambda x: np.sum(f(x)))(np.array([0.1, 0.2])))
    assert f"np.{f.__name__}" in message


def _no_grad_rule(f):
    try:
        ad.grad(lambda x: np.sum(f(x)))(np.array([0.1, 0.2]))
    except ad.MissingRuleError:
        return True
    except Exception:  # noqa: BLE001
        return False
    return False


# -- conversions of traced values -------------------------------------------------------------

CONVERSIONS = {
    "float()": float,
    "int()": int,
    "round()": round,
    ".item()": lambda x: x.item(),
    ".tolist()": lambda x: x.tolist(),
    "math.sin": math.sin,
}


@pytest.mark.parametrize("what", sorted(CONVERSIONS))
@pytest.mark.parametrize("transform", ["grad", "derivative", "jacobian-forward"])
def test_every_lossy_conversion_fails_like_float(what, transform):
    convert = CONVERSIONS[what]
    f = lambda x: convert(x) * x  # noqa: E731
    calls = {
        "grad": lambda: ad.grad(f)(1.5),
        "derivative": lambda: ad.derivative(f)(1.5),
        "jacobian-forward": lambda: ad.jacobian(lambda x: convert(x[0]) * x,
                                                mode="forward")(np.ones(2)),
    }
    with pytest.raises(TypeError) as info:
        calls[transform]()
    message = str(info.value)
    assert "ad.value(x)" in message and "would drop its derivative" in message
    if what != "math.sin":
        assert what in message


def test_control_flow_on_traced_values_still_works():
    f = lambda x: x ** 2 if x > 0 else -x  # noqa: E731
    assert float(ad.grad(f)(3.0)) == 6.0
    assert float(ad.grad(f)(-3.0)) == -1.0
    assert float(ad.derivative(f)(3.0)) == 6.0


def test_ad_value_reads_the_number():
    seen = []
    ad.grad(lambda x: (seen.append(float(ad.value(x))), x * 2)[1])(1.25)
    assert seen == [1.25]


@pytest.mark.parametrize("transform", ["grad", "derivative", "jvp"])
def test_format_of_a_traced_scalar_prints_its_value(transform):
    printed = []

    def f(x):
        printed.append(f"{x:.3f}|{format(x, '8.2e')}|{x:>6.1f}")
        return x * 3.0

    {"grad": lambda: ad.grad(f)(2.5), "derivative": lambda: ad.derivative(f)(2.5),
     "jvp": lambda: ad.jvp(f, (2.5,), (1.0,))}[transform]()
    assert printed == ["2.500|2.50e+00|   2.5"]


# -- compiled code ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["grad", "forward", "reverse"])
def test_traced_value_reaching_compiled_code_suggests_primitive(mode):
    ndimage = pytest.importorskip("scipy.ndimage")
    f = lambda x: ndimage.gaussian_filter1d(x, 1.0)  # noqa: E731
    with pytest.raises(ad.DualadError) as info:
        if mode == "grad":
            ad.grad(lambda x: np.sum(f(x)))(np.ones(5))
        else:
            ad.jacobian(f, mode=mode)(np.ones(5))
    message = str(info.value)
    assert "ad.primitive" in message and "compiled code" in message
    assert isinstance(info.value.__cause__, Exception)


def test_compiled_code_advice_is_not_given_for_the_users_own_errors():
    def f(x):
        raise ValueError("my own error")

    with pytest.raises(ValueError, match="my own error") as info:
        ad.grad(f)(1.0)
    assert not isinstance(info.value, ad.DualadError)


def test_compiled_code_wrapped_with_primitive_and_a_rule_works():
    ndimage = pytest.importorskip("scipy.ndimage")

    @ad.primitive
    def smooth(x):
        return ndimage.gaussian_filter1d(x, 1.0, mode="wrap")

    @ad.gradient.dispatch
    def gradient(op: ad.Method[smooth], grad, output, x):  # symmetric kernel, periodic
        return (ndimage.gaussian_filter1d(grad, 1.0, mode="wrap"),)

    x = np.linspace(0, 1, 6)
    g = ad.grad(lambda x: np.sum(smooth(x) * x))(x)
    from dualad.diagnostics.gradcheck import numerical_jacobian
    np.testing.assert_allclose(g, numerical_jacobian(lambda x: np.sum(smooth(x) * x), (x,), 0),
                               rtol=1e-6, atol=1e-9)


# -- no RuntimeWarnings from derivative formulas at documented points ----------------------------

SPECIAL_POINTS = [
    ("sqrt'(0) = inf", np.sqrt, 0.0),
    ("arcsin'(1) = inf", np.arcsin, 1.0),
    ("arcsin'(-1) = inf", np.arcsin, -1.0),
    ("arccos'(1) = -inf", np.arccos, 1.0),
    ("cbrt'(0) = inf", np.cbrt, 0.0),
    ("abs'(0) = 0", np.abs, 0.0),
    ("sign'(0) = 0", np.sign, 0.0),
    ("x ** 0.5 at 0", lambda x: x ** 0.5, 0.0),
]


@pytest.mark.parametrize("label, f, x", SPECIAL_POINTS, ids=[p[0] for p in SPECIAL_POINTS])
@pytest.mark.parametrize("how", ["grad", "derivative", "jacobian-forward", "jacobian-reverse"])
def test_no_runtime_warning_at_documented_points(label, f, x, how):
    calls = {
        "grad": lambda: ad.grad(f)(x),
        "derivative": lambda: ad.derivative(f)(x),
        "jacobian-forward": lambda: ad.jacobian(f, mode="forward")(np.array([x])),
        "jacobian-reverse": lambda: ad.jacobian(f, mode="reverse")(np.array([x])),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = np.asarray(calls[how]()).reshape(-1)[0]
    with np.errstate(all="ignore"):
        expected = {"sqrt": np.inf, "arcsin": np.inf, "arccos": -np.inf, "cbrt": np.inf,
                    "abs": 0.0, "sign": 0.0, "x ": np.inf}[label.split("'")[0].split("*")[0]]
    assert result == expected


# -- surfaces -------------------------------------------------------------------------------------

def test_dir_lists_the_public_api_only():
    names = dir(ad)
    assert set(ad.__all__) <= set(names)
    for internal in ("annotations", "api", "core", "derivatives", "numpy_rules", "reverse",
                     "scipy_dropins", "extend", "_numpy_rules"):
        assert internal not in names
    import dualad.extend  # submodules stay importable
    assert ad.forward is dualad.core.dispatch.forward  # the rule function, not the package


@pytest.mark.parametrize("rule_function", [ad.gradient, ad.forward])
def test_help_of_a_rule_function_is_short_and_shows_how_to_add_a_rule(rule_function):
    text = pydoc.render_doc(rule_function, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 150
    name = rule_function.__name__
    assert f"@ad.{name}.dispatch" in text and ">>>" in text and "ad.Method[" in text
