"""Bad inputs: each case checks the exception type and that the message names the problem
and the fix. Also the documented behaviour of inputs that are not errors (integers,
booleans, NaN and inf, in-place updates)."""

import contextlib
import operator
import re
import textwrap

import numpy as np
import pytest

import dualad as ad
from dualad.forward_mode.dual import Dual, Tag


@contextlib.contextmanager
def raises(exc, *needles):
    """``pytest.raises`` that also checks the message holds every needle (case-insensitive)."""
    with pytest.raises(exc) as info:
        yield info
    message = str(info.value).lower()
    for needle in needles:
        assert needle.lower() in message, f"{needle!r} not in message: {message}"


# -- missing rules -----------------------------------------------------------------------------


def _array_function_without_a_rule():
    """A numpy function (dispatched through __array_function__) with no gradient rule."""
    for name in ("unwrap", "ediff1d", "sinc", "i0", "polyval"):
        f = getattr(np, name)
        try:
            ad.grad(lambda x, f=f: np.sum(f(x)))(np.array([0.1, 0.2]))
        except ad.MissingRuleError:
            return name, f
        except Exception:  # noqa: BLE001 - a different failure: try the next one
            continue
    raise AssertionError("every candidate has a gradient rule now: add another candidate")


NAME, UNRULED = _array_function_without_a_rule()


def test_missing_rule_for_a_ufunc_names_function_types_and_method():
    with raises(ad.MissingRuleError, "np.modf", "ndarray", "@ad.gradient.dispatch",
                "def gradient(op: ad.Broadcasted[np.modf], grad, output, x)") as info:
        ad.grad(lambda x: np.sum(np.modf(x)[0]))(np.array([1.5, 2.25]))
    assert isinstance(info.value, TypeError) and isinstance(info.value, ad.DualadError)


def test_missing_rule_for_an_array_function_names_function_types_and_method():
    with raises(ad.MissingRuleError, f"np.{NAME}", "ndarray", "@ad.gradient.dispatch",
                f"def gradient(op: ad.Method[np.{NAME}], grad, output, x)"):
        ad.grad(lambda x: np.sum(UNRULED(x)))(np.array([0.1, 0.2]))


def test_missing_rule_for_a_primitive_with_two_arguments_lists_both():
    def blend(a, b):
        return a * 0.3 + b * 0.7

    blend = ad.primitive(blend)
    with raises(ad.MissingRuleError, "blend", "ndarray, float",
                "def gradient(op: ad.Method[blend], grad, output, x0, x1)",
                "return (grad * "):
        ad.grad(lambda x: np.sum(blend(x, 2.0)))(np.ones(2))


def test_missing_forward_rule_names_function_and_forward_method():
    with raises(ad.MissingRuleError, f"np.{NAME}", "Dual", "@ad.forward.dispatch",
                f"ad.Method[np.{NAME}]"):
        ad.jacobian(lambda x: UNRULED(x), mode="forward")(np.array([0.1, 0.2]))


def test_missing_rule_message_method_is_valid_python_shape():
    """The suggested method parses as Python once the derivative placeholder is filled."""
    try:
        ad.grad(lambda x: np.sum(UNRULED(x)))(np.ones(2))
    except ad.MissingRuleError as e:
        text = str(e)
    block = text[text.index("    @ad.gradient.dispatch"):].split("\n\n")[0]
    code = re.sub(r"<[^>]*>", "1", textwrap.dedent(block)).replace(f"np.{NAME}", "f")
    namespace = {"ad": ad, "f": UNRULED}
    exec(compile(code, "<message>", "exec"), namespace)
    assert callable(namespace["gradient"])


# -- seeds, cotangents and rules returning the wrong thing ------------------------------------


def test_seed_of_the_wrong_shape_names_both_shapes():
    x = ad.Variable(np.ones((2, 3)))
    y = x * 2.0
    with raises(ad.ShapeError, "(4,)", "(2, 3)", "seed shaped like the output") as info:
        y.backward(np.ones(4))
    assert isinstance(info.value, ValueError)


