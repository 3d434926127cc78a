"""Generated entries as Numba functions chained by Python glue."""

from __future__ import annotations

import numpy as np
import pytest

from dualad.derivatives.codegen import import_kernel_module
from dualad.tape.glue import assemble

pytestmark = pytest.mark.usefixtures("kernel_cache")


def namespace_of(source):
    module = import_kernel_module("import math\nimport numba\nimport numpy as np\n\n\n"
                                  + source, subdirectory="tapes")
    return vars(module)


def test_parts_that_only_rename_and_reshape_run_as_python():
    segments = [("numba", ["    _v0 = _x0", "    _v1 = _x1"]),
                ("python", ["    _v2 = np.tanh(_v0) + _v1"]),
                ("numba", ["    _v3 = _v2 * 2.0"]),
                ("python", ["    _v4 = np.exp(_v3)"]),
                ("numba", ["    return (_v4).reshape((2, 2, )), _v3"])]
    source = assemble("entry", segments, ["_x0", "_x1"], max_lines=100)
    assert source.count("@numba.njit") == 1  # only the part with arithmetic
    x0, x1 = np.linspace(0.1, 0.4, 4), np.linspace(1.0, 2.0, 4)
    out, v3 = namespace_of(source)["entry"](x0, x1)
    np.testing.assert_allclose(v3, (np.tanh(x0) + x1) * 2.0)
    np.testing.assert_allclose(out, np.exp(v3).reshape(2, 2))


def test_calls_and_arithmetic_stay_in_numba():
    segments = [("numba", ["    _v0 = math.log(_x0)"]),
                ("python", ["    _v1 = np.tanh(_v0)"]),
                ("numba", ["    return _v1 - 1.0"])]
    source = assemble("entry", segments, ["_x0"], max_lines=100)
    assert source.count("@numba.njit") == 2
    assert namespace_of(source)["entry"](0.5) == np.tanh(np.log(0.5)) - 1.0
