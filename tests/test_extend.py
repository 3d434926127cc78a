"""dualad.extend's decorators, as dualad's own rules use them: gradient_rule and
tangent_rule for a primitive (checked against finite differences, forward against
reverse, 0-d and broadcast shapes), and broadcasted=True with table_tangent refining a
table rule (in a fresh process: the refinement is global; the table's fast paths for
plain real values still come first in forward mode)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dualad as ad
from dualad import extend
from dualad.diagnostics.gradcheck import numerical_jacobian


def _scaled_softplus(x, s):
    return np.log1p(np.exp(s * x)) / s


scaled_softplus = extend.primitive(_scaled_softplus)


@extend.gradient_rule(scaled_softplus)
def _scaled_softplus_gradient(grad, output, x, s):
    sig = 1.0 / (1.0 + np.exp(-s * x))
    ds = (x * sig - output) / s
    return (extend.unbroadcast(grad * sig, np.shape(x)),
            extend.unbroadcast(grad * ds, np.shape(s)))


@extend.tangent_rule(scaled_softplus, duals=(0, 1))
def _scaled_softplus_tangent(x, s):
    tag, [(xv, xp), (sv, sp)] = extend.tangent_parts((x, s))
    y = _scaled_softplus(xv, sv)
    sig = 1.0 / (1.0 + np.exp(-sv * xv))
    partials = 0.0
    if xp is not None:
        partials = partials + xp * np.asarray(sig)[..., None]
    if sp is not None:
        partials = partials + sp * np.asarray((xv * sig - y) / sv)[..., None]
    k = (xp if xp is not None else sp).shape[-1]
    return extend.Dual(y, np.broadcast_to(partials, np.shape(y) + (k,)).copy(), tag)


CASES = [(0.3, 2.0), (np.array([-1.0, 0.5, 2.0]), 1.5),
         (np.array([[0.1], [-0.4]]), np.array([1.0, 3.0]))]


@pytest.mark.parametrize("x, s", CASES)
def test_decorated_rules_match_finite_differences_in_both_modes(x, s):
    x, s = np.asarray(x, dtype=float), np.asarray(s, dtype=float)
    for argnum in (0, 1):
        want = numerical_jacobian(scaled_softplus, (x, s), argnum)
        fwd = ad.jacobian(scaled_softplus, argnum, mode="forward")(x, s)
        rev = ad.jacobian(scaled_softplus, argnum, mode="reverse")(x, s)
        np.testing.assert_allclose(fwd, rev, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(fwd, want, rtol=1e-6, atol=1e-8)


def test_decorated_rules_are_not_user_methods():
    for rule_function in (ad.gradient, ad.forward):
        assert all("_scaled_softplus" not in str(m.signature)
                   for m in rule_function.user_methods)
    assert any("_scaled_softplus" in str(m.signature) for m in ad.gradient.methods)


def test_broadcasted_rules_refine_a_table_rule_in_a_fresh_process():
    code = textwrap.dedent("""
        import numpy as np
        import dualad as ad
        from dualad import extend

        calls = []
        table = extend.table_tangent(np.tanh)

        @extend.gradient_rule(np.tanh, broadcasted=True)
        def _tanh(grad, output, x):
            calls.append("gradient")
            return (grad * (1.0 - output * output),)

        @extend.tangent_rule(np.tanh, broadcasted=True)
        def _tanh_tangent(x, *args, **kwargs):
            calls.append("tangent")
            return table(x, *args, **kwargs)

        x = np.array([-0.5, 0.25, 2.0])
        g = ad.grad(lambda v: np.sum(np.tanh(v)))(x)
        assert calls == ["gradient"] and np.allclose(g, 1.0 - np.tanh(x) ** 2)
        d = ad.jacobian(np.tanh, mode="forward")(x)  # plain real values: the table's paths
        assert calls == ["gradient"] and np.allclose(d, np.diag(1.0 - np.tanh(x) ** 2))
        z, dz = np.array([0.3 + 0.2j, -1.0 + 0.5j]), np.array([1.0, 1j])
        _, t = ad.jvp(np.tanh, (z,), (dz,))  # complex values: the refinement, then the table
        assert calls[-1] == "tangent" and np.allclose(t, (1.0 - np.tanh(z) ** 2) * dz)
        assert ad.gradient.user_methods == [] and ad.forward.user_methods == []
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "ok"


def test_table_tangent_of_a_function_without_a_table_entry_is_a_clear_error():
    with pytest.raises(ValueError, match="no entry in the rules tables"):
        extend.table_tangent(np.linalg.det)
