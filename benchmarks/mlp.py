"""Gradient of a small MLP's cross-entropy loss w.r.t. all its parameters."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, Bench, jit, require, require_dualad

TITLE = "gradient of an MLP loss (two matmuls, tanh, log-sum-exp) w.r.t. its parameters"
DESCRIPTION = """
A one-hidden-layer perceptron on a batch of n inputs with d features: logits =
tanh(X @ W1 + b1) @ W2 + b2 (hidden width 64, 10 classes), loss = mean cross-entropy with a
numerically stable log-sum-exp (the row maximum subtracted). One call returns the gradients
w.r.t. W1, b1, W2 and b2. Baseline: the backward pass written by hand in numpy (softmax
minus one-hot, then the chain rule through both layers). dualad: eager ad.grad, and
ad.jit(ad.grad(loss)) (compiled with Numba at the untimed first call; fallback="error", so
where the call does not compile the row says why instead of a time). max abs err is
against the hand-written gradients.
"""

HIDDEN, CLASSES = 64, 10


def loss(w1, b1, w2, b2, x, onehot):
    """Mean cross-entropy of the MLP in plain numpy (traced by dualad and autograd)."""
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    m = np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
    return -np.sum(onehot * (logits - lse)) / x.shape[0]


def by_hand(w1, b1, w2, b2, x, onehot):
    """The gradients of ``loss`` with the backward pass written out."""
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    dlogits = (e / e.sum(axis=1, keepdims=True) - onehot) / x.shape[0]
    dh = dlogits @ w2.T
    dz = dh * (1.0 - h * h)
    return x.T @ dz, dz.sum(axis=0), h.T @ dlogits, dlogits.sum(axis=0)


def problem(n: int, d: int, seed: int = 0):
    """Parameters and data for a batch of ``n`` inputs with ``d`` features."""
    rng = np.random.default_rng(seed)
    params = (rng.standard_normal((d, HIDDEN)) / np.sqrt(d), 0.1 * rng.standard_normal(HIDDEN),
              rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN),
              0.1 * rng.standard_normal(CLASSES))
    x = rng.standard_normal((n, d))
    onehot = np.eye(CLASSES)[rng.integers(0, CLASSES, n)]
    return params, x, onehot


def _baseline(params, x, onehot):
    return lambda: by_hand(*params, x, onehot)


def _dualad(params, x, onehot):
    ad = require_dualad()
    g = ad.grad(loss, argnums=(0, 1, 2, 3))
    return lambda: g(*params, x, onehot)


def _dualad_jit(params, x, onehot):
    ad = require_dualad()
    g = jit(ad.grad(loss, argnums=(0, 1, 2, 3)))
    return lambda: g(*params, x, onehot)


def _torch(params, x, onehot):
    torch = require("torch")
    p0 = [torch.from_numpy(p) for p in params]
    xt, yt = torch.from_numpy(x), torch.from_numpy(onehot)

    def fn():
        ps = [p.detach().requires_grad_(True) for p in p0]
        h = torch.tanh(xt @ ps[0] + ps[1])
        logits = h @ ps[2] + ps[3]
        lse = torch.logsumexp(logits, dim=1, keepdim=True)
        value = -(yt * (logits - lse)).sum() / xt.shape[0]
        return torch.autograd.grad(value, ps)

    return fn


def _jax(params, x, onehot):
    jax = require("jax")
    jnp = jax.numpy

    def jloss(w1, b1, w2, b2, x, y):
        h = jnp.tanh(x @ w1 + b1)
        logits = h @ w2 + b2
        m = jnp.max(logits, axis=1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=1, keepdims=True)) + m
        return -jnp.sum(y * (logits - lse)) / x.shape[0]

    g = jax.jit(jax.grad(jloss, argnums=(0, 1, 2, 3)))
    args = [jnp.asarray(a) for a in (*params, x, onehot)]
    return lambda: jax.block_until_ready(g(*args))


def _autograd(params, x, onehot):
    autograd = require("autograd")
    anp = autograd.numpy

    def aloss(w1, b1, w2, b2, x, y):
        h = anp.tanh(anp.dot(x, w1) + b1)
        logits = anp.dot(h, w2) + b2
        m = anp.max(logits, axis=1, keepdims=True)
        lse = anp.log(anp.sum(anp.exp(logits - m), axis=1, keepdims=True)) + m
        return -anp.sum(y * (logits - lse)) / x.shape[0]

    g = autograd.grad(aloss, argnum=(0, 1, 2, 3)) if _multi_argnum(autograd) else None
    if g is None:
        g1 = autograd.grad(lambda p, x, y: aloss(*p, x, y))
        return lambda: g1(tuple(params), x, onehot)
    return lambda: g(*params, x, onehot)


def _multi_argnum(autograd) -> bool:
    try:
        autograd.grad(lambda a, b: a * b, argnum=(0, 1))(1.0, 2.0)
        return True
    except Exception:
        return False


METHODS = [
    ("numpy by hand", BASELINE, _baseline, None),
    ("dualad grad", DUALAD, _dualad, None),
    ("ad.jit(grad)", DUALAD, _dualad_jit, None),
    ("torch", PEER, _torch, "torch"),
    ("jax.jit(grad)", PEER, _jax, "jax"),
    ("autograd", PEER, _autograd, "autograd"),
]


def _check(want):
    def check(result):
        from .common import to_numpy

        got = [np.asarray(to_numpy(r), dtype=float) for r in result]
        err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
        return {"max abs err": f"{err:.1e}"}

    return check


def run(quick: bool = False):
    """Rows for a 64 x 32 batch (and 512 x 256 unless quick)."""
    bench = Bench("mlp")
    for n, d in ((64, 32),) if quick else ((64, 32), (512, 256)):
        params, x, onehot = problem(n, d)
        check = _check(by_hand(*params, x, onehot))
        for method, kind, make, peer_name in METHODS:
            bench.time(f"{n}x{d}", method, kind,
                       lambda make=make, args=(params, x, onehot): make(*args),
                       size=n * d, check=check, peer_name=peer_name)
    return bench.rows
