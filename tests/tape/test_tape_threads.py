"""One tape used from several threads at once: each thread gets its own answers, also
when the threads make the tape record again (branches, shapes)."""

import threading
import warnings

import numpy as np

import dualad as ad
from dualad.tape import TapeRetraceWarning, record


def f(x):
    if np.sum(x) > 0:
        return np.sum(np.sin(x) * x)
    return np.sum(np.cos(x) * x ** 2)


def test_one_tape_from_several_threads():
    tape = record(f, np.ones(3))
    errors = []
    barrier = threading.Barrier(6)

    def worker(k):
        try:
            rng = np.random.default_rng(k)
            barrier.wait(timeout=30)
            for i in range(20):
                n = 3 if (k + i) % 3 else 4  # some calls need a new shape
                x = rng.standard_normal(n) + (1.0 if k % 2 else -1.0)
                np.testing.assert_allclose(tape.grad(x), ad.grad(f)(x), rtol=1e-12)
                np.testing.assert_allclose(tape(x), f(x), rtol=1e-14)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TapeRetraceWarning)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads)
    assert 1 <= tape.recordings <= 4  # two branches x two shapes, each recorded once