def test_missing_seed_for_a_non_scalar_output_says_how_to_seed():
    y = ad.Variable(np.ones(3)) * 2.0
    with raises(ad.ShapeError, "needs a seed", "(3,)", "np.ones"):
        y.backward()


def test_vjp_cotangent_of_the_wrong_shape_names_both_shapes():
    _, pullback = ad.vjp(lambda x: x * 2.0, np.ones(3))
    with raises(ad.ShapeError, "(2,)", "(3,)", "cotangent"):
        pullback(np.ones(2))


def test_vjp_cotangent_of_the_wrong_structure():
    _, pullback = ad.vjp(lambda x: (x * 2.0, x), np.ones(3))
    with raises(ad.ShapeError, "1 leaves", "2", "structure"):
        pullback(np.ones(3))


def _primitive_with_rule(result):
    def op(x, y):
        return x * y

    op = ad.primitive(op)

    @ad.gradient.dispatch
    def gradient(o: ad.Method[op], grad, output, x, y):
        return result(grad, x, y)

    return op


def test_rule_returning_too_few_gradients_names_the_rule_and_counts():
    op = _primitive_with_rule(lambda g, x, y: (g * y,))
    with raises(ad.RuleError, "op", "1 gradient", "2 positional argument", "none"):
        ad.grad(lambda a: np.sum(op(a, 2.0)))(np.ones(3))


def test_rule_returning_a_non_tuple_says_what_to_return():
    op = _primitive_with_rule(lambda g, x, y: g * y)
    with raises(ad.RuleError, "op", "ndarray", "tuple"):
        ad.grad(lambda a: np.sum(op(a, 2.0)))(np.ones(3))


def test_rule_returning_the_wrong_shape_names_the_rule_and_both_shapes():
    op = _primitive_with_rule(lambda g, x, y: (np.sum(g * y), None))
    with raises(ad.ShapeError, "op", "()", "(3,)", "argument 0", "unbroadcast"):
        ad.grad(lambda a: np.sum(op(a, 2.0)))(np.ones(3))


# -- out= and in-place writes ---------------------------------------------------------------


def test_out_argument_of_a_ufunc_is_refused():
    with raises(TypeError, "np.sin", "out=", "y = np.sin(x)"):
        ad.grad(lambda x: np.sum(np.sin(x, out=np.empty(2))))(np.ones(2))


def test_out_argument_of_an_array_function_is_refused():
    with raises(TypeError, "np.sum", "out=", "returned value"):
        ad.grad(lambda x: np.sum(x, out=np.empty(())))(np.ones(2))


def test_writing_a_node_into_a_plain_float_array_slice():
    """With allocations="strict" (the default promotes such buffers: test_allocations)."""
    def f(x):
        buf = np.zeros(2)
        buf[:] = x
        return np.sum(buf)

    with raises(TypeError, "drop its derivative", "np.zeros_like"):
        ad.grad(f, allocations="strict")(np.ones(2))


def test_writing_a_node_into_one_element_of_a_plain_float_array():
    """numpy replaces the error of a single-element write; dualad's message is its cause."""
    def f(x):
        buf = np.zeros(2)
        buf[0] = x[0]
        return np.sum(buf)

    with pytest.raises((TypeError, ValueError)) as info:
        ad.grad(f, allocations="strict")(np.ones(2))
    err = info.value
    message = str(err) + " " + str(err.__cause__ or "")
    assert "drop its derivative" in message and "ad.value" in message


def test_writing_a_dual_into_a_plain_float_array():
    with raises(TypeError, "drop its derivative", "np.zeros_like"):
        np.zeros(2)[:] = Dual(np.ones(2), np.ones((2, 1)))
    with pytest.raises((TypeError, ValueError)) as info:
        np.zeros(2)[0] = Dual(1.0, [1.0])
    assert "drop its derivative" in str(info.value) + str(info.value.__cause__ or "")


def test_item_assignment_on_a_node_was_a_bare_type_error_regression():
    """x[0] = v on a reverse-mode node once gave Python's bare "does not support item
    assignment"; it now says why and what to write instead."""
    def f(x):
        x[0] = 0.0
        return np.sum(x)

    with raises(TypeError, "in place", "reverse mode", "np.where"):
        ad.grad(f)(np.ones(3))


