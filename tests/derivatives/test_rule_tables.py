"""The rules tables: loading, validation errors, coverage of numpy, and define_rule."""

import textwrap

import numpy as np
import pytest

import dualad as ad
from dualad.core.dispatch import gradient
from dualad.core.errors import RuleTableError
from dualad.core.operators import Broadcasted
from dualad.derivatives.registry import (
    define_elementwise_rule,
    define_rule,
    get_rule,
    on_rule_registered,
    rules,
)
from dualad.derivatives.tables import Domain, load_table, parse_domain, rules_directory, table_path

NUMPY = load_table(table_path("numpy_ufuncs"))

REQUIRED_NUMPY = """
negative positive absolute fabs sign add subtract multiply divide true_divide floor_divide
power float_power square sqrt cbrt reciprocal exp exp2 expm1 log log2 log10 log1p logaddexp
logaddexp2 sin cos tan arcsin arccos arctan arctan2 hypot sinh cosh tanh arcsinh arccosh
arctanh deg2rad rad2deg degrees radians maximum minimum fmax fmin floor ceil trunc rint mod
fmod remainder copysign ldexp heaviside
""".split()

REQUIRED_SCIPY = """
erf erfc erfinv erfcinv gamma gammaln digamma polygamma expit logit xlogy xlog1py i0 i1 j0
j1 y0 y1
""".split()


def test_tables_live_in_the_rules_directory():
    assert table_path("numpy_ufuncs").parent == rules_directory()
    assert table_path("numpy_ufuncs").is_file()
    assert table_path("scipy_special").is_file()


@pytest.mark.parametrize("name", REQUIRED_NUMPY)
def test_required_numpy_functions_have_rules(name):
    rule = get_rule(getattr(np, name))
    assert rule is not None
    assert rule.function is getattr(np, name)


@pytest.mark.parametrize("name", REQUIRED_SCIPY)
def test_required_scipy_functions_have_rules(name):
    special = pytest.importorskip("scipy.special")
    from dualad.derivatives.registry import define_table_rules

    define_table_rules(scipy=True)
    assert get_rule(getattr(special, name)) is not None


def _takes_floats(u):
    return any("d" in t.split("->")[0] for t in u.types)


def test_every_float_ufunc_has_a_rule_or_is_listed_not_differentiable():
    covered = {e.function for e in NUMPY.entries}
    listed = {getattr(np, n) for n in NUMPY.not_differentiable}
    missing = sorted(
        name
        for name in dir(np)
        if isinstance(getattr(np, name), np.ufunc)
        and _takes_floats(getattr(np, name))
        and getattr(np, name) not in covered | listed
    )
    assert missing == []
    assert not covered & listed


def test_aliases_and_distinct_ufuncs():
    assert get_rule(np.true_divide) is get_rule(np.divide)
    assert get_rule(np.mod) is get_rule(np.remainder)
    assert get_rule(np.abs) is get_rule(np.absolute)
    assert np.degrees is not np.rad2deg
    assert get_rule(np.degrees).name == "degrees" and get_rule(np.rad2deg).name == "rad2deg"
    assert NUMPY.entry("divide").aliases == ("true_divide",)


def test_entries_have_domains_for_every_argument_and_notes_where_conventions_apply():
    for e in NUMPY.entries:
        assert set(e.domain) == set(e.arg_names)
    for name in ("absolute", "sign", "floor", "maximum", "sqrt", "power"):
        assert NUMPY.entry(name).notes


def test_table_gradient_resolves_by_type():
    method = gradient.resolve((Broadcasted[np.sin], float, float, float))
    assert not getattr(method, "__dualad_catch_all__", False)


# -- validation errors ------------------------------------------------------------------


def _table(tmp_path, body, name="bad.toml"):
    path = tmp_path / name
    path.write_text('[table]\nmodule = "numpy"\n\n' + textwrap.dedent(body))
    return path


ENTRY = """
[[rule]]
name = "{name}"
numpy = "{numpy}"
args = {args}
derivatives = {derivs}
domain = {domain}
"""


def _entry(name="sin", numpy="sin", args='["x"]', derivs='["cos(x)"]',
           domain="{ x = [0.0, 1.0] }"):
    return ENTRY.format(name=name, numpy=numpy, args=args, derivs=derivs, domain=domain)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[[rule]\n", "invalid TOML"),
        (_entry(numpy="no_such_ufunc"), "numpy has no function 'no_such_ufunc'"),
        (_entry(args='["x1", "x2"]', derivs='["1", "1"]', domain="{ x1 = [0, 1], x2 = [0, 1] }"),
         "takes 1 argument(s) but args lists 2"),
        (_entry(derivs='["cos(x)", "1"]'), "1 argument(s) need 1 derivative(s), got 2"),
        (_entry(derivs='["cos(x"]'), "expression 'cos(x': invalid syntax"),
        (_entry(derivs='["cosine(x)"]'), "unknown function 'cosine'"),
        (_entry(derivs='["cos(z)"]'), "unknown name 'z'"),
        (_entry(derivs='["not differentiable"]'), "no argument is differentiable"),
        (_entry(domain="{ z = [0.0, 1.0] }"), "domain must give exactly the arguments"),
        (_entry(domain="{ x = [1.0, 0.0] }"), "lo <= hi"),
        (_entry(domain="{ x = { ints = [0, 1] } }"), "integers = [lo, hi]"),
        (_entry() + 'color = "red"\n', "unknown keys ['color']"),
        (_entry().replace('domain = { x = [0.0, 1.0] }', ''), "missing 'domain'"),
        (_entry() + 'aliases = ["cos"]\n', "alias 'cos' is not the same object"),
        (_entry(args='["y"]', derivs='["1"]', domain="{ y = [0, 1] }"), "reserved"),
        (_entry() + _entry(name="sin2"), "the same function as entry 'sin'"),
        (_entry() + '\n[not_differentiable]\nsin = "no"\n', "it also has a rule"),
        ('[[rule]]\nnumpy = "sin"\n', "missing 'name'"),
        (_entry() + 'quiet_when = "small"\n', "'quiet_when' must be one of"),
        (_entry(name="sin_divide", numpy="divide", args='["x1", "x2"]', derivs='["1", "1"]',
                domain="{ x1 = [0, 1], x2 = [0, 1] }") + 'scalar_operator = "/"\n',
         "'/' needs quiet_when"),
    ],
)
def test_table_errors_name_file_and_entry(tmp_path, body, message):
    path = _table(tmp_path, body)
    with pytest.raises(RuleTableError) as info:
        load_table(path)
    msg = str(info.value)
    assert message in msg
    assert str(path) in msg
    if "name = " in body and "invalid TOML" not in message:
        assert "entry 'sin" in msg


