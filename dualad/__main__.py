"""``python -m dualad``: a short demonstration on a built-in example."""

from __future__ import annotations

import time

import numpy as np

import dualad as ad
from dualad.gradcheck import numerical_jacobian


def _timeit(f, *args, repeat: int = 200) -> float:
    f(*args)
    start = time.perf_counter()
    for _ in range(repeat):
        f(*args)
    return (time.perf_counter() - start) / repeat


def main() -> None:
    """Differentiate a small numpy function and check it against finite differences."""

    def f(x):
        return np.sum(np.sin(x) * x ** 2)

    x = np.linspace(-1.0, 2.0, 5)
    g = ad.grad(f)(x)
    fd = numerical_jacobian(f, (x,), 0)
    analytic = np.cos(x) * x ** 2 + 2 * x * np.sin(x)
    print("dualad demo: f(x) = sum(sin(x) * x**2) at x =", np.array2string(x, precision=2))
    print("  reverse-mode gradient :", np.array2string(g, precision=6))
    print("  analytic gradient     :", np.array2string(analytic, precision=6))
    print(f"  max |grad - finite differences| = {np.max(np.abs(g - fd)):.2e}")
    print(f"  gradcheck: {ad.gradcheck(f, x, modes=('reverse',))}")
    t_grad = _timeit(ad.grad(f), x)
    t_fd = _timeit(lambda x: numerical_jacobian(f, (x,), 0), x)
    print(f"  time: grad {t_grad * 1e6:.1f} us, finite differences {t_fd * 1e6:.1f} us")


if __name__ == "__main__":
    main()