def test_user_function_mutating_its_input_forward_mode_differentiates_the_new_values():
    """Forward mode supports x[i] = c on its Duals: the entry becomes a constant, and the
    caller's array is not touched."""
    data = np.array([1.0, 2.0, 3.0])

    def f(x):
        x[0] = 5.0
        return x * x

    jac = ad.jacobian(f, mode="forward")(data)
    np.testing.assert_array_equal(jac, np.diag([0.0, 4.0, 6.0]))
    np.testing.assert_array_equal(data, [1.0, 2.0, 3.0])


def test_augmented_assignment_rebinds_and_leaves_the_callers_array_alone():
    data = np.array([1.0, 2.0])

    def f(x):
        x += 1.0
        x *= x
        return np.sum(x)

    np.testing.assert_array_equal(ad.grad(f)(data), 2 * (data + 1.0))
    np.testing.assert_array_equal(data, [1.0, 2.0])


def test_float_and_math_functions_on_a_node_say_use_numpy():
    import math

    with raises(TypeError, "float()", "np.sin, not math.sin", "ad.value"):
        ad.grad(lambda x: math.sin(x))(1.0)
    with raises(TypeError, "float()", "ad.value"):
        ad.grad(lambda x: float(x) * x)(1.0)


# -- grad and transforms given the wrong things ----------------------------------------------


def test_non_scalar_output_to_grad_suggests_jacobian_and_vjp():
    with raises(ValueError, "scalar output", "(2,)", "ad.jacobian", "ad.vjp"):
        ad.grad(lambda x: x * 2.0)(np.ones(2))


def test_tuple_output_to_grad_suggests_jacobian_and_vjp():
    with raises(ValueError, "scalar output", "tuple", "ad.jacobian", "ad.vjp"):
        ad.grad(lambda x: (x, x))(1.0)


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)])
def test_argnums_out_of_range_names_the_index_and_the_range(argnums):
    with raises(ValueError, "argnums", "range(2)"):
        ad.grad(lambda a, b: a * b, argnums=argnums)(1.0, 2.0)


@pytest.mark.parametrize("argnums", [(0, 0), (1, -1)])
def test_repeated_argnums_is_refused(argnums):
    with raises(ValueError, "argnums", "repeats", "once"):
        ad.grad(lambda a, b: a * b, argnums=argnums)(1.0, 2.0)


def test_empty_argnums_is_refused():
    with raises(ValueError, "argnums is empty"):
        ad.grad(lambda a: a, argnums=())(1.0)


@pytest.mark.parametrize("argnums", [0.0, "a", None, [0.5]])
def test_argnums_of_the_wrong_type_was_an_obscure_error_regression(argnums):
    """argnums=0.0 once failed with "'float' object is not iterable", "a" with an int()
    parse error, and [0.5] was silently truncated to argument 0."""
    with raises(TypeError, "argnums", "int"):
        ad.grad(lambda a, b: a * b, argnums=argnums)(1.0, 2.0)


@pytest.mark.parametrize("ret, name", [("a string", "str"), (None, "NoneType")])
@pytest.mark.parametrize("transform", ["grad", "jacobian_reverse", "jacobian_forward", "vjp"])
def test_function_returning_a_string_or_none(ret, name, transform):
    f = lambda x: ret  # noqa: E731
    with raises(TypeError, f"returned {name}", "return"):
        if transform == "grad":
            ad.grad(f)(1.0)
        elif transform == "vjp":
            ad.vjp(f, 1.0)
        else:
            ad.jacobian(f, mode=transform.split("_")[1])(1.0)


def test_complex_output_of_grad_and_complex_jacobian_inputs_are_clear_type_errors():
    z = np.array([1.0 + 2.0j, 0.5j])
    with raises(TypeError, "complex", "real-valued output", "np.real"):
        ad.grad(lambda x: np.sum(x * x))(z)
    for mode in ("forward", "reverse"):
        with raises(TypeError, "complex", "holomorphic=True", "real and imaginary parts"):
            ad.jacobian(lambda x: x * x, mode=mode)(z)
    with raises(TypeError, "complex", "mode='reverse'", "real and imaginary parts"):
        ad.derivative(lambda x: x * x)(1.0 + 2.0j)


