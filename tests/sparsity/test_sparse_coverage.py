"""Sparsity coverage equals dense coverage: every function with a dense rule has a flow.

The registry walk fails for any operator that has a ``gradient`` or ``forward`` method but
no ``index_flow`` (nor a table rule, nor a not-differentiable entry). The functions the
issue named are then checked against dense Jacobians: the detected pattern covers every
nonzero, and where the flow is exact it is no larger.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
import dualad.scipy_rules  # noqa: F401  (its rules join the registry walked below)
from dualad.core.dispatch import forward
from dualad.core.operators import Broadcasted, Method, Operator
from dualad.derivatives.registry import get_rule, not_differentiable_functions
from dualad.reverse_mode.rules import gradient
from dualad.sparse import hessian_sparsity, jacobian_sparsity, sparse_jacobian
from dualad.sparsity.flows import ConservativeFlowWarning, index_flow

# The reverse graph's own bookkeeping for multi-output calls: applied to graph nodes only.
INTERNAL = {"_output_item"}


def _operator_types(rule_function):
    """Operator types of dualad's own methods (not those users, or these tests, add)."""
    found = set()
    users = {id(m) for m in rule_function.user_methods}
    for method in rule_function.methods:
        if id(method) in users:
            continue
        types = method.signature.types
        if types and isinstance(types[0], type) and issubclass(types[0], Operator) \
                and types[0] not in (Operator, Method, Broadcasted):
            found.add(types[0])
    return found


def _of_dualad_numpy_or_scipy(f):
    module = getattr(f, "__module__", None) or "numpy"  # ufuncs have no module: numpy's
    return module.split(".")[0] in ("dualad", "numpy", "scipy")


def test_every_dense_rule_has_a_flow():
    from dualad.scipy_rules import integrate, linalg, special, stats  # noqa: F401  (their rules)

    flows = _operator_types(index_flow)
    constants = not_differentiable_functions()
    missing = []
    for t in _operator_types(gradient) | _operator_types(forward):
        if t in flows or t.f in constants or t.__name__.split("[")[1][:-1] in INTERNAL:
            continue
        if not _of_dualad_numpy_or_scipy(t.f):
            continue  # a function the tests define rules for (e.g. tests/test_extend.py)
        if issubclass(t, Broadcasted) and get_rule(t.f) is not None:
            continue  # the table rule's flow (one method for all Broadcasted calls)
        missing.append(t.__name__)
    assert not missing, f"functions with a dense rule and no sparsity flow: {sorted(missing)}"


RNG = np.random.default_rng(0)
X6 = RNG.uniform(0.5, 1.5, 6)
X9 = RNG.uniform(0.5, 1.5, 9)
SPD = np.eye(3) * 4


def _spd(x):
    a = x.reshape(3, 3)
    return a @ a.T + SPD


