"""Products in both modes against finite differences: matmul, dot, einsum, tensordot, ..."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((1, 3), (3, 1)),
    ((2, 2, 3), (3, 2)),
    ((2, 1, 2, 3), (4, 3, 2)),
    ((3,), (2, 3, 2)),
    ((2, 2, 3), (3,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_every_rank_and_broadcast_batch(sa, sb):
    check(np.matmul, rand(*sa), rand(*sb))
    check(lambda a, b: a @ b, rand(*sa), rand(*sb))


DOT_SHAPES = [((), ()), ((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)),
              ((3,), (3, 2)), ((2, 3), (3, 2)), ((2, 2, 3), (3, 2)), ((2, 3), (2, 3, 2)),
              ((2, 1, 3), (2, 3, 2))]


@pytest.mark.parametrize("sa,sb", DOT_SHAPES)
def test_dot_all_ranks_including_nd_by_md(sa, sb):
    check(np.dot, rand(*sa), rand(*sb))


def test_dot_method_vdot_inner_outer():
    check(lambda a, b: a.dot(b), rand(2, 3), rand(3))
    check(np.vdot, rand(2, 3), rand(3, 2))
    check(np.inner, rand(2, 3), rand(4, 3))
    check(np.inner, rand(3), rand(3))
    check(np.inner, rand(2, 3), rand())
    check(np.outer, rand(2, 2), rand(3))
    check(np.outer, rand(1), rand())
    check(np.linalg.outer, rand(2), rand(3))


@pytest.mark.parametrize("sa,sb,axes", [
    ((2, 3, 4), (3, 4, 2), 2),
    ((2, 3), (3, 2), 1),
    ((2,), (3,), 0),
    ((2, 3, 4), (4, 2, 3), ([1, 2], [2, 0])),
    ((2, 3), (3, 2), ([0], [1])),
    ((2, 3), (2, 3), (0, 0)),
    ((1, 3), (2, 3, 2), [(1,), (1,)]),
])
def test_tensordot_every_axes_form(sa, sb, axes):
    check(lambda a, b: np.tensordot(a, b, axes), rand(*sa), rand(*sb))


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("ba,c", [(2, 3), (2,)]),
    ("...jk,...lj->...lk", [(2, 3, 3), (2, 3, 3)]),
    ("...,...->...", [(2, 1), (3,)]),
    ("...ij,j...->i...", [(2, 3), (3, 2)]),
    ("ijk,lji,lli->lki", [(2, 3, 3), (3, 3, 2), (3, 3, 2)]),
    (",ij->ij", [(), (2, 2)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]),
])
def test_einsum_any_subscripts(spec, shapes):
    arrays = [rand(*s) for s in shapes]
    check(lambda *ops: np.einsum(spec, *ops), *arrays)


def test_einsum_sublist_form_and_optimize():
    check(lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), rand(2, 3), rand(3, 2))
    check(lambda a, b: np.einsum(a, [Ellipsis, 0], b, [0]), rand(2, 3), rand(3))
    check(lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c, optimize=True),
          rand(2, 2), rand(2, 3), rand(3, 2))


@pytest.mark.parametrize("sa,sb", [((2, 3), (2, 2)), ((2,), (3, 2)), ((2, 1, 2), (2,)),
                                   ((), (2,))])
def test_kron(sa, sb):
    check(np.kron, rand(*sa), rand(*sb))


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
@pytest.mark.parametrize("sa,sb,kw", [
    ((3,), (3,), {}),
    ((2, 3), (3,), {}),
    ((2,), (2,), {}),
    ((2, 2), (2, 2), {}),
    ((2,), (3,), {}),
    ((3, 2), (3, 2), {"axisa": 0, "axisb": 0, "axisc": 0}),
    ((3, 2), (2, 3), {"axisa": 0, "axisb": 1}),
    ((3, 2), (3, 2), {"axis": 0}),
])
def test_cross(sa, sb, kw):
    check(lambda a, b: np.cross(a, b, **kw), rand(*sa), rand(*sb))


def test_linalg_cross_and_gufuncs():
    check(np.linalg.cross, rand(2, 3), rand(3))
    check(np.matvec, rand(2, 3, 2), rand(2))
    check(np.vecmat, rand(3), rand(2, 3, 2))
    check(np.vecdot, rand(2, 3), rand(3))
    check(lambda a, b: np.vecdot(a, b, axis=0), rand(3, 2), rand(3, 1))
    check(lambda a, b: np.linalg.vecdot(a, b, axis=0), rand(3, 2), rand(3, 2))
    check(np.linalg.matmul, rand(2, 3), rand(3))
    check(np.linalg.tensordot, rand(2, 3), rand(2, 3))


@pytest.mark.parametrize("shape,kw", [
    ((3, 3), {}), ((3, 4), {"offset": 1}), ((4, 3), {"offset": -2}),
    ((2, 3, 4), {"axis1": 2, "axis2": 0}), ((3, 2, 3), {"offset": 1, "axis1": -1, "axis2": 0}),
    ((1, 1), {}),
])
def test_trace(shape, kw):
    check(lambda x: np.trace(x, **kw), rand(*shape))


def test_linalg_trace():
    check(lambda x: np.linalg.trace(x, offset=1), rand(2, 3, 3))


def test_second_order_products():
    b = rand(3, 2)
    check_second_order(lambda a: np.einsum("ij,jk->ik", a, b) * (a @ b), rand(2, 3))
    check_second_order(lambda a: np.tensordot(a, a, 1), rand(2, 2))
    check_second_order(lambda a: np.kron(a, a), rand(2))


@pytest.mark.parametrize("spec,shapes", [("ba,c", [(2, 3), (2,)]), ("Ba,b", [(2, 3), (2,)]),
                                         ("...ij,...j", [(2, 3, 2), (2,)])])
def test_einsum_forward_values_follow_numpy_output_order(spec, shapes):
    arrays = [rand(*s) for s in shapes]
    out, tangent = ad.jvp(lambda *ops: np.einsum(spec, *ops), tuple(arrays),
                          tuple(np.ones_like(a) for a in arrays))
    np.testing.assert_allclose(out, np.einsum(spec, *arrays))
    assert np.shape(tangent) == np.shape(out)


@settings(max_examples=25, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2,
                                                 max_side=3),
       n=st.integers(1, 3), m=st.integers(1, 3), k=st.integers(1, 3),
       vec=st.sampled_from(["none", "left", "right"]))
def test_matmul_random_batch_shapes(shapes, n, m, k, vec):
    ba, bb = shapes.input_shapes
    sa = (m,) if vec == "left" else ba + (n, m)
    sb = (m,) if vec == "right" else bb + (m, k)
    check(np.matmul, rand(*sa), rand(*sb))
    check(lambda a, b: np.einsum("...ij,...jk->...ik", a, b) if vec == "none" else a @ b,
          rand(*sa), rand(*sb))


def test_rules_learn_which_arguments_need_gradients():
    from dualad.reverse_mode.backward import gradients_needed

    seen = []

    def scale(a, b):
        return a * b

    scale = ad.primitive(scale)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[scale], grad, output, a, b):
        seen.append(gradients_needed())
        return grad * b, grad * a

    a, b = rand(3), rand(3)
    ad.grad(lambda a: np.sum(scale(a, b)))(a)
    ad.grad(lambda a, b: np.sum(scale(a, b)), argnums=(0, 1))(a, b)
    assert seen == [[True, False], [True, True]]
    assert gradients_needed() is None
    # a constant operand of matmul is skipped; the other gradient is unchanged
    w = rand(3, 2)
    np.testing.assert_allclose(ad.grad(lambda w: np.sum(np.ones((4, 3)) @ w))(w),
                               np.full((3, 2), 4.0))