@pytest.mark.parametrize("bad", [np.array([1.0, "a"], dtype=object), np.array(["a", "b"]),
                                 "text", None], ids=["object", "string array", "str", "None"])
def test_object_and_string_inputs_are_a_clear_type_error(bad):
    with raises(TypeError, "cannot differentiate", "float arrays or numbers"):
        ad.grad(lambda x: np.sum(x))(bad)


def test_backward_of_a_non_node_says_use_grad():
    with raises(TypeError, "graph node", "ad.grad"):
        ad.backward(3.0)


def test_jacobian_mode_and_chunk_are_checked():
    with raises(ValueError, "mode='side'", "forward", "reverse", "auto"):
        ad.jacobian(np.sin, mode="side")
    with raises(ValueError, "chunk=0", "positive int"):
        ad.jacobian(np.sin, chunk=0)


def test_jvp_arguments_are_checked():
    with raises(TypeError, "tuples", "jvp(f, (x,), (v,))"):
        ad.jvp(np.sin, np.ones(2), np.ones(2))
    with raises(ad.ShapeError, "(3,)", "(2,)", "shaped like primals"):
        ad.jvp(np.sin, (np.ones(2),), (np.ones(3),))


def test_gradcheck_failure_reports_the_largest_discrepancy():
    wrong = ad.primitive(lambda x: x ** 2)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[wrong], grad, output, x):
        return (grad * 3 * x,)             # should be 2 * x

    with raises(ad.GradcheckError, "largest discrepancy", "index", "reverse",
                "finite-difference") as info:
        ad.gradcheck(wrong, np.array([1.0, 2.0]), modes=("reverse",))
    assert isinstance(info.value, AssertionError)


# -- Duals mixed by hand --------------------------------------------------------------------


def test_duals_of_two_tags_with_the_same_level_are_refused():
    a, b = Dual(1.0, [1.0], Tag(10**9)), Dual(2.0, [1.0], Tag(10**9))
    with raises(ad.TagMismatchError, "share level", "Tag()") as info:
        a * b
    assert isinstance(info.value, ValueError)


def test_duals_of_different_tags_nest_the_outer_is_a_constant():
    outer = Dual(np.array([2.0]), np.array([[1.0]]), Tag())
    inner = Dual(np.array([3.0]), np.array([[1.0]]), Tag())
    y = outer * inner
    assert y.tag is inner.tag
    # d/d inner of (outer * inner) = outer, itself a Dual of the outer tag
    assert isinstance(y.partials, Dual) and y.partials.tag is outer.tag
    np.testing.assert_array_equal(ad.value(y.partials), [[2.0]])


def test_duals_with_different_numbers_of_directions_are_refused():
    with raises(ad.ShapeError, "directions", "(1 and 2)", "same k"):
        Dual(1.0, [1.0]) * Dual(2.0, [1.0, 2.0])


def test_dual_with_partials_of_the_wrong_shape():
    with raises(ad.ShapeError, "value.shape + (k,)", "(3, 1)"):
        Dual(np.ones(2), np.ones((3, 1)))


# -- rules tables and define_rule -------------------------------------------------------------


@pytest.mark.parametrize("body, needles", [
    ('[[rule]]\nname = "sin"\nnumpy = "sin"\nargs = ["x"]\n', ["sin", "need 1 derivative"]),
    ('[[rule]]\nname = "sin"\nnumpy = "sin"\nargs = ["x"]\nderivatives = ["cos(x)", "1"]\n'
     'domain = { x = [-1.0, 1.0] }\n', ["sin", "1 argument", "got 2"]),
    ('[[rule]]\nname = "nope"\nnumpy = "no_such_function"\nargs = ["x"]\n'
     'derivatives = ["1"]\ndomain = { x = [-1.0, 1.0] }\n', ["no_such_function"]),
    ('[[rule]]\nname = "sin"\nnumpy = "sin"\nargs = ["x"]\nderivatives = ["cos(x"]\n'
     'domain = { x = [-1.0, 1.0] }\n', ["sin", "cos(x"]),
    ('[[rule]]\nname = "sin"\nnumpy = "sin"\nargs = ["x"]\nderivatives = ["cos(x)"]\n'
     'domain = { x = [1.0, -1.0] }\n', ["sin", "domain", "lo <= hi"]),
    ('[[rule]]\nname = "sin"\nnumpy = "sin"\nargs = ["x"]\nderivatives = ["cos(x)"]\n'
     'domain = { x = [-1.0, 1.0] }\nbogus = 1\n', ["sin", "bogus"]),
    ('[[rule\nname = "sin"\n', ["toml"]),
], ids=["no derivatives", "too many derivatives", "unknown function", "syntax error",
        "bad domain", "unknown key", "broken toml"])
