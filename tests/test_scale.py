"""Scale: a 10^6-deep graph, memory per recorded operation, the graph freed when its output
is dropped, and the peak memory of a 2000 x 2000 forward-mode Jacobian.

Run with ``-s`` to see the measurements printed.
"""

import gc
import time
import tracemalloc
import weakref

import numpy as np

import dualad as ad


def test_million_deep_chain_reverse_mode_without_recursion_error():
    n = 1_000_000
    start = time.perf_counter()
    x = ad.Variable(1.0)
    y = x
    middle = None
    for i in range(n):
        y = y * 1.0000001 if i % 2 else y + 1e-7
        if i == n // 2:
            middle = weakref.ref(y)
    recorded = time.perf_counter()
    y.backward()
    finished = time.perf_counter()
    np.testing.assert_allclose(float(x.grad), 1.0000001 ** (n // 2), rtol=1e-9)
    print(f"\n10^6-deep chain: record {recorded - start:.1f} s, backward "
          f"{finished - recorded:.1f} s")
    # dropping the output frees the whole chain, without deep recursion in deallocation
    out = weakref.ref(y)
    del y
    gc.collect()
    assert out() is None and middle() is None


def test_memory_per_recorded_operation_on_a_scalar_chain():
    n = 100_000
    gc.collect()
    tracemalloc.start()
    try:
        x = ad.Variable(1.0)
        base = tracemalloc.get_traced_memory()[0]
        y = x
        for _ in range(n):
            y = y * 1.0000001
        used = tracemalloc.get_traced_memory()[0] - base
        per_op = used / n
        print(f"\nmemory per recorded scalar operation: {per_op:.0f} bytes")
        assert per_op <= 512, f"{per_op:.0f} bytes per recorded operation"
        ref = weakref.ref(y)
        del y
        gc.collect()
        left = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert ref() is None
    assert left < 0.1 * used, f"{left} of {used} bytes still held after the graph was dropped"


def test_graph_with_array_values_is_freed_after_backward_and_drop():
    x = ad.Variable(np.ones(10_000))
    y = x
    for _ in range(50):
        y = np.tanh(y * 0.9 + 0.1)
    out = np.sum(y)
    refs = [weakref.ref(out), weakref.ref(y)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out.backward()
        del out, y
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert all(r() is None for r in refs)
    # what stays is x.grad (80 kB), not the 50 recorded arrays (~4 MB)
    assert after - before < 400_000
    assert x.grad.shape == (10_000,)


def test_forward_mode_jacobian_2000_by_2000_peak_memory():
    n = 2000
    rng = np.random.default_rng(7)
    a = rng.normal(size=(n, n)) / np.sqrt(n)
    x = rng.normal(size=n)

    def f(v):
        return np.tanh(a[: len(v), : len(v)] @ v) + np.sin(v) * v

    ad.jacobian(f, mode="forward")(x[:8])   # warm up: kernels compiled outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        start = time.perf_counter()
        jac = ad.jacobian(f, mode="forward")(x)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = (1 - np.tanh(a @ x) ** 2)[:, None] * a + np.diag(np.cos(x) * x + np.sin(x))
    np.testing.assert_allclose(jac, expected, rtol=1e-12, atol=1e-12)
    mib = 2 ** 20
    print(f"\nforward-mode Jacobian {n} x {n}: {elapsed:.1f} s, peak traced memory "
          f"{peak / mib:.0f} MiB (the Jacobian itself is {jac.nbytes / mib:.0f} MiB)")
    assert peak < 6 * jac.nbytes, f"peak {peak / mib:.0f} MiB"