CASES = {
    # name: (f, x, exact) -- exact: the pattern equals the dense Jacobian's nonzeros
    "pad constant": (lambda x: np.pad(x, 2), X6, True),
    "pad edge": (lambda x: np.pad(x, (1, 2), mode="edge"), X6, True),
    "pad wrap 2-D": (lambda x: np.pad(x.reshape(2, 3), 1, mode="wrap"), X6, True),
    "pad reflect": (lambda x: np.pad(x, 2, mode="reflect"), X6, True),
    "einsum": (lambda x: np.einsum("ij,jk->ik", x.reshape(2, 3), np.eye(3)[:, :2]), X6, True),
    "einsum two traced": (lambda x: np.einsum("i,i->i", x[:3], x[3:]), X6, True),
    "sort": (lambda x: np.sort(x * np.arange(1.0, 7.0)[::-1]), X6, True),
    "sort 2-D axis 0": (lambda x: np.sort(x.reshape(3, 2) ** 2, axis=0), X6, True),
    "partition": (lambda x: np.partition(x, 2), X6, True),
    "kron": (lambda x: np.kron(np.eye(2), x[:3]), X6, True),
    "kron traced": (lambda x: np.kron(x[:2], x[2:4]), X6, True),
    "cross": (lambda x: np.cross(x[:3], x[3:]), X6, True),
    "tensordot": (lambda x: np.tensordot(x.reshape(2, 3), np.eye(3), axes=1), X6, True),
    "inner": (lambda x: np.inner(x[:3], x[3:]), X6, True),
    "solve": (lambda x: np.linalg.solve(_spd(x), np.ones(3)), X9, True),
    "inv": (lambda x: np.linalg.inv(_spd(x)), X9, False),
    "det": (lambda x: np.linalg.det(x.reshape(3, 3) + SPD), X9, True),
    "eigh": (lambda x: np.linalg.eigh(_spd(x))[0], X9, False),
    "cholesky": (lambda x: np.linalg.cholesky(_spd(x)), X9, False),
    "svd": (lambda x: np.linalg.svd(x.reshape(3, 3) + SPD)[1], X9, False),
    "qr": (lambda x: np.linalg.qr(x.reshape(3, 3) + SPD)[1], X9, False),
    "lstsq": (lambda x: np.linalg.lstsq(x.reshape(3, 3) + SPD, np.ones(3))[0], X9, False),
    "pinv": (lambda x: np.linalg.pinv(x.reshape(3, 3) + SPD), X9, False),
    "matrix_power": (lambda x: np.linalg.matrix_power(x.reshape(3, 3), 2), X9, False),
    "multi_dot": (lambda x: np.linalg.multi_dot([x[:3], np.eye(3), x[3:6]]), X9, True),
    "inv batched": (lambda x: np.linalg.inv(x[:8].reshape(2, 2, 2) + np.eye(2) * 3), X9, True),
    "fft real part": (lambda x: np.real(np.fft.fft(x)), X6, False),
    "rfft abs": (lambda x: np.abs(np.fft.rfft(x.reshape(2, 3), axis=-1)), X6, True),
    "fftshift": (lambda x: np.fft.fftshift(x), X6, True),
    "real": (lambda x: np.real(x * 2), X6, True),
    "angle": (lambda x: np.angle(x - 1.0), X6, False),
    "sinc": (lambda x: np.sinc(x), X6, True),
    "round": (lambda x: np.round(x) + x[0], X6, True),
    "nan_to_num": (lambda x: np.nan_to_num(np.log(x - 1.0)), X6, False),
    "linspace": (lambda x: np.linspace(x[0], x[1], 4), X6, True),
    "scipy expm": (lambda x: _scipy_linalg().expm(x.reshape(3, 3) * 0.1), X9, False),
    "scipy solve_triangular": (lambda x: _scipy_linalg().solve_triangular(
        np.triu(x.reshape(3, 3)) + SPD, np.ones(3)), X9, False),
    "select": (lambda x: np.select([x > 1.0, x <= 1.0], [x ** 2, np.roll(x, 1)]), X6, False),
    "ptp": (lambda x: np.ptp(x.reshape(2, 3), axis=1), X6, False),
    "add.reduce": (lambda x: np.add.reduce(x.reshape(2, 3)), X6, True),
    "multiply.accumulate": (lambda x: np.multiply.accumulate(x.reshape(3, 2)), X6, True),
    "cumulative_sum": (lambda x: np.cumulative_sum(x), X6, True),
    "vector_norm": (lambda x: np.linalg.vector_norm(x.reshape(2, 3), axis=1), X6, True),
    "matvec": (lambda x: np.matvec(np.eye(3)[:2], x[:3]), X6, True),
    "vecdot": (lambda x: np.vecdot(x[:3], x[3:]), X6, True),
    "linalg.matmul": (lambda x: np.linalg.matmul(x.reshape(2, 3), np.eye(3)), X6, True),
    "matrix_transpose": (lambda x: np.matrix_transpose(x.reshape(2, 3)), X6, True),
    "linalg.diagonal": (lambda x: np.linalg.diagonal(x.reshape(3, 3)), X9, True),
    "linalg.trace": (lambda x: np.linalg.trace(x.reshape(3, 3)), X9, True),
    "linalg.outer": (lambda x: np.linalg.outer(x[:2], x[2:4]), X6, True),
    "unstack": (lambda x: np.unstack(x.reshape(2, 3))[1], X6, True),
    "bincount": (lambda x: np.bincount(np.array([0, 2, 2, 1, 0, 3]), weights=x), X6, True),
    "put": (lambda x: _put(x), X6, True),
    "copyto": (lambda x: _copyto(x), X6, True),
    "fill_diagonal": (lambda x: _fill_diagonal(x), X9, True),
    "put_along_axis": (lambda x: _put_along(x), X6, True),
}


def _scipy_linalg():
    from dualad.scipy_rules import linalg

    return linalg


def _put(x):
    y = np.zeros_like(x)
    np.put(y, [0, 3], x[4:] * 2)
    return y + x[1]


def _copyto(x):
    y = np.ones_like(x)
    np.copyto(y, x[::-1], where=np.arange(6) % 2 == 0)
    return y


def _fill_diagonal(x):
    y = x.reshape(3, 3).copy()
    np.fill_diagonal(y, x[0])
    return y


