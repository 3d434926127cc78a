"""Concurrency: threads differentiating at the same time get their own answers, and a rule
added in one thread is used by every thread afterwards."""

import threading

import numpy as np
import pytest

import dualad as ad

N_THREADS = 8


def run_threads(target, n=N_THREADS):
    """Run ``target(i)`` in ``n`` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def worker(i):
        try:
            barrier.wait(timeout=30)
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def _f(k):
    """A different function per thread: sum(sin(k x) * x) + k * x0 * x1."""
    def f(x):
        return np.sum(np.sin(k * x) * x) + k * x[0] * x[1]
    return f


def _grad_f(k, x):
    g = k * np.cos(k * x) * x + np.sin(k * x)
    g[0] += k * x[1]
    g[1] += k * x[0]
    return g


def test_threads_computing_different_gradients_get_their_own_answers():
    x = np.array([0.3, -0.4, 1.1])

    def work(i):
        k = float(i + 1)
        out = []
        for _ in range(30):
            out.append(ad.grad(_f(k))(x))
        return out

    results = run_threads(work)
    for i, grads in results.items():
        expected = _grad_f(float(i + 1), x)
        for g in grads:
            np.testing.assert_allclose(g, expected, rtol=1e-13)


def test_threads_mixing_modes_and_nesting_get_their_own_answers():
    x = np.array([0.3, -0.4, 1.1])

    def work(i):
        k = float(i + 1)
        f = _f(k)
        kind = i % 4
        out = []
        for _ in range(10):
            if kind == 0:
                out.append(ad.grad(f)(x))
            elif kind == 1:
                out.append(ad.jacobian(f, mode="forward")(x))
            elif kind == 2:
                out.append(ad.jacobian(f, mode="reverse")(x))
            else:   # a nested derivative: the diagonal of the Hessian, by forward over reverse
                out.append(np.diag(ad.jacobian(ad.grad(f), mode="forward")(x)))
        return kind, out

    results = run_threads(work)
    for i, (kind, values) in results.items():
        k = float(i + 1)
        if kind == 3:
            expected = -k * k * np.sin(k * x) * x + 2 * k * np.cos(k * x)
        else:
            expected = _grad_f(k, x)
        for v in values:
            np.testing.assert_allclose(v, expected, rtol=1e-12, atol=1e-12)


def test_graph_objects_in_threads_accumulate_their_own_gradients():
    def work(i):
        x = ad.Variable(np.full(4, float(i)))
        for _ in range(20):
            np.sum(x * x).backward()
        return x.grad

    for i, g in run_threads(work).items():
        np.testing.assert_array_equal(g, np.full(4, 40.0 * i))


def test_a_rule_added_in_one_thread_is_used_by_all_afterwards():
    def shifted_square(x):
        return (x - 1.0) * (x - 1.0)

    shifted_square = ad.primitive(shifted_square)

    def add_rule():
        @ad.gradient.dispatch
        def gradient(op: ad.Method[shifted_square], grad, output, x):
            return (grad * 2.0 * (x - 1.0),)

    t = threading.Thread(target=add_rule)
    t.start()
    t.join()

    def work(i):
        return ad.grad(lambda x: np.sum(shifted_square(x)))(np.full(3, float(i)))

    for i, g in run_threads(work).items():
        np.testing.assert_allclose(g, np.full(3, 2.0 * (i - 1.0)))


def test_define_rule_in_one_thread_is_used_by_all_afterwards_in_both_modes():
    def cubic_step(x):
        return x * x * x + x

    holder = {}
    t = threading.Thread(target=lambda: holder.setdefault(
        "f", ad.define_rule(cubic_step, args=("x",), derivatives=("3 * x * x + 1",))))
    t.start()
    t.join()
    f = holder["f"]

    def work(i):
        x = np.array([float(i), -1.0])
        return (ad.grad(lambda a: np.sum(f(a)))(x),
                np.diag(ad.jacobian(f, mode="forward")(x)))

    for i, (g_rev, g_fwd) in run_threads(work).items():
        expected = 3 * np.array([float(i), -1.0]) ** 2 + 1
        np.testing.assert_allclose(g_rev, expected)
        np.testing.assert_allclose(g_fwd, expected)


def test_rules_registered_while_other_threads_differentiate():
    """Registering methods clears plum's caches; threads busy differentiating must not see
    a wrong or missing rule meanwhile."""
    stop = threading.Event()
    x = np.array([0.2, 0.9])
    errors: list[BaseException] = []

    def busy():
        try:
            while not stop.is_set():
                np.testing.assert_allclose(ad.grad(lambda a: np.sum(np.sin(a) * a))(x),
                                           np.cos(x) * x + np.sin(x), rtol=1e-13)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    workers = [threading.Thread(target=busy) for _ in range(4)]
    for w in workers:
        w.start()
    try:
        for j in range(40):
            def fresh(x, j=j):
                return x * j

            fresh = ad.primitive(fresh)

            @ad.gradient.dispatch
            def gradient(op: ad.Method[fresh], grad, output, x, j=j):
                return (grad * j,)

            assert float(ad.grad(fresh)(1.0)) == j
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=60)
    if errors:
        raise errors[0]


def test_pause_recording_is_per_thread():
    paused = threading.Event()
    release = threading.Event()

    def pauser():
        with ad.pause_recording():
            paused.set()
            release.wait(timeout=30)

    t = threading.Thread(target=pauser)
    t.start()
    try:
        assert paused.wait(timeout=30)
        y = np.sin(ad.Variable(np.ones(2)))
        assert isinstance(y, ad.CachedNode)
    finally:
        release.set()
        t.join()


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobians_in_threads_with_different_shapes(mode):
    def work(i):
        n = i + 1
        x = np.linspace(0.1, 1.0, n)
        return ad.jacobian(lambda a: np.exp(a) * a[::-1], mode=mode)(x), x

    for jac, x in run_threads(work).values():
        expected = np.diag(np.exp(x) * x[::-1]) + np.exp(x)[:, None] * np.eye(len(x))[::-1]
        np.testing.assert_allclose(jac, expected, rtol=1e-13)
