"""The derivative-expression language: checking, compiling to numpy, Numba kernels."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dualad as ad
from dualad.core.errors import RuleTableError
from dualad.derivatives.language import (
    NOT_DIFFERENTIABLE,
    check_arg_names,
    compile_derivatives,
    kernel_masks,
    kernel_module_source,
    parse_expression,
)
from dualad.derivatives.registry import get_rule, kernel_cache_directory, rules

# -- checking ---------------------------------------------------------------------------


def test_names_and_constants():
    d = parse_expression("where(x1 == 0, 0, log(x2)) * y + pi", ("x1", "x2"))
    assert d.names == {"x1", "x2", "y"}
    assert d.constant is None
    assert parse_expression("2 * pi / 4", ("x",)).constant == pytest.approx(np.pi / 2)
    assert parse_expression("1 - 1", ("x",)).is_zero
    assert parse_expression("log(2)", ("x",)).constant == pytest.approx(np.log(2))


@pytest.mark.parametrize("marker", [None, NOT_DIFFERENTIABLE, "  not differentiable "])
def test_not_differentiable_marker(marker):
    d = parse_expression(marker, ("x",))
    assert not d.differentiable and d.tree is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cos(x", "invalid syntax"),
        ("foo(x)", "unknown function 'foo'"),
        ("z + 1", "unknown name 'z'"),
        ("exp", "it is a function"),
        ("x < 1", "only as the condition of where"),
        ("np.exp(x)", "only plain function names"),
        ("exp(x, out=x)", "positional arguments only"),
        ("exp(*x)", "positional arguments only"),
        ("'a'", "not a number"),
        ("True", "not a number"),
        ("where(x, 1, 0)", "must be a comparison"),
        ("where(x > 0, 1)", "exactly 3 arguments"),
        ("where(x > 0 and x < 1, 1, 0)", "& and |"),
        ("isnan(x)", "is a condition"),
        ("x if x > 0 else 1", "IfExp is not allowed"),
        ("x[0]", "Subscript is not allowed"),
        ("x % 2", "BinOp is not allowed"),
        ("__import__('os')", "unknown function"),
        ("exp()", "needs an argument"),
    ],
)
def test_bad_expressions_name_table_entry_and_expression(text, message):
    with pytest.raises(RuleTableError) as info:
        parse_expression(text, ("x",), table="my_table.toml", entry="my_entry")
    msg = str(info.value)
    assert message in msg
    assert "my_table.toml" in msg and "'my_entry'" in msg and repr(text) in msg
    assert isinstance(info.value, ValueError)


def test_conditions_combine_with_and_or_not():
    f = compile_derivatives(
        ("x",), ("where((x > 0) & ~(x > 2) | isnan(x), 1, 0)",), name="band"
    )
    np.testing.assert_array_equal(f(np.array([-1.0, 1.0, 3.0, np.nan]), 0)[0], [0, 1, 0, 1])
    g = compile_derivatives(("x",), ("where(0 < x < 1, 1, 0)",), name="chain")
    np.testing.assert_array_equal(g(np.array([-0.5, 0.5, 1.5]), 0)[0], [0, 1, 0])


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("y",), "reserved for the output"),
        (("x", "x"), "repeated"),
        (("exp",), "function or constant"),
        (("pi",), "function or constant"),
        (("_x",), "underscore"),
        (("1x",), "not an identifier"),
    ],
)
def test_bad_argument_names(names, message):
    with pytest.raises(RuleTableError, match=message):
        check_arg_names(names, table="t.toml", entry="e")


# -- compiling to numpy -----------------------------------------------------------------


def test_compiled_derivatives_are_correct():
    x = np.linspace(-0.9, 0.9, 7)
    (d,) = compile_derivatives(("x",), ("1 - y * y",), name="tanh")(x, np.tanh(x))
    np.testing.assert_allclose(d, 1 / np.cosh(x) ** 2)
    d1, d2 = compile_derivatives(("x1", "x2"), ("1 / x2", "-y / x2"), name="divide")(
        x, 2.0, x / 2.0
    )
    np.testing.assert_allclose(d1, 0.5)
    np.testing.assert_allclose(d2, -x / 4)


def test_non_differentiable_argument_gives_none():
    d = compile_derivatives(("x", "e"), ("exp2(e)", None), name="ldexp")
    assert d(1.5, 3, 12.0) == (8.0, None)


def test_common_subexpressions_are_computed_once():
    d = compile_derivatives(
        ("x1", "x2"), ("x2 / (x1 * x1 + x2 * x2)", "-x1 / (x1 * x1 + x2 * x2)"), name="atan2"
    )
    assert d.source.count(" + ") == 1  # the shared denominator is computed once
    np.testing.assert_allclose(d(1.0, 2.0, 0.0), (0.4, -0.2))


def test_wrong_number_of_derivatives():
    with pytest.raises(RuleTableError, match="2 arguments but 1 derivatives"):
        compile_derivatives(("x1", "x2"), ("1",), name="f")


class Recorder(np.lib.mixins.NDArrayOperatorsMixin):
    """A foreign array type: numpy's protocols (operators map to ufuncs); records calls."""

    calls: list = []

    def __init__(self, v):
        self.v = np.asarray(v, dtype=float)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        Recorder.calls.append(ufunc.__name__)
        vals = [i.v if isinstance(i, Recorder) else i for i in inputs]
        return Recorder(getattr(ufunc, method)(*vals, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        Recorder.calls.append(func.__name__)
        vals = [a.v if isinstance(a, Recorder) else a for a in args]
        return Recorder(func(*vals, **kwargs))


def test_compiled_functions_use_only_numpy_protocols_and_operators():
    Recorder.calls = []
    d = compile_derivatives(
        ("x",), ("where(x == 0, 0.5, cos(x) - y / x)",), name="probe"
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        (out,) = d(Recorder([0.0, 2.0]), Recorder([0.0, 1.0]))
    assert isinstance(out, Recorder)
    np.testing.assert_allclose(out.v, [0.5, np.cos(2.0) - 0.5])
    assert set(Recorder.calls) == {"equal", "cos", "divide", "subtract", "where"}


def test_compiled_functions_differentiate_again():
    d = get_rule(np.tanh).derivatives
    second = ad.grad(lambda x: np.sum(d(x, np.tanh(x))[0]))(np.array([0.3, -0.7]))
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(second, -2 * np.tanh(x) / np.cosh(x) ** 2)


# -- Numba kernels ----------------------------------------------------------------------


def test_kernel_masks_and_source():
    assert kernel_masks(1) == [(True,)]
    assert kernel_masks(2) == [(True, True), (True, False), (False, True)]
    src = kernel_module_source("tanh", ("x",), [parse_expression("1 - y * y", ("x",))])
    assert src.count("np.tanh(") == 1  # the value is computed once and reused
    assert "@numba.njit(cache=True" in src and "def kernel_1(" in src
    compile(src, "kernel", "exec")


def test_rules_without_kernels():
    assert kernel_module_source("erf", ("x",), [parse_expression("erf(x)", ("x",))]) is None
    assert get_rule(np.ldexp).kernel() is None  # an integer, non-differentiable argument
    assert get_rule(np.heaviside).kernel() is None  # Numba lacks np.heaviside


def _check_fused(rule, seed=0, n=6, k=3):
    rng = np.random.default_rng(seed)
    values = [rule.domain[a].sample(rng, (n,)) for a in rule.arg_names]
    for mask in kernel_masks(len(values)):
        partials = [rng.normal(size=(n, k)) if m else None for m in mask]
        out, outp = rule.fused(values, partials)
        ref_out, ref_outp = rule._fused_numpy(values, partials, k)
        np.testing.assert_allclose(out, ref_out, rtol=1e-13, err_msg=f"{rule.name} {mask}")
        np.testing.assert_allclose(outp, ref_outp, rtol=1e-12, atol=1e-300,
                                   err_msg=f"{rule.name} {mask}")


@pytest.mark.parametrize("f", [np.tanh, np.arctan2, np.maximum, np.power, np.hypot, np.sqrt])
def test_kernel_matches_numpy_derivatives(f):
    rule = get_rule(f)
    assert rule.kernel() is not None
    _check_fused(rule)


def test_fused_broadcasts_values_and_partials():
    rule = get_rule(np.multiply)
    x1, x2 = np.arange(3.0).reshape(3, 1), np.array([1.0, 2.0])
    p1 = np.ones((3, 1, 2))
    out, outp = rule.fused((x1, x2), (p1, None))
    assert out.shape == (3, 2) and outp.shape == (3, 2, 2)
    np.testing.assert_allclose(outp[..., 0], np.broadcast_to(x2, (3, 2)))


@pytest.mark.skipif(not os.environ.get("DUALAD_TEST_ALL_KERNELS"),
                    reason="compiles every kernel (~30 s cold); set DUALAD_TEST_ALL_KERNELS=1")
def test_every_kernel_matches_numpy_derivatives():
    for rule in rules():
        if rule.kernel_source is not None:
            _check_fused(rule)


def test_kernel_files_are_written_to_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALAD_KERNEL_CACHE", str(tmp_path))
    assert kernel_cache_directory() == tmp_path
    from dualad.derivatives.registry import import_kernel_module

    # A source of its own, so no module imported earlier in the session is reused.
    source = get_rule(np.negative).kernel_source + f"\n# written for {tmp_path.name}\n"
    module = import_kernel_module(source)
    assert module.__file__.startswith(str(tmp_path))
    assert open(module.__file__).read() == source


def test_import_is_lazy_about_numba_and_scipy():
    code = (
        "import sys, numpy as np, dualad as ad; "
        "ad.grad(lambda x: np.sum(np.sin(x)))(np.ones(3)); "
        "print('numba' in sys.modules, 'scipy.special' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.split() == ["False", "False"]