def _put_along(x):
    y = x.reshape(2, 3) * 1.0
    np.put_along_axis(y, np.array([[0], [2]]), x[:2].reshape(2, 1), axis=1)
    return y


@pytest.mark.parametrize("name", sorted(CASES))
def test_flow_covers_dense_jacobian(name):
    f, x, exact = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeFlowWarning)
        pattern = jacobian_sparsity(f)(x).toarray()
    dense = np.asarray(ad.jacobian(f)(x)).reshape(pattern.shape)
    nonzero = np.abs(dense) > 1e-13
    assert not nonzero[~pattern].any(), f"{name}: a nonzero outside the pattern"
    if exact:
        np.testing.assert_array_equal(pattern, nonzero)
    else:
        assert pattern.sum() >= nonzero.sum()
    jac = sparse_jacobian(f)(x).toarray()
    np.testing.assert_allclose(jac, dense, rtol=1e-9, atol=1e-12)


def test_pad_modes_that_mix_entries_take_the_dense_flow():
    pattern = jacobian_sparsity(lambda x: np.pad(x, 1, mode="mean"))(X6).toarray()
    assert pattern.shape == (8, 6) and pattern.all()  # a superset of the truth


@pytest.mark.parametrize("name", ["einsum two traced", "inv", "cross", "sort", "kron traced"])
def test_flow_hessian_covers_dense_hessian(name):
    f, x, _ = CASES[name]

    def total(s):
        return np.sum(f(s) ** 2)

    pattern = hessian_sparsity(total)(x).toarray()
    dense = ad.hessian(total)(x)
    assert not (np.abs(dense) > 1e-10)[~pattern].any()


# -- functions a user adds without a flow ----------------------------------------------------

@ad.primitive
def _blend(x):
    return np.cumsum(x[::-1])


@ad.gradient.dispatch
def _blend_gradient(op: ad.Method[_blend], grad, output, x):
    return (np.cumsum(grad[::-1])[::-1][::-1],)


def test_user_function_without_flow_is_conservative_with_one_warning():
    f = lambda x: _blend(x[:3]) + x[3:]  # noqa: E731
    x = np.arange(1.0, 7.0)
    with pytest.warns(ConservativeFlowWarning, match=r"_blend.*dualad\.extend\.declare_"):
        pattern = jacobian_sparsity(f)(x).toarray()
    expected = np.zeros((3, 6), dtype=bool)
    expected[:, :3] = True
    expected[np.arange(3), np.arange(3, 6)] = True
    np.testing.assert_array_equal(pattern, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeFlowWarning)  # once per function
        jacobian_sparsity(f)(x)


def test_strict_raises_naming_the_public_api():
    f = lambda x: _blend(x)  # noqa: E731
    for transform, g in ((jacobian_sparsity, f), (sparse_jacobian, f),
                         (hessian_sparsity, lambda x: np.sum(f(x)))):
        with pytest.raises(ad.MissingRuleError, match=r"dualad\.extend\.declare_index_map"):
            transform(g, strict=True)(np.ones(3))


@ad.primitive
def _shifted_products(x):
    return x * np.roll(x, 1)


@ad.gradient.dispatch
def _shifted_products_gradient(op: ad.Method[_shifted_products], grad, output, x):
    return (grad * np.roll(x, 1) + np.roll(grad * x, -1),)


def test_a_user_declaration_through_dualad_extend():
    from dualad import extend

    extend.declare_composite(_shifted_products, lambda x: x * np.roll(x, 1))
    x = np.arange(1.0, 5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeFlowWarning)
        pattern = jacobian_sparsity(_shifted_products, strict=True)(x).toarray()
    np.testing.assert_array_equal(pattern, np.eye(4, dtype=bool) | np.eye(4, k=-1, dtype=bool)
                                  | np.eye(4, k=3, dtype=bool))
    J = sparse_jacobian(_shifted_products, mode="reverse")(x)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(_shifted_products, mode="reverse")(x))


def test_stacked_matrix_products_are_probed():
    x = np.arange(1.0, 13.0)
    for f in (lambda x: np.matmul(x.reshape(2, 2, 3), np.eye(3)[:, :2]).ravel(),
              lambda x: (x[:8].reshape(2, 2, 2) @ x[4:12].reshape(2, 2, 2)).ravel()):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConservativeFlowWarning)
            pattern = jacobian_sparsity(f, strict=True)(x).toarray()
        np.testing.assert_array_equal(pattern, ad.jacobian(f)(x) != 0)
