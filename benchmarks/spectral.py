"""Gradient of a spectral-method energy: np.fft.rfft / irfft (and complex intermediates)."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, Bench, jit, require, require_dualad, to_numpy

TITLE = "gradient of a spectral energy through rfft / irfft"
XLABEL = "grid points n"
DESCRIPTION = """
E(u) = sum(u_x ** 2) + sum(u ** 4) on a periodic grid of n points, with the derivative
u_x = irfft(i k * rfft(u)) computed spectrally (complex intermediates). Gradient of E.
Baseline: the gradient written by hand with numpy (the spectral derivative is
antisymmetric, so grad = -2 D(u_x) + 4 u**3). dualad: eager ad.grad, and
ad.jit(ad.grad(E)), which says that it falls back as long as complex intermediates do not
compile. max abs err is against that gradient.
"""


def _wavenumbers(n, xp=np):
    return 2j * np.pi * np.fft.rfftfreq(n, d=1.0 / n)


def energy(u, fft=np.fft, k=None):
    ux = fft.irfft(k * fft.rfft(u), u.shape[-1])
    return (ux ** 2).sum() + (u ** 4).sum()


def by_hand(u, k):
    n = u.shape[-1]
    ux = np.fft.irfft(k * np.fft.rfft(u), n)
    return -2.0 * np.fft.irfft(k * np.fft.rfft(ux), n) + 4.0 * u ** 3


def methods(u):
    n = u.size
    k = _wavenumbers(n)

    def spectral_energy(u):
        return energy(u, np.fft, k)

    def dualad_grad():
        ad = require_dualad()
        g = ad.grad(spectral_energy)
        return lambda: g(u)

    def dualad_jit():
        ad = require_dualad()
        g = jit(ad.grad(spectral_energy))
        return lambda: g(u)

    def jax_grad(jitted):
        def make():
            jax = require("jax")
            jnp = jax.numpy
            kj = jnp.asarray(k)
            g = jax.grad(lambda u: energy(u, jnp.fft, kj))
            if jitted:
                g = jax.jit(g)
            uj = jnp.asarray(u)
            return lambda: g(uj).block_until_ready()

        return make

    def torch_grad():
        torch = require("torch")
        kt = torch.as_tensor(k)

        def fn():
            ut = torch.tensor(u, requires_grad=True)
            e = energy(ut, torch.fft, kt)
            return torch.autograd.grad(e, ut)[0]

        return fn

    def autograd_grad():
        autograd = require("autograd")
        g = autograd.grad(lambda u: energy(u, autograd.numpy.fft, k))
        return lambda: g(u)

    return [
        ("numpy by hand", BASELINE, lambda: lambda: by_hand(u, k), None),
        ("dualad grad", DUALAD, dualad_grad, None),
        ("ad.jit(grad)", DUALAD, dualad_jit, None),
        ("torch", PEER, torch_grad, "torch"),
        ("autograd", PEER, autograd_grad, "autograd"),
        ("jax grad (no jit)", PEER, jax_grad(False), "jax"),
        ("jax.jit(grad)", PEER, jax_grad(True), "jax"),
    ]


def run(quick: bool = False):
    """Rows for n = 256 (and 4096, 65536 unless quick)."""
    bench = Bench("spectral")
    for n in (256,) if quick else (256, 4096, 65536):
        u = np.sin(2 * np.pi * np.arange(n) / n) + 0.1 * np.cos(6 * np.pi * np.arange(n) / n)
        want = by_hand(u, _wavenumbers(n))

        def check(r, want=want):
            return {"max abs err": f"{np.max(np.abs(to_numpy(r) - want)):.1e}"}

        for method, kind, make, peer_name in methods(u):
            bench.time(f"n={n}", method, kind, make, size=n,
                       check=None if kind == BASELINE else check, peer_name=peer_name)
    return bench.rows