def test_domains():
    d = parse_domain({"x": [[-2, -1], [1, 2]], "n": {"integers": [0, 3]}}, ("x", "n"))
    rng = np.random.default_rng(0)
    x = d["x"].sample(rng, (200,))
    assert np.all((np.abs(x) >= 1) & (np.abs(x) <= 2)) and np.any(x < 0) and np.any(x > 0)
    n = d["n"].sample(rng, (200,))
    assert n.dtype.kind == "i" and set(n.tolist()) == {0, 1, 2, 3}
    assert Domain(((0.0, 1.0),)).sample(rng).shape == ()


# -- define_rule ------------------------------------------------------------------------


def test_define_rule_on_a_python_function():
    def softplus(x):
        return np.log1p(np.exp(x))

    sp = define_rule(softplus, args=("x",), derivatives=("1 / (1 + exp(-x))",))
    assert sp is not softplus and sp(0.0) == softplus(0.0)
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(ad.grad(lambda t: np.sum(sp(t)))(x), 1 / (1 + np.exp(-x)))
    assert get_rule(sp) is get_rule(softplus)
    assert ad.gradcheck(sp, x, modes=("reverse",))


def test_define_rule_on_a_ufunc_returns_it():
    special = pytest.importorskip("scipy.special")
    f = define_rule(special.sindg, args=("x",), derivatives=("pi / 180 * cos(x * pi / 180)",))
    assert f is special.sindg
    assert ad.gradcheck(lambda x: special.sindg(x), np.array([10.0, 80.0]), modes=("reverse",))


def test_define_rule_binary_with_broadcasting_and_a_non_differentiable_argument():
    def scaled(x, k):
        return x * 2.0**k

    f = define_rule(scaled, args=("x", "k"), derivatives=("exp2(k)", None))
    x = np.ones((2, 3))
    g = ad.grad(lambda t: np.sum(f(t, np.array([0.0, 1.0, 2.0]))))(x)
    np.testing.assert_allclose(g, np.broadcast_to([1.0, 2.0, 4.0], (2, 3)))
    # k is declared not differentiable: differentiating with respect to it is an error,
    # never a silent zero, in both modes
    with pytest.raises(TypeError, match=r"scaled's rule declares no derivative .* 'k'"):
        ad.grad(lambda t: np.sum(f(np.ones((2, 3)), t)))(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match=r"scaled's rule declares no derivative .* 'k'"):
        ad.jacobian(lambda t: f(np.ones((2, 3)), t), mode="forward")(np.array([1.0, 2.0, 3.0]))


def test_define_rule_wrong_number_of_derivatives():
    def twice(x):
        return 2 * x

    with pytest.raises(ValueError, match=r"define_rule\(.*twice\): 1 argument\(s\).*got 2"):
        define_rule(twice, args=("x",), derivatives=("2", "3"))


def test_define_rule_bad_expression_names_the_function():
    def twice(x):
        return 2 * x

    with pytest.raises(RuleTableError, match=r"entry 'twice', expression 'two\(x\)'"):
        define_rule(twice, args=("x",), derivatives=("two(x)",))


def test_define_rule_ufunc_arity():
    with pytest.raises(ValueError, match="takes 1 argument"):
        define_rule(np.sin, args=("x1", "x2"), derivatives=("1", "1"))
    with pytest.raises(ValueError, match="single-output"):
        define_elementwise_rule(np.modf, ("x",), ("1",))


def test_hooks_see_existing_and_later_rules():
    seen = []
    on_rule_registered(seen.append)
    assert {r.name for r in seen} >= {"sin", "add", "power"}
    assert len(seen) == len(rules())

    def cube(x):
        return x**3

    define_rule(cube, args=("x",), derivatives=("3 * x ** 2",))
    assert seen[-1].name == "cube"


def test_scipy_rules_load_when_first_needed():
    pytest.importorskip("scipy.special")
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import numpy as np, dualad as ad\n"
        "from dualad.derivatives.registry import get_rule\n"
        "import scipy.special as sp\n"
        "assert get_rule(sp.erf) is None  # imported after dualad: held back\n"
        "g = ad.grad(lambda x: np.sum(sp.erf(x)))(np.array([0.0, 1.0]))\n"
        "assert np.allclose(g, 2 / np.sqrt(np.pi) * np.exp(-np.array([0.0, 1.0])))\n"
        "assert get_rule(sp.erf) is not None and get_rule(sp.polygamma) is not None\n"
        "try:\n"
        "    ad.grad(lambda x: np.sum(sp.sindg(x)))(np.ones(2))\n"
        "except ad.MissingRuleError as e:\n"
        "    assert 'sindg' in str(e)\n"
        "else:\n"
        "    raise AssertionError('no MissingRuleError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parent.parent)
