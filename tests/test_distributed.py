"""Scale-out: transforms and user rules pickle (cloudpickle) and work in dask.distributed
worker processes. Functions and rules made inside a test function are not importable, so
cloudpickle sends them by value, as it does for a script's or a notebook's.

Skipped when dask.distributed is missing (it is the optional ``distributed`` extra)."""

import logging
import os
import time

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

cloudpickle = pytest.importorskip("cloudpickle")


def _make_softplus():
    """A primitive with user rules in both modes, defined where no worker can import it."""

    def softplus(x):
        return np.log1p(np.exp(x))

    softplus = ad.primitive(softplus)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[softplus], grad, output, x):
        return (grad / (1.0 + np.exp(-x)),)

    @ad.forward.dispatch
    def forward(op: ad.Method[softplus], x: ad.Dual):
        slope = 1.0 / (1.0 + np.exp(-x.value))
        return ad.Dual(softplus(x.value), slope[..., None] * x.partials, x.tag)

    return softplus


def _rhs(t, y):
    return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + 8.0


def test_transforms_and_rules_round_trip_through_cloudpickle():
    softplus = _make_softplus()
    x = np.array([0.3, -1.2, 2.0])
    for transform in (ad.grad(lambda v: np.sum(softplus(v) * v)),
                      ad.jacobian(lambda v: softplus(v) * v[0], mode="forward"),
                      ad.jacobian(lambda v: softplus(v) * v[0], mode="reverse"),
                      ad.hessian(lambda v: np.sum(softplus(v)))):
        again = cloudpickle.loads(cloudpickle.dumps(transform))
        np.testing.assert_allclose(again(x), transform(x), rtol=1e-12)
    jac = cloudpickle.loads(cloudpickle.dumps(ad.ode_jacobian(_rhs)))
    np.testing.assert_allclose(jac(0.0, x + 8), numerical_jacobian(lambda y: _rhs(0, y),
                                                                   (x + 8,), 0), rtol=1e-6)


def test_unpickled_primitive_uses_its_rules_not_its_body():
    softplus = _make_softplus()
    again = cloudpickle.loads(cloudpickle.dumps(softplus))
    assert again is not softplus  # by value: a new function, with its rules registered again
    x = np.array([0.5, -0.5])
    expected = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(ad.grad(lambda v: np.sum(again(v)))(x), expected)
    np.testing.assert_allclose(np.diag(ad.jacobian(again, mode="forward")(x)), expected)
    twice = cloudpickle.loads(cloudpickle.dumps(again))  # rules travel on and on
    np.testing.assert_allclose(ad.grad(lambda v: np.sum(twice(v)))(x), expected)


def _noop(x):
    return x


def _jacobians_with_pid(jac, states):
    return os.getpid(), ad.vmap(jac, in_axes=(None, 0))(0.0, np.asarray(states))


@pytest.mark.slow
def test_ensemble_on_two_worker_processes():
    distributed = pytest.importorskip("dask.distributed")
    softplus = _make_softplus()

    def rhs(t, y):  # uses the primitive and its rules, sent by value
        return _rhs(t, y) - 0.1 * softplus(y)

    jac = ad.ode_jacobian(rhs)
    grad = ad.grad(lambda y: np.sum(softplus(y) ** 2))
    states = list(np.random.default_rng(1).standard_normal((40, 6)) + 8.0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.CRITICAL
                                  ) as cluster, distributed.Client(cluster) as client:
        # batches sized from a measurement: each task >= 20 task round trips, 2+ per worker
        t0 = time.perf_counter()
        client.gather(client.map(_noop, range(4), pure=False))
        per_task = (time.perf_counter() - t0) / 2
        t0 = time.perf_counter()
        _jacobians_with_pid(jac, states[:5])
        per_state = (time.perf_counter() - t0) / 5
        n_tasks = max(4, min(len(states), int(per_state * len(states) / (20 * per_task))))
        batches = [states[i::n_tasks] for i in range(n_tasks)]
        futures = client.map(_jacobians_with_pid, [jac] * n_tasks, batches, pure=False)
        results = client.gather(futures)
        grads = client.gather(client.map(grad, states[:8], pure=False))
        worker_pids = set(client.run(os.getpid).values())
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
    assert {pid for pid, _ in results} <= worker_pids
    for batch, (_, jacobians) in zip(batches, results):
        for y, j in zip(batch, jacobians):
            np.testing.assert_allclose(j, jac(0.0, y), rtol=1e-12)
            np.testing.assert_allclose(j, numerical_jacobian(lambda v: rhs(0.0, v), (y,), 0),
                                       rtol=1e-5, atol=1e-7)
    for y, g in zip(states[:8], grads):
        np.testing.assert_allclose(g, grad(y), rtol=1e-12)
