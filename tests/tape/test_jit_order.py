"""ad.jit of order statistics (np.sort, np.median, np.quantile, np.percentile): the
``Order`` instruction, in the straight-line code and in the interpreter, against eager mode
and central differences; ties, NaN, one-entry groups, and what is refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import gradcheck, numerical_jacobian
from dualad.tape.jit import JitError
from dualad.tape.lowering import Call, LoweringError, Order, lower
from dualad.tape.tape import TapeRetraceWarning, record

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py

def _weights(y):
    """Distinct weights for the entries of ``y`` (a sum that sees every entry)."""
    return np.cos(np.arange(np.size(y), dtype=np.float64)).reshape(np.shape(y)) + 1.5


# (name, function of x, shape of x): axis None / 0 / -1 / tuples, keepdims, odd and even
# groups, one-entry groups, several quantiles
CASES = [
    ("median rows odd", lambda x: np.median(x, axis=1), (4, 5)),
    ("median columns even", lambda x: np.median(x, axis=0), (4, 5)),
    ("median all", lambda x: np.median(x), (3, 4)),
    ("median axis -1 keepdims", lambda x: np.median(x, axis=-1, keepdims=True), (3, 2, 4)),
    ("median two axes", lambda x: np.median(x, axis=(0, 2)), (3, 2, 4)),
    ("median one-entry groups", lambda x: np.median(x, axis=1), (5, 1)),
    ("median of a vector", lambda x: np.median(x), (6,)),
    ("sort rows", lambda x: np.sort(x), (3, 5)),
    ("sort columns", lambda x: np.sort(x, axis=0), (4, 3)),
    ("sort flattened", lambda x: np.sort(x, axis=None), (3, 4)),
    ("quantile several", lambda x: np.quantile(x, [0.1, 0.5, 0.93], axis=-1), (3, 6)),
    ("quantile lower", lambda x: np.quantile(x, 0.3, axis=0, method="lower"), (5, 2)),
    ("quantile midpoint keepdims", lambda x: np.quantile(x, 0.4, axis=1, method="midpoint",
                                                         keepdims=True), (2, 6)),
    ("percentile all", lambda x: np.percentile(x, 37.0), (4, 4)),
    ("quantile 2-d q array", lambda x: np.quantile(x, np.array([[0.2], [0.65]]), axis=1),
     (3, 5)),
    ("percentile nearest", lambda x: np.percentile(x, [20, 80], axis=1, method="nearest"),
     (3, 7)),
]


def scalar(f):
    def loss(x):
        y = f(x)
        return np.sum(_weights(y) * y * y)
    return loss


@pytest.fixture(params=["straight-line", "interpreter"])
def backend(request):
    """Both backends: the interpreter forced by a compile-cost cap every program exceeds."""
    if request.param == "interpreter":
        request.getfixturevalue("small_cap")
    return request.param


def _check_ran(jitted, backend):
    kernel = jitted._fast_entry.kernel if jitted._fast_entry is not None else None
    assert kernel is not None
    kernel = getattr(kernel, "func", kernel)  # large constants bound first
    assert kernel.__qualname__.startswith("InterpretedProgram.") == (backend == "interpreter")


def test_lowers_as_order():
    for name, f, shape in CASES:
        x = np.random.default_rng(1).standard_normal(shape)
        low = lower(record(f, x).program, [x])
        kinds = [type(i) for i in low.instructions]
        assert kinds == [Order], (name, kinds)


@pytest.mark.parametrize("name,f,shape", CASES, ids=[c[0] for c in CASES])
def test_gradient_against_eager_and_differences(backend, name, f, shape):
    loss = scalar(f)
    g = ad.jit(ad.grad(loss), fallback="error")
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for _ in range(3):
        x = rng.standard_normal(shape)
        got = g(x)
        np.testing.assert_allclose(got, ad.grad(loss)(x), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(got, numerical_jacobian(loss, (x,), 0).reshape(shape),
                                   rtol=1e-6, atol=1e-7)
    _check_ran(g, backend)
    assert gradcheck(loss, rng.standard_normal(shape))  # eager: both modes, differences


@pytest.mark.parametrize("name,f,shape", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_and_values(backend, name, f, shape, mode):
    J = ad.jit(ad.jacobian(f, mode=mode), fallback="error")
    value = ad.jit(f, fallback="error")
    rng = np.random.default_rng(7)
    for _ in range(2):
        x = rng.standard_normal(shape)
        np.testing.assert_allclose(J(x), ad.jacobian(f, mode=mode)(x), rtol=1e-12,
                                   atol=1e-13)
        np.testing.assert_allclose(J(x), ad.jacobian(f, mode="forward")(x), rtol=1e-12,
                                   atol=1e-13)
        np.testing.assert_allclose(J(x), numerical_jacobian(f, (x,), 0).reshape(J(x).shape),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(value(x), f(x), rtol=1e-13, atol=1e-14)
    _check_ran(J, backend)


def test_hvp_and_hessian(backend):
    """Second order: the ranks read are fixed between sorts, so the Hessian of a smooth
    function of a median is that of the entries read."""
    def loss(x):
        return np.sum(np.sin(np.median(x, axis=1)) * np.quantile(np.exp(x), 0.25, axis=1))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5))
    v = rng.standard_normal((3, 5))
    hvp = ad.jit(lambda x, v: ad.hvp(loss, x, v), fallback="error")
    np.testing.assert_allclose(hvp(x, v), ad.hvp(loss, x, v), rtol=1e-10, atol=1e-12)
    grad = ad.grad(loss)
    fd = numerical_jacobian(lambda y: grad(y).ravel(), (x,), 0).reshape(x.size, x.size) @ v.ravel()
    np.testing.assert_allclose(hvp(x, v).ravel(), fd, rtol=1e-5, atol=1e-6)
    H = ad.jit(ad.hessian(loss), fallback="error")
    np.testing.assert_allclose(H(x), ad.hessian(loss)(x), rtol=1e-10, atol=1e-12)


TIED = [np.array([[1.0, 2.0, 1.0, 2.0, 0.0, 2.0], [3.0, 3.0, 3.0, 3.0, 3.0, 3.0],
                  [0.0, 1.0, 0.0, 1.0, 5.0, 5.0]]),
        np.array([[2.0, 2.0, 1.0, 1.0, 1.0, 7.0], [-1.0, 4.0, -1.0, 4.0, -1.0, 4.0],
                  [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]])]


@pytest.mark.parametrize("f", [
    lambda x: np.median(x, axis=1), lambda x: np.median(x[:, :5], axis=1),
    lambda x: np.median(x, axis=0), lambda x: np.median(x),
    lambda x: np.sort(x, axis=1), lambda x: np.sort(x, axis=None),
    lambda x: np.quantile(x, [0.2, 0.5, 0.7], axis=1)],
    ids=["median even", "median odd", "median columns", "median all", "sort", "sort all",
         "quantile"])
def test_ties_follow_eager_mode(backend, f):
    """At tied entries the derivative goes where eager mode sends it (a stable sort: the
    first of the tied entries that a rank selects), in both modes."""
    J = ad.jit(ad.jacobian(f, mode="forward"), fallback="error")
    JR = ad.jit(ad.jacobian(f, mode="reverse"), fallback="error")
    g = ad.jit(ad.grad(lambda x: np.sum(_weights(f(x)) * f(x))), fallback="error")
    J(np.random.default_rng(0).standard_normal((3, 6)))  # recorded at distinct entries
    for x in TIED:
        want = ad.jacobian(f, mode="forward")(x)
        np.testing.assert_array_equal(J(x), want)
        np.testing.assert_array_equal(JR(x), ad.jacobian(f, mode="reverse")(x))
        np.testing.assert_allclose(g(x), ad.grad(lambda x: np.sum(_weights(f(x)) * f(x)))(x),
                                   rtol=1e-14, atol=0)
    _check_ran(J, backend)


def test_median_ties_concretely(backend):
    """``median([1, 1, 1, 2])``: the two middle ranks are the second and third 1."""
    g = ad.jit(ad.grad(np.median), fallback="error")
    g(np.array([4.0, 3.0, 2.0, 1.0]))
    np.testing.assert_array_equal(g(np.array([1.0, 1.0, 1.0, 2.0])), [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_array_equal(ad.grad(np.median)(np.array([1.0, 1.0, 1.0, 2.0])),
                                  [0.0, 0.5, 0.5, 0.0])


def test_nan_follows_numpy_values_and_eager_derivatives(backend):
    """A NaN in a group: np.median gives NaN with derivative 0 for that group (eager mode);
    np.sort puts it last and its derivative moves with it."""
    fm = lambda x: np.median(x, axis=1)  # noqa: E731
    fs = lambda x: np.sort(x, axis=1)  # noqa: E731
    fq = lambda x: np.quantile(x, [0.25, 0.9], axis=0)  # noqa: E731
    x = np.random.default_rng(4).standard_normal((3, 4))
    xn = x.copy()
    xn[1, 2] = np.nan
    xn[2, 0] = np.nan
    for f in (fm, fs, fq):
        J = ad.jit(ad.jacobian(f, mode="forward"), fallback="error")
        JR = ad.jit(ad.jacobian(f, mode="reverse"), fallback="error")
        value = ad.jit(f, fallback="error")
        J(x), JR(x), value(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            # interpolations add up the weighted entries (numpy: a + (b - a) t): 1 ulp
            np.testing.assert_allclose(value(xn), f(xn), rtol=1e-15, atol=0)
            np.testing.assert_array_equal(J(xn), ad.jacobian(f, mode="forward")(xn))
            np.testing.assert_array_equal(JR(xn), ad.jacobian(f, mode="reverse")(xn))
        _check_ran(J, backend)
    assert np.isnan(ad.jit(fm, fallback="error")(xn)[1])


def test_zero_d_and_one_entry_inputs(backend):
    for f in (np.median, lambda x: np.quantile(x, 0.3), lambda x: np.sort(x, axis=None)):
        for x in (np.array(1.5), np.array([2.5]), np.array([[0.5]])):
            J = ad.jit(ad.jacobian(f), fallback="error")
            np.testing.assert_array_equal(J(x), ad.jacobian(f)(x))
            np.testing.assert_array_equal(J(x + 1.0), ad.jacobian(f)(x + 1.0))
    for x, want in ((np.array(3.0), 6.0), (np.array([2.0]), [4.0])):
        g = ad.jit(ad.grad(lambda x: np.median(x) ** 2), fallback="error")
        np.testing.assert_array_equal(g(x), want)
        np.testing.assert_array_equal(g(x), ad.grad(lambda x: np.median(x) ** 2)(x))


def test_composed_with_other_instructions(backend):
    """Order statistics between maps, gathers, sums and a maximum."""
    def loss(x):
        s = np.sort(np.tanh(x) * 2.0, axis=1)
        spread = s[:, -1] - s[:, 0] + np.median(x * x, axis=1)
        return np.sum(spread ** 2) + np.max(np.percentile(x, 60, axis=0))
    rng = np.random.default_rng(5)
    g = ad.jit(ad.grad(loss), fallback="error")
    for _ in range(3):
        x = rng.standard_normal((4, 7))
        np.testing.assert_allclose(g(x), ad.grad(loss)(x), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(g(x), numerical_jacobian(loss, (x,), 0).reshape(x.shape),
                                   rtol=1e-6, atol=1e-7)
    _check_ran(g, backend)


def test_large_groups_use_the_merge_sort(backend):
    """Groups longer than the insertion sort's bound (ORDER_INSERTION_SORT)."""
    f = lambda x: np.quantile(x, [0.1, 0.5], axis=1)  # noqa: E731
    g = ad.jit(ad.grad(lambda x: np.sum(f(x) ** 2)), fallback="error")
    rng = np.random.default_rng(6)
    for x in (rng.standard_normal((3, 40)), np.round(rng.standard_normal((3, 40)))):
        np.testing.assert_allclose(g(x), ad.grad(lambda x: np.sum(f(x) ** 2))(x), rtol=1e-12,
                                   atol=1e-13)
    x = np.round(rng.standard_normal((3, 40)))
    x[0, 3] = np.nan
    J = ad.jit(ad.jacobian(lambda x: np.sort(x, axis=1)), fallback="error")
    J(rng.standard_normal((3, 40)))
    np.testing.assert_array_equal(J(x), ad.jacobian(lambda x: np.sort(x, axis=1))(x))
    _check_ran(g, backend)


