"""Property tests on random programs (see tests/strategies.py): the forward-mode Jacobian,
the reverse-mode Jacobian and central finite differences agree, and the adjoint identity
<vjp(u), v> == <u, jvp(v)> holds.

The number of examples comes from the hypothesis profile (tests/conftest.py): "ci" by
default, HYPOTHESIS_PROFILE=thorough for a long run. Besides fully random programs, every
elementwise rule and every structured operation gets programs that end with it.
"""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from strategies import (
    STRUCTURED,
    assert_close_where,
    elementwise_rules,
    programs,
    reliable_differences,
)

import dualad as ad

#: Examples per operation in the per-operation tests: a 50th of the profile's examples.
PER_OPERATION = max(3, settings.default.max_examples // 50)

OPERATIONS = [(rule.name, rule) for rule in elementwise_rules()] + [(k, k) for k in STRUCTURED]


def check_jacobians(program):
    """forward == reverse (tightly) and reverse == finite differences (where they are
    reliable) for the Jacobian w.r.t. every input."""
    note(repr(program))
    args = program.inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = np.asarray(program(*args))
        assume(np.all(np.isfinite(value)))
        nums = tuple(range(len(args)))
        reverse = ad.jacobian(program, nums, mode="reverse")(*args)
        forward = ad.jacobian(program, nums, mode="forward")(*args)
    for i, x in enumerate(args):
        expected_shape = value.shape + np.shape(x)
        assert np.shape(reverse[i]) == expected_shape, f"reverse Jacobian {i} shape"
        assert np.shape(forward[i]) == expected_shape, f"forward Jacobian {i} shape"
        scale = 1.0 + np.max(np.abs(reverse[i]), initial=0.0)
        everywhere = np.ones(expected_shape, dtype=bool)
        assert_close_where(forward[i], reverse[i], everywhere, rtol=1e-9, atol=1e-11 * scale,
                           what=f"forward vs reverse Jacobian w.r.t. input {i}")
        numeric, ok = reliable_differences(program, args, i)
        assert_close_where(reverse[i], numeric, ok, rtol=1e-5, atol=1e-6 * scale,
                           what=f"reverse Jacobian vs finite differences w.r.t. input {i}")


def check_adjoint(program, seed):
    """<vjp(u), v> == <u, jvp(v)> for random u (output-shaped) and v (input-shaped)."""
    note(repr(program))
    args = program.inputs
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out, pullback = ad.vjp(program, *args)
        assume(np.all(np.isfinite(out)))
        u = rng.normal(size=np.shape(out))
        v = tuple(rng.normal(size=np.shape(a)) for a in args)
        cotangents = pullback(u)
        out2, tangent = ad.jvp(program, args, v)
    np.testing.assert_allclose(out2, out, rtol=1e-12, atol=1e-12)
    lhs_terms = [np.sum(c * t) for c, t in zip(cotangents, v)]
    lhs = float(np.sum(lhs_terms))
    rhs = float(np.sum(u * tangent))
    scale = float(np.sum(np.abs(lhs_terms)) + np.sum(np.abs(u * tangent)))
    assert abs(lhs - rhs) <= 1e-9 * scale + 1e-12, (lhs, rhs)


@given(programs())
def test_forward_reverse_and_finite_differences_agree(program):
    check_jacobians(program)


@given(programs(), st.integers(0, 2 ** 32 - 1))
def test_adjoint_identity(program, seed):
    check_adjoint(program, seed)


@pytest.mark.parametrize("name, last", OPERATIONS, ids=[name for name, _ in OPERATIONS])
def test_every_operation_in_random_programs(name, last):
    """Programs that end with one given operation: each rule and structured operation is
    exercised in every run, however the fully random programs happen to fall."""

    @settings(max_examples=PER_OPERATION)
    @given(programs(max_ops=6, last=last), st.integers(0, 2 ** 32 - 1))
    def check(program, seed):
        check_jacobians(program)
        check_adjoint(program, seed)

    check()


@given(programs(max_ops=8, max_inputs=1))
def test_grad_of_a_weighted_sum_matches_the_forward_jacobian(program):
    """grad(sum(w * f)) is w contracted with the Jacobian."""
    note(repr(program))
    (x,) = program.inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.asarray(program(x))
        assume(np.all(np.isfinite(out)))
        w = np.linspace(-1.0, 1.0, out.size).reshape(out.shape) + 0.25
        g = ad.grad(lambda a: np.sum(program(a) * w))(x)
        jac = ad.jacobian(program, mode="forward")(x)
    expected = np.tensordot(w, jac, axes=out.ndim)
    scale = 1.0 + np.max(np.abs(expected), initial=0.0)
    np.testing.assert_allclose(g, expected, rtol=1e-9, atol=1e-11 * scale)


def check_second_derivatives(program):
    """Hessians of a scalar reduction of the program: forward over reverse, reverse over
    reverse and forward over forward agree, and match differences of the gradient."""
    (x,) = program.inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.asarray(program(x))
        assume(np.all(np.isfinite(out)))
        w = np.linspace(0.5, 1.5, out.size).reshape(out.shape)

        def f(a):
            return np.sum(program(a) * w)

        grad = ad.grad(f)
        h_fr = ad.jacobian(grad, mode="forward")(x)
        h_rr = ad.jacobian(grad, mode="reverse")(x)
        h_ff = ad.jacobian(lambda a: ad.jacobian(f, mode="forward")(a), mode="forward")(x)
    scale = 1.0 + np.max(np.abs(h_fr), initial=0.0)
    everywhere = np.ones(h_fr.shape, dtype=bool)
    assert_close_where(h_rr, h_fr, everywhere, rtol=1e-8, atol=1e-10 * scale,
                       what="reverse-over-reverse vs forward-over-reverse Hessian")
    assert_close_where(h_ff, h_fr, everywhere, rtol=1e-8, atol=1e-10 * scale,
                       what="forward-over-forward vs forward-over-reverse Hessian")
    numeric, ok = reliable_differences(grad, (x,), 0)
    assert_close_where(h_fr, numeric, ok, rtol=1e-4, atol=1e-5 * scale,
                       what="Hessian vs finite differences of the gradient")


@given(programs(max_ops=6, max_inputs=1))
def test_second_derivatives_of_random_programs(program):
    note(repr(program))
    check_second_derivatives(program)
