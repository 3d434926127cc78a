"""Scope check: the numpy usage a mature AD library's own test-suite exercises.

The functions and call patterns below are the ones HIPS autograd's tests differentiate
(its numpy, linalg, systematic, binary-op and scalar-op tests). Here they are plain numpy
code, differentiated in both modes against finite differences, with second-order checks
(the Jacobian of the gradient, in both modes) for each group.
"""

import itertools
import operator

import numpy as np
import pytest
from numpy_rule_checks import check, rand, spd, well_conditioned

import dualad as ad


def check_with_second_order(f, *args, atol=1e-6, rtol=1e-5):
    """First order in both modes, and the gradient of a projection of ``f`` too."""
    check(f, *args, atol=atol, rtol=rtol)
    w = rand(*np.shape(f(*args)))
    for i in range(len(args)):
        def dfun(*a, i=i):
            return ad.grad(lambda *b: np.sum(w * f(*b)), argnums=i)(*a)

        assert ad.gradcheck(dfun, *args, atol=1e-5, rtol=1e-4)


# -- statistics (stat_check: every axis, keepdims) ---------------------------------------------

STATS = [np.max, np.min, np.mean, np.sum, np.prod, np.var, np.std]


@pytest.mark.parametrize("f", STATS, ids=lambda f: f.__name__)
def test_statistics_every_axis(f):
    x = rand(3, 4, low=0.5)
    for axis, keepdims in itertools.product([None, 0, 1, -1], [False, True]):
        check(lambda x, axis=axis, keepdims=keepdims: f(x, axis=axis, keepdims=keepdims), x)
    check_with_second_order(lambda x: f(x, axis=1), x)


def test_boolean_reductions_pass_through():
    def f(x):
        assert np.all(np.isfinite(x)) and not np.any(np.isnan(x))
        return x * 2.0

    check(f, rand(3))


# -- elementwise functions ------------------------------------------------------------------------

UNARY = [
    (np.sin, None), (np.abs, (0.1, 4.0)), (np.absolute, (0.1, 4.0)), (np.arccosh, (1.1, 4.0)),
    (np.arcsinh, (-0.9, 0.9)), (np.arctanh, (-0.9, 0.9)), (np.ceil, (-1.4, 1.4)),
    (np.cos, None), (np.cosh, None), (np.deg2rad, None), (np.degrees, None), (np.exp, None),
    (np.exp2, None), (np.expm1, None), (np.fabs, (0.1, 2.0)), (np.floor, (-1.4, 1.4)),
    (np.log, (0.2, 2.0)), (np.log10, (0.2, 2.0)), (np.log1p, (0.2, 2.0)), (np.log2, (0.2, 2.0)),
    (np.rad2deg, None), (np.radians, None), (np.sign, (0.1, 2.0)), (np.sinh, None),
    (np.sqrt, (1.0, 3.0)), (np.square, None), (np.tan, (-1.1, 1.1)), (np.tanh, None),
    (np.real, None), (np.real_if_close, None), (np.imag, None), (np.conj, None),
    (np.angle, (0.1, 2.0)), (np.negative, None), (np.sinc, None),
]