def test_malformed_rules_table_names_entry_and_problem(tmp_path, body, needles):
    from dualad.derivatives.tables import load_table

    path = tmp_path / "bad_rules.toml"
    path.write_text('[table]\nmodule = "numpy"\n\n' + body)
    with raises(ad.RuleTableError, *needles) as info:
        load_table(path)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("expr, needle", [
    ("1 / (1 + exp(-x)", "1 / (1 + exp(-x)"),     # unbalanced parenthesis
    ("__import__('os')", "__import__"),          # not an allowed function
    ("frobnicate(x)", "frobnicate"),             # unknown function
    ("x + z", "z"),                              # unknown name
    ("x.real", "x.real"),                        # attribute access
    ("[x]", "[x]"),                              # not an expression of numbers
    ("lambda: x", "lambda"),
], ids=["syntax", "dunder call", "unknown function", "unknown name", "attribute", "list",
        "lambda"])
def test_define_rule_with_a_bad_expression_names_it(expr, needle):
    def my_fn(x):
        return x

    with raises(ad.RuleTableError, needle):
        ad.define_rule(my_fn, args=("x",), derivatives=(expr,))


def test_define_rule_with_the_wrong_number_of_derivatives():
    def my_fn2(x, y):
        return x * y

    with raises(ValueError, "2 argument", "need 2 derivative", "got 1"):
        ad.define_rule(my_fn2, args=("x", "y"), derivatives=("y",))


def test_define_rule_with_a_reserved_argument_name():
    def my_fn3(y):
        return y

    with raises(ad.RuleTableError, "y"):
        ad.define_rule(my_fn3, args=("y",), derivatives=("1",))


# -- documented behaviour: integers, booleans, NaN and inf ------------------------------------


def test_integer_inputs_are_promoted_to_float64():
    g = ad.grad(lambda x: np.sum(x * x))(np.array([1, 2, 3]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])
    assert ad.grad(lambda x: x * x)(3).dtype == np.float64
    jac = ad.jacobian(lambda x: x * x, mode="forward")(np.arange(3))
    np.testing.assert_array_equal(jac, np.diag([0.0, 2.0, 4.0]))


def test_integer_division_inside_f_is_true_division_of_floats():
    """An int input is differentiated as a float, so x / 2 is not floor division."""
    assert float(ad.grad(lambda x: x / 2)(3)) == 0.5


