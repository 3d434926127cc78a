"""Right-hand sides written the way imported packages write them (used by test_allocations)."""

import numpy
import numpy as np
from numpy import empty, zeros

CALLS = 0


def _rates(y):
    out = zeros(2)  # from numpy import zeros
    out[0] = y[0] * y[1]
    out[1] = y[1] ** 2
    return out


def package_rhs(t, y):
    r = _rates(y)                      # a helper of the same module
    dydt = empty(3)
    dydt[0] = -r[0]
    dydt[1] = r[0] - r[1]
    dydt[2] = r[1] + t
    return dydt


def imports_inside(y):
    import numpy as local_np

    out = local_np.ones(2)
    out[1] = local_np.sin(y[0])
    return out


def module_attribute(y):
    out = numpy.full(2, 3.0)
    out[0] = y[0] * out[1]
    return out


def counts_calls(y):
    global CALLS
    CALLS += 1
    out = np.zeros(1)
    out[0] = y[0]
    return out


class Model:
    def rhs(self, y):
        out = np.zeros(2)
        out[0] = y[1]
        out[1] = -y[0]
        return out