@pytest.mark.parametrize("f,lims", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_functions(f, lims):
    lo, hi = lims or (-2.0, 2.0)
    x = np.random.default_rng(1).uniform(lo, hi, size=(2, 3))
    check_with_second_order(lambda x: 3.0 * f(x), x)
    check(lambda x: 3.0 * f(x), np.float64(x[0, 0]))


BINARY = [
    (np.add, None, None), (np.logaddexp, None, None), (np.logaddexp2, None, None),
    (np.true_divide, None, (0.3, 2.0)), (np.remainder, (-0.9, 0.9), (0.7, 1.9)),
    (np.mod, None, (0.8, 2.1)), (operator.mul, None, None), (operator.add, None, None),
    (operator.sub, None, None), (operator.truediv, None, (0.5, 2.0)),
    (operator.mod, None, (0.3, 2.0)), (operator.pow, (0.7, 2.0), None),
    (np.maximum, None, None), (np.minimum, None, None), (np.arctan2, None, (0.5, 2.0)),
    (np.hypot, (0.3, 1.0), (0.3, 1.0)),
]
ARG_SHAPES = [(), (6,), (7, 6), (1, 6)]


@pytest.mark.parametrize("f,lims_a,lims_b", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary_operations_with_broadcasting(f, lims_a, lims_b):
    gen = np.random.default_rng(2)
    for sa, sb in itertools.product(ARG_SHAPES[:3], ARG_SHAPES):
        a = gen.uniform(*(lims_a or (-2.0, 2.0)), size=sa)
        b = gen.uniform(*(lims_b or (-2.0, 2.0)), size=sb)
        if sa == (7, 6) and sb == (7, 6):
            continue  # keep the run short; (7, 6) x (1, 6) covers the same rules
        check(f, a, b)
    a = gen.uniform(*(lims_a or (-2.0, 2.0)), size=(2, 3))
    b = gen.uniform(*(lims_b or (-2.0, 2.0)), size=(3,))
    check_with_second_order(f, a, b)


# -- numpy functions ------------------------------------------------------------------------------

R = rand
C32, B43, B4, B33, B334, A4 = R(3, 2), R(4, 3), R(4), R(3, 3), R(3, 3, 4), well_conditioned(n=4)

FUNCTIONS = {
    "transpose axes": (lambda x: np.transpose(x, (2, 0, 1)), [R(2, 3, 4)]),
    "dot float": (np.dot, [R(3, 2), R()]),
    "dot vec mat": (np.dot, [R(3), R(3, 4)]),
    "dot mat vec": (np.dot, [R(4, 3), R(3)]),
    "tensordot 1": (lambda a, b: np.tensordot(a, b, axes=[(1,), (0,)]), [R(2, 3, 2), R(3, 4, 2)]),
    "tensordot 2": (lambda a, b: np.tensordot(a, b, axes=[(1, 0), (2, 1)]),
                    [R(2, 3, 4), R(2, 2, 3)]),
    "tensordot int": (lambda a, b: np.tensordot(a, b, 2), [R(4, 2, 2), R(2, 2, 4)]),
    "tensordot scalars by position": (
        lambda x: np.tensordot(x * np.ones((2, 2)), x * np.ones((2, 2)), 2), [R()]),
    "outer": (np.outer, [R(4), R(3)]),
    "sort": (np.sort, [R(7)]),
    "partition": (lambda x: np.partition(x, 3), [R(7)]),
    "atleast_1d": (np.atleast_1d, [R()]),
    "atleast_2d": (np.atleast_2d, [R(4)]),
    "atleast_3d": (np.atleast_3d, [R(2, 4, 3)]),
    "einsum transpose": (lambda x: np.einsum("ij->ji", x), [R(3, 4)]),
    "einsum matmul": (lambda a, b: np.einsum("ij,jk->ik", a, b), [R(2, 3), R(3, 4)]),
    "einsum covsum": (lambda a, b: np.einsum("ijk,lji->lki", a, b), [R(3, 4, 4), R(4, 4, 3)]),
    "einsum ellipses": (lambda a, b: np.einsum("...jk,...lj->...lk", a, b),
                        [R(3, 4, 4), R(3, 4, 4)]),
    "einsum ellipses scalar": (lambda a, b: np.einsum("...,...->...", a, b),
                               [R(3, 4, 4), R(3, 4, 4)]),
    "einsum three": (lambda a, b, c: np.einsum("ijk,lji,lli->lki", a, b, c),
                     [R(3, 4, 4), R(4, 4, 3), R(4, 4, 3)]),
    "trace offsets": (lambda x: np.trace(x, 1) + np.trace(x, -1), [R(4, 5)]),
    "trace extra dims": (lambda x: np.trace(x, 1), [R(5, 6, 4, 3)]),
    "flipud": (np.flipud, [R(4, 3)]),
    "fliplr": (np.fliplr, [R(4, 3)]),
    "rot90": (np.rot90, [R(4, 3)]),
    "cumsum": (lambda x: np.cumsum(x, axis=1) + np.cumsum(x, axis=0), [R(4, 3)]),
    "cumsum flat": (np.cumsum, [R(4, 3)]),
    "builtin sum": (lambda x, y: sum([x, y]), [R(4, 3), R(4, 3)]),
    "index ints": (lambda x: x[3, 0, 1], [R(5, 6, 4)]),
    "index slices": (lambda x: x[::-1, 2:4, :], [R(5, 6, 4)]),
    "index lists": (lambda x: x[[0, 1, 2], :, :], [R(5, 6, 4)]),
    "index mixed": (lambda x: x[3, 2:, [1, 3]], [R(5, 6, 4)]),
    "index fanout": (lambda x: x[::-1, 2:4] + x[::-1, 3:5], [R(5, 6, 4)]),
    "index twice": (lambda x: x[2:6][1:3], [R(7)]),
    "multi index": (lambda x: np.sum(x[[0, 1, 0]]), [R(3)]),
    "dot of slices": (lambda x: np.dot(x[:2], x[2:]), [R(4)]),
    "reshape method no tuple": (lambda x: x.reshape(5 * 4, 6), [R(5, 6, 4)]),
    "ravel": (lambda x: x.ravel() + np.ravel(x), [R(2, 3)]),
    "flatten": (lambda x: x.flatten(), [R(2, 3)]),
    "append list": (lambda a, b: np.append(a, b), [R(3), R()]),
    "concatenate positional axis": (lambda x: np.concatenate((x, x, x), 1), [R(2, 3, 2)]),
    "split": (lambda x: np.split(x, 2)[0], [R(10)]),
    "diag": (np.diag, [R(4, 4)]),
    "diagonal": (lambda x: np.diagonal(x, axis1=-1, axis2=-2), [R(3, 4, 4)]),
    "roll": (lambda x: np.roll(x, 2, axis=1), [R(4, 5)]),
    "triu": (lambda x: np.triu(x, k=2), [R(5, 5)]),
    "tril": (lambda x: np.tril(x, k=2), [R(5, 5)]),
    "clip": (lambda x: np.clip(x, a_min=0.1, a_max=1.1), [R(5, 5)]),
    "array from scalars": (lambda x: np.array([x, x * 1.0, x + 2.5]), [R()]),
    "array 2d from scalars": (lambda x: np.array([[x, x * 1.0, x + 2.5], [x ** 2, x, x / 2.0]]),
                              [R()]),
    "array from arrays": (lambda x: np.array([[2 * x, x + 1], [x, x]]), [R(3, 2)]),
    "r_": (lambda x: np.r_[x, x], [R(3, 2)]),
    "c_": (lambda x: np.c_[x, C32, x], [R(3, 2)]),
    "len": (lambda x: x * len(x), [R(3, 2)]),
    "var ddof": (lambda x: np.var(x, axis=1, ddof=2, keepdims=True), [R(3, 4)]),
    "std ddof": (lambda x: np.std(x, ddof=1), [R(1, 3)]),
    "where": (lambda x, y: np.where(np.arange(20).reshape(4, 5) % 3 > 0, x, y),
              [R(4, 5), R(4, 5)]),
    "squeeze": (lambda x: np.squeeze(x) + x.squeeze(), [R(5, 1, 4)]),
    "repeat": (lambda x: np.repeat(x, 2, axis=1), [R(5, 3, 4)]),
    "repeat axis0": (lambda x: np.repeat(x, 2, axis=0), [R(5)]),
    "expand_dims": (lambda x: np.expand_dims(x, 2), [R(5, 1, 4)]),
    "nan_to_num": (lambda x: np.sin(np.nan_to_num(x + np.array([0.0, np.nan, np.inf, -1.0]))),
                   [R(4)]),
    "max of equal values": (lambda x: np.max(np.array([x, x])), [R()]),
    "max equal values 2d": (lambda x: np.max(np.array([[x, x], [x, 0.5]]), axis=1), [R()]),
    "min 3-way equality": (lambda x: np.min(np.array([[x, x, x], [x, 0.5, 0.5],
                                                      [0.5, 0.5, 0.5], [x, x, 0.5]]), axis=0),
                           [R()]),
    "maximum equal values": (lambda x: np.maximum(x, x), [R()]),
    "maximum equal 2d": (lambda x: np.maximum(np.array([x, x, 0.5]),
                                              np.array([[x, 0.5, x], [x, x, 0.5]])), [R()]),
    "linspace": (lambda a, b: np.linspace(a, b, 5), [R(), R()]),
    "astype": (lambda x: np.sin(x.astype("float64")), [R(3)]),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_numpy_functions(name):
    f, args = FUNCTIONS[name]
    check_with_second_order(f, *args)


# -- linear algebra -------------------------------------------------------------------------------


def sym(a):
    low = np.tril(a)
    return (low + np.swapaxes(low, -1, -2)) / 2.0


LINALG = {
    "inv": (np.linalg.inv, [well_conditioned(n=4)]),
    "inv 3d": (np.linalg.inv, [well_conditioned(3, n=3)]),
    "inv 4d": (np.linalg.inv, [well_conditioned(2, 2, n=2)]),
    "solve arg1": (lambda a: np.linalg.solve(a, B43), [well_conditioned(n=4)]),
    "solve arg1 1d": (lambda a: np.linalg.solve(a, B4), [well_conditioned(n=4)]),
    "solve arg2": (lambda b: np.linalg.solve(A4, b), [R(4, 3)]),
    "solve 3d": (lambda a: np.linalg.solve(a, B33), [well_conditioned(3)]),
    "solve 3d 3d": (lambda a: np.linalg.solve(a, B334), [well_conditioned(3)]),
    "det": (np.linalg.det, [R(4, 4)]),
    "det 3d": (np.linalg.det, [R(3, 3, 3)]),
    "slogdet": (lambda x: np.linalg.slogdet(x)[1], [R(4, 4)]),
    "slogdet 3d": (lambda x: np.sum(np.linalg.slogdet(x)[1]), [spd(3)]),
    "vector 2-norm": (np.linalg.norm, [R(6)]),
    "frobenius": (np.linalg.norm, [R(5, 4)]),
    "frobenius axis": (lambda x: np.linalg.norm(x, axis=(0, 1)), [R(4, 3, 2)]),
    "vector ord": (lambda x: np.linalg.norm(x, 2) + np.linalg.norm(x, 3) + np.linalg.norm(x, 4),
                   [R(6)]),
    "norm axis": (lambda x: np.linalg.norm(x, axis=0) + np.linalg.norm(x, axis=2).sum(),
                  [R(4, 3, 4)]),
    "nuclear": (lambda x: np.linalg.norm(x, ord="nuc"), [R(4, 3)]),
    "nuclear axis": (lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)), [R(4, 3, 2)]),
    "eigh lower": (lambda x: (lambda w, v: (w, v ** 2))(*np.linalg.eigh(sym(x)))[1], [spd()]),
    "eigh upper": (lambda x: np.linalg.eigh(sym(x), "U")[0], [spd()]),
    "eigh broadcasting": (lambda x: np.linalg.eigh(sym(x))[1] ** 2, [spd(2, 1)]),
    "cholesky": (lambda x: np.linalg.cholesky(sym(x)), [spd()]),
    "cholesky broadcast": (lambda x: np.linalg.cholesky(sym(x)), [spd(2)]),
    "cholesky reparameterisation": (
        lambda x: np.linalg.norm(np.dot(np.linalg.cholesky(sym(x)), np.arange(3.0))), [spd()]),
    "svd wide": (lambda x: np.linalg.svd(x, full_matrices=False)[1], [R(3, 5)]),
    "svd tall 3d": (lambda x: np.abs(np.linalg.svd(x, full_matrices=False)[0]), [R(2, 5, 3)]),
    "svd square": (lambda x: np.abs(np.linalg.svd(x, full_matrices=False)[2]), [R(4, 4)]),
    "svd only s": (lambda x: np.linalg.svd(x, full_matrices=False, compute_uv=False),
                   [R(2, 5, 3)]),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg(name):
    f, args = LINALG[name]
    check_with_second_order(f, *args, atol=1e-5, rtol=1e-4)


# -- structured arguments --------------------------------------------------------------------------


def test_tuple_list_and_dict_arguments():
    def loss(params, data):
        w, b = params["layer"]
        h = np.tanh(data[0] @ w + b)
        return np.sum(h ** 2) + np.sum(params["extra"][0] * data[1])

    params = {"layer": (R(3, 2), R(2)), "extra": [R(4)]}
    data = [R(5, 3), R(4)]
    g = ad.grad(loss)(params, data)
    assert set(g) == {"layer", "extra"}
    assert isinstance(g["layer"], tuple) and isinstance(g["extra"], list)
    gd = ad.grad(loss, argnums=1)(params, data)
    assert isinstance(gd, list)

    def flat(w, b, e):
        return loss({"layer": (w, b), "extra": [e]}, data)

    check(flat, params["layer"][0], params["layer"][1], params["extra"][0])
    np.testing.assert_allclose(g["layer"][0], ad.grad(flat)(params["layer"][0],
                                                             params["layer"][1],
                                                             params["extra"][0]))
