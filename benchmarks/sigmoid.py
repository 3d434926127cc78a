"""Value and derivative of sigmoid(sigmoid(sigmoid(x))) at one point."""

from __future__ import annotations

import math

import numpy as np

from .common import BASELINE, DUALAD, PEER, Bench, jit, require, require_dualad, to_numpy

TITLE = "value and derivative of sigmoid(sigmoid(sigmoid(x))) at x = 0.5"
XLABEL = "(one point)"
DESCRIPTION = """
sigmoid(x) = 1 / (1 + exp(-x)) composed three times, value and derivative at the scalar
x = 0.5: the fixed cost of one small transform call. Baseline: hand-written analytic
derivative in plain Python (math.exp, chain rule by hand). dualad: ad.derivative (plus
the plain function call for the value), ad.value_and_grad, and
ad.jit(ad.value_and_grad(f)) (compiled at the untimed first call, as jax.jit is). max abs
err is of the derivative.
"""

X0 = 0.5


def sig3(x, exp=np.exp):
    """sigmoid(sigmoid(sigmoid(x))) with the given exp."""
    for _ in range(3):
        x = 1 / (1 + exp(-x))
    return x


def by_hand(x):
    """(value, derivative) with the chain rule written out."""
    d = 1.0
    for _ in range(3):
        s = 1.0 / (1.0 + math.exp(-x))
        d *= s * (1.0 - s)
        x = s
    return x, d


def _dualad_derivative():
    ad = require_dualad()
    d = ad.derivative(sig3)
    return lambda: (sig3(X0), d(X0))


def _dualad_value_and_grad():
    ad = require_dualad()
    vg = ad.value_and_grad(sig3)
    return lambda: vg(X0)


def _dualad_jit_value_and_grad():
    ad = require_dualad()
    vg = jit(ad.value_and_grad(sig3))
    return lambda: vg(X0)


def _jax():
    jax = require("jax")
    vg = jax.jit(jax.value_and_grad(lambda x: sig3(x, jax.numpy.exp)))
    x = jax.numpy.asarray(X0)
    return lambda: jax.block_until_ready(vg(x))


def _torch():
    torch = require("torch")

    def fn():
        x = torch.tensor(X0, dtype=torch.float64, requires_grad=True)
        y = sig3(x, torch.exp)
        return y, torch.autograd.grad(y, x)[0]

    return fn


def _autograd():
    autograd = require("autograd")
    vg = autograd.value_and_grad(lambda x: sig3(x, autograd.numpy.exp))
    return lambda: vg(X0)


METHODS = [
    ("Python by hand", BASELINE, lambda: lambda: by_hand(X0), None),
    ("dualad derivative", DUALAD, _dualad_derivative, None),
    ("dualad value_and_grad", DUALAD, _dualad_value_and_grad, None),
    ("ad.jit(value_and_grad)", DUALAD, _dualad_jit_value_and_grad, None),
    ("jax.jit(value_and_grad)", PEER, _jax, "jax"),
    ("torch", PEER, _torch, "torch"),
    ("autograd value_and_grad", PEER, _autograd, "autograd"),
]


def run(quick: bool = False):
    """One row per method."""
    bench = Bench("sigmoid")
    want_v, want_d = by_hand(X0)

    def check(r):
        v, d = (float(to_numpy(t)) for t in r)
        return {"max abs err": f"{abs(d - want_d):.1e}", "value err": f"{abs(v - want_v):.1e}"}

    for method, kind, make, peer_name in METHODS:
        bench.time("x=0.5", method, kind, make, size=1, check=check, peer_name=peer_name)
    return bench.rows