def test_boolean_inputs_are_promoted_to_float64():
    g = ad.grad(lambda x: np.sum(x * 3.0))(np.array([True, False]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [3.0, 3.0])


def test_non_differentiated_integer_arguments_stay_integers():
    seen = []

    def f(x, n):
        seen.append(n)
        return np.sum(x[:n])

    ad.grad(f)(np.ones(4), 2)
    assert type(seen[-1]) is int


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_and_inf_inputs_propagate_as_ieee_says():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    g = ad.grad(lambda a: np.sum(np.sin(a)))(x)
    assert np.isnan(g[0]) and np.isnan(g[1]) and np.isnan(g[2])
    assert g[3] == pytest.approx(np.cos(1.0))
    g = ad.grad(lambda a: np.sum(a * 2.0))(x)
    np.testing.assert_array_equal(g, [2.0, 2.0, 2.0, 2.0])
    g = ad.grad(lambda a: np.sum(np.exp(a)))(x)
    assert np.isnan(g[0]) and g[1] == np.inf and g[2] == 0.0
    jac = ad.jacobian(lambda a: np.exp(a), mode="forward")(x)
    assert np.isnan(jac[0, 0]) and jac[1, 1] == np.inf and jac[2, 2] == 0.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_sqrt_at_zero_has_infinite_derivative():
    assert ad.grad(np.sqrt)(0.0) == np.inf
    assert ad.jacobian(np.sqrt, mode="forward")(0.0) == np.inf


def test_python_control_flow_on_values_follows_the_branch_taken():
    def f(x):
        return x * x if x > 0 else -x

    assert float(ad.grad(f)(3.0)) == 6.0
    assert float(ad.grad(f)(-3.0)) == -1.0
    with raises(ValueError, "truth value", "ambiguous"):
        ad.grad(lambda x: np.sum(x) if x > 0 else 0.0)(np.ones(2))


def test_plain_ndarray_dot_method_with_a_traced_argument():
    """ndarray.dot is not a numpy protocol hook: a.dot(x) with x traced must still be right."""
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    jac = ad.jacobian(lambda x: a.dot(x), mode="reverse")(np.array([1.0, -1.0]))
    np.testing.assert_allclose(jac, a)


def test_operator_module_functions_record_like_numpy():
    g = ad.grad(lambda x: np.sum(operator.mul(x, x)))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [2.0, 4.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_sharp_bits_examples_from_the_readme():
    assert float(ad.grad(np.abs)(0.0)) == 0.0
    assert float(ad.grad(lambda x: np.maximum(x, 0.0))(0.0)) == 0.5
    assert np.isnan(ad.grad(lambda x: np.sqrt(x * x))(0.0))
    assert float(ad.grad(np.abs)(0.0)) == 0.0
    assert np.isnan(ad.grad(lambda x: np.where(x > 0, np.sqrt(x), 0.0))(0.0))
    safe = ad.grad(lambda x: np.where(x > 0, np.sqrt(np.where(x > 0, x, 1.0)), 0.0))(0.0)
    assert float(safe) == 0.0
    assert float(ad.grad(lambda x: x // 2)(3)) == 0.0


def test_writes_into_a_zeros_like_buffer_are_differentiated():
    def f(x):
        out = np.zeros_like(x)
        out[0] = x[0] * 2.0
        out[1:] = np.sin(x[1:])
        return np.sum(out * out)

    x = np.array([0.5, 1.0, -0.3])
    expected = np.array([8 * x[0], *(2 * np.sin(x[1:]) * np.cos(x[1:]))])
    np.testing.assert_allclose(ad.grad(f)(x), expected)
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), expected)


def test_loop_with_a_value_dependent_count_treats_the_count_as_constant():
    def halve_until_small(x):
        while x > 1.0:
            x = x / 2.0
        return x

    assert float(ad.grad(halve_until_small)(5.0)) == 0.125     # three halvings ran
    assert float(ad.grad(halve_until_small)(0.5)) == 1.0


def test_forward_jacobian_seed_cache_corrupted_by_an_input_write_regression():
    """The forward Jacobian handed out its cached identity seed on first use; a function
    writing into its input (x[0] = 5.0) zeroed that cache, and every later forward Jacobian
    of the same size lost a column."""

    def writes_input(x):
        x[0] = 5.0
        x *= 2.0
        return x * x

    for _ in range(2):
        jac = ad.jacobian(writes_input, mode="forward")(np.array([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(jac, np.diag([0.0, 16.0, 24.0]))
    np.testing.assert_array_equal(ad.jacobian(lambda x: x * 1.0, mode="forward")(np.ones(3)),
                                  np.eye(3))


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_zero_size_inputs_give_empty_jacobians_of_the_right_shape(mode):
    jac = ad.jacobian(lambda a: a * 2.0, mode=mode)(np.ones(0))
    assert jac.shape == (0, 0)
    jac = ad.jacobian(lambda a: np.sum(a) + np.ones(3), mode=mode)(np.ones((0, 2)))
    assert jac.shape == (3, 0, 2)
    np.testing.assert_array_equal(ad.grad(lambda a: np.sum(a * a))(np.ones((2, 0))),
                                  np.ones((2, 0)))