def test_other_sizes_record_again():
    """Ranks and weights hold for the recorded shape; another shape is another recording."""
    g = ad.jit(ad.grad(lambda x: np.median(x) ** 2), fallback="error")
    for n in (5, 6, 5):
        x = np.random.default_rng(n).standard_normal(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TapeRetraceWarning)
            g(x)
        np.testing.assert_allclose(g(x), ad.grad(lambda x: np.median(x) ** 2)(x), rtol=1e-13)


@pytest.mark.parametrize("f,why", [
    (lambda x: np.nanmedian(x, axis=1), "not linear"),
    (lambda x: np.nanquantile(x, 0.3, axis=1), "no compiled form"),
    (lambda x: np.quantile(x, np.abs(x[0, 0]) / 4.0, axis=1), "computed parameter"),
])
def test_what_has_no_order_form_runs_as_a_call(backend, f, why):
    """What is left out: the nan- versions (their ranks depend on how many entries are
    NaN) and a q computed from the inputs. They run as numpy calls between the compiled
    parts (the reason kept), with eager mode's numbers; the interpreter, which makes no
    such calls, refuses them (``fallback="error"`` raises, by default the replay runs)."""
    x = np.random.default_rng(8).standard_normal((3, 5))
    if why != "computed parameter":  # a NaN that the nan- versions skip
        x[1, 2] = np.nan
    loss = lambda x: np.sum(np.nan_to_num(f(x)) ** 2)  # noqa: E731
    program = record(loss, x).program
    calls = [i for i in lower(program, [x]).instructions if isinstance(i, Call)]
    assert calls and why in calls[0].why  # the first: the order statistic
    want = ad.grad(loss)(x)
    if backend == "interpreter":
        with pytest.raises(JitError, match="no compiled form"):
            ad.jit(ad.grad(loss), fallback="error")(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ad.jit(ad.grad(loss))(x)
    else:
        got = ad.jit(ad.grad(loss), fallback="error")(x)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_declaration_that_lies_is_refused():
    """Probing checks the declaration: a call noted an order statistic that is not one (a
    cumulative sum over the axis) does not lower as one (it runs as a call)."""
    from dualad.sparsity import flows

    x = np.random.default_rng(9).standard_normal((2, 4))
    tape = record(lambda x: np.sum(np.cumsum(x, axis=1)), x)
    op_type = type(tape.program.ops[0].op)
    assert op_type not in flows._ORDER_STATISTICS
    flows._ORDER_STATISTICS[op_type] = (1, -1)
    try:
        first = lower(tape.program, [x]).instructions[0]
        assert isinstance(first, Call) and ("fixed ranks" in first.why or
                                            "one group" in first.why)
    finally:
        del flows._ORDER_STATISTICS[op_type]


def test_sparse_jacobians_need_the_whole_groups(backend):
    """Which entries a sort reads depends on the values: a pattern detected at the first
    call may not hold at the next, so ``ad.jit(ad.sparse_jacobian(f))`` of order
    statistics compiles only with ``sparsity=`` given (each output's whole group); a dense
    Jacobian does not seed compressed from a detected pattern."""
    f = lambda x: np.sort(x, axis=1)  # noqa: E731
    rng = np.random.default_rng(10)
    x = rng.standard_normal((3, 5))
    with pytest.raises(JitError, match="sparsity="):
        ad.jit(ad.sparse_jacobian(f), fallback="error")(x)
    pattern = np.kron(np.eye(3), np.ones((5, 5))).astype(bool)
    S = ad.jit(ad.sparse_jacobian(f, sparsity=pattern), fallback="error")
    S(x)
    for _ in range(3):
        y = rng.standard_normal((3, 5))
        np.testing.assert_array_equal(S(y).toarray(),
                                      ad.jacobian(f)(y).reshape(15, 15))
    _check_ran(S, backend)
    J = ad.jit(ad.jacobian(f), fallback="error")  # 15 inputs: dense seeds all the same
    J(x)
    for _ in range(3):
        y = rng.standard_normal((3, 5))
        np.testing.assert_array_equal(J(y), ad.jacobian(f)(y))


def test_batches(backend):
    """``compiled.batch(xs)``: one recording, every row sorted at run time."""
    def loss(x):
        return np.sum(np.median(x.reshape(4, 5), axis=1) ** 2) + np.sum(np.sort(x)[:3])

    def quantiles(x):
        return np.quantile(x.reshape(4, 5), [0.2, 0.7], axis=0)

    xs = np.random.default_rng(11).standard_normal((30, 20))
    xs[3, :4] = xs[3, 4:8]  # ties
    g = ad.jit(ad.grad(loss), fallback="error")
    J = ad.jit(ad.jacobian(quantiles), fallback="error")
    np.testing.assert_array_equal(g.batch(xs), np.stack([ad.grad(loss)(x) for x in xs]))
    np.testing.assert_allclose(J.batch(xs), np.stack([ad.jacobian(quantiles)(x) for x in xs]),
                               rtol=1e-14, atol=1e-15)


def test_large_groups_are_probed_by_moments():
    """Outputs of one rank or two neighbouring ranks are found from five directions
    whatever the group size: a sort of 20000 entries lowers (one direction per position
    would be 20000)."""
    from dualad.tape import lowering

    x = np.random.default_rng(12).standard_normal(20000)
    tape = record(lambda x: np.sort(x), x)
    assert x.size * (x.size + 2) > lowering.MAX_ORDER_PROBE
    (ins,) = lower(tape.program, [x]).instructions
    assert isinstance(ins, Order) and ins.ranks.shape == (20000, 1)
    np.testing.assert_array_equal(ins.ranks[:, 0], np.arange(20000))
    tape = record(lambda x: np.quantile(x, [0.25, 0.5]), x)
    (ins,) = lower(tape.program, [x]).instructions
    assert ins.ranks.shape == (2, 2)


@pytest.mark.parametrize("f", [lambda x: np.median(x, axis=1),
                               lambda x: np.quantile(x, [0.1, 0.5, 0.93], axis=0),
                               lambda x: np.sort(x, axis=None)])
def test_probing_by_positions_agrees(monkeypatch, f):
    """The general probe (one direction per position in a group: outputs of any ranks)
    finds what the five-direction one does."""
    from dualad.tape import lowering

    x = np.random.default_rng(13).standard_normal((4, 6))
    program = record(f, x).program
    (quick,) = lower(program, [x]).instructions

    def refuse(*args):
        raise LoweringError("not by moments")

    monkeypatch.setattr(lowering, "_ranks_by_moments", refuse)
    (general,) = lower(program, [x]).instructions
    for a, b in ((quick.group_of, general.group_of), (quick.members, general.members)):
        np.testing.assert_array_equal(a, b)
    for k in range(quick.ranks.shape[0]):
        got = {(r, w) for r, w in zip(general.ranks[k], general.weights[k]) if w != 0.0}
        want = {(r, w) for r, w in zip(quick.ranks[k], quick.weights[k]) if w != 0.0}
        assert got == want
