"""A public stiff test set, as packages of ODE test problems write it.

Robertson, OREGO, HIRES, POLLU, E5 and Van der Pol (mu = 1e3) from Hairer & Wanner,
"Solving Ordinary Differential Equations II", and the Bari IVP test set (Mazzia &
Magherini); a 2-D Brusselator (Hairer & Wanner II, section IV.10) and a 1-D Brusselator
reaction-diffusion PDE (Hairer & Wanner II, section IV.1). Each problem has

* ``rhs(t, y)``: plain numpy written the way packages write it (``dydt = np.zeros(8);
  dydt[0] = ...``, ``np.empty`` with strided writes, ``np.array([...])`` of scalars, tuple
  unpacking), valid Numba code for the small ones, so ``numba.njit(rhs)`` is the same
  model compiled;
* ``jnp_rhs(xp)``: the same model in functional form (``xp.stack``), for jax;
* ``jac(t, y)``: the Jacobian written by hand (dense, or ``scipy.sparse`` for the PDEs);
* for the two PDEs, ``loop_rhs``: the same model as loops, as ``@njit`` code is written.

Example:
    >>> from benchmarks.stiff_problems import PROBLEMS
    >>> [p.name for p in PROBLEMS][:3]
    ['Robertson', 'OREGO', 'HIRES']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

# -- Robertson (Hairer & Wanner II, IV.1; Bari "ROBER") --------------------------------------


def robertson(t, y):
    y1, y2, y3 = y
    return np.array([-0.04 * y1 + 1e4 * y2 * y3,
                     0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2,
                     3e7 * y2 * y2])


def robertson_xp(xp):
    def f(t, y):
        y1, y2, y3 = y[0], y[1], y[2]
        return xp.stack([-0.04 * y1 + 1e4 * y2 * y3,
                         0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2, 3e7 * y2 * y2])
    return f


def robertson_jac(t, y):
    _, y2, y3 = y
    return np.array([[-0.04, 1e4 * y3, 1e4 * y2],
                     [0.04, -1e4 * y3 - 6e7 * y2, -1e4 * y2],
                     [0.0, 6e7 * y2, 0.0]])


# -- OREGO, the Oregonator (Hairer & Wanner II, IV.1; Bari "OREGO") ---------------------------

_S, _W, _Q = 77.27, 0.161, 8.375e-6


def orego(t, y):
    y1, y2, y3 = y
    dydt = np.empty(3)
    dydt[0] = _S * (y2 - y1 * y2 + y1 - _Q * y1 * y1)
    dydt[1] = (-y2 - y1 * y2 + y3) / _S
    dydt[2] = _W * (y1 - y3)
    return dydt


def orego_xp(xp):
    def f(t, y):
        y1, y2, y3 = y[0], y[1], y[2]
        return xp.stack([_S * (y2 - y1 * y2 + y1 - _Q * y1 * y1), (-y2 - y1 * y2 + y3) / _S,
                         _W * (y1 - y3)])
    return f


def orego_jac(t, y):
    y1, y2, _ = y
    return np.array([[_S * (1.0 - y2 - 2.0 * _Q * y1), _S * (1.0 - y1), 0.0],
                     [-y2 / _S, (-1.0 - y1) / _S, 1.0 / _S],
                     [_W, 0.0, -_W]])


# -- HIRES (Bari "HIRES", Schäfer 1975) --------------------------------------------------------


def hires(t, y):
    dydt = np.zeros(8)
    dydt[0] = -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007
    dydt[1] = 1.71 * y[0] - 8.75 * y[1]
    dydt[2] = -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4]
    dydt[3] = 8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3]
    dydt[4] = -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6]
    dydt[5] = -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6]
    dydt[6] = 280.0 * y[5] * y[7] - 1.81 * y[6]
    dydt[7] = -dydt[6]
    return dydt


def hires_xp(xp):
    def f(t, y):
        return xp.stack([
            -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
            1.71 * y[0] - 8.75 * y[1],
            -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
            8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
            -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
            -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
            280.0 * y[5] * y[7] - 1.81 * y[6],
            -280.0 * y[5] * y[7] + 1.81 * y[6]])
    return f


def hires_jac(t, y):
    j = np.zeros((8, 8))
    j[0, 0], j[0, 1], j[0, 2] = -1.71, 0.43, 8.32
    j[1, 0], j[1, 1] = 1.71, -8.75
    j[2, 2], j[2, 3], j[2, 4] = -10.03, 0.43, 0.035
    j[3, 1], j[3, 2], j[3, 3] = 8.32, 1.71, -1.12
    j[4, 4], j[4, 5], j[4, 6] = -1.745, 0.43, 0.43
    j[5, 3], j[5, 4], j[5, 5], j[5, 6], j[5, 7] = 0.69, 1.71, -0.43 - 280.0 * y[7], 0.69, \
        -280.0 * y[5]
    j[6, 5], j[6, 6], j[6, 7] = 280.0 * y[7], -1.81, 280.0 * y[5]
    j[7] = -j[6]
    return j


# -- POLLU, an air pollution model (Bari "POLLU", Verwer 1994): 20 species, 25 reactions -------

_K = np.array([0.35, 26.6, 1.23e4, 8.6e-4, 8.2e-4, 1.5e4, 1.3e-4, 2.4e4, 1.65e4, 9.0e3,
               0.022, 1.2e4, 1.88, 1.63e4, 4.8e6, 3.5e-4, 0.0175, 1.0e8, 4.44e11, 1240.0,
               2.1, 5.78, 0.0474, 1780.0, 3.12])
# reactants of each reaction (0-based species), as in the Fortran source
_REACTANTS = [(0,), (1, 3), (4, 1), (6,), (6,), (6, 5), (8,), (8, 5), (10, 1), (10, 0),
              (12,), (9, 1), (13,), (0, 5), (2,), (3,), (3,), (15,), (15,), (16, 5), (18,),
              (18,), (0, 3), (18, 0), (19,)]
# species balance: dy_s/dt = sum of sign * r_j (1-based reaction numbers, as in the source)
_BALANCE = {
    0: "-1 -10 -14 -23 -24 +2 +3 +9 +11 +12 +22 +25", 1: "-2 -3 -9 -12 +1 +21",
    2: "-15 +1 +17 +19 +22", 3: "-2 -16 -17 -23 +15", 4: "-3 +4 +4 +6 +7 +13 +20",
    5: "-6 -8 -14 -20 +3 +18 +18", 6: "-4 -5 -6 +13", 7: "+4 +5 +6 +7", 8: "-7 -8",
    9: "-12 +7 +9", 10: "-9 -10 +8 +11", 11: "+9", 12: "-11 +10", 13: "-13 +12",
    14: "+14", 15: "-18 -19 +16", 16: "-20", 17: "+20", 18: "-21 -22 -24 +23 +25",
    19: "-25 +24",
}


def pollu(t, y):
    k = _K
    r1 = k[0] * y[0]
    r2 = k[1] * y[1] * y[3]
    r3 = k[2] * y[4] * y[1]
    r4 = k[3] * y[6]
    r5 = k[4] * y[6]
    r6 = k[5] * y[6] * y[5]
    r7 = k[6] * y[8]
    r8 = k[7] * y[8] * y[5]
    r9 = k[8] * y[10] * y[1]
    r10 = k[9] * y[10] * y[0]
    r11 = k[10] * y[12]
    r12 = k[11] * y[9] * y[1]
    r13 = k[12] * y[13]
    r14 = k[13] * y[0] * y[5]
    r15 = k[14] * y[2]
    r16 = k[15] * y[3]
    r17 = k[16] * y[3]
    r18 = k[17] * y[15]
    r19 = k[18] * y[15]
    r20 = k[19] * y[16] * y[5]
    r21 = k[20] * y[18]
    r22 = k[21] * y[18]
    r23 = k[22] * y[0] * y[3]
    r24 = k[23] * y[18] * y[0]
    r25 = k[24] * y[19]
    dy = np.zeros(20)
    dy[0] = -r1 - r10 - r14 - r23 - r24 + r2 + r3 + r9 + r11 + r12 + r22 + r25
    dy[1] = -r2 - r3 - r9 - r12 + r1 + r21
    dy[2] = -r15 + r1 + r17 + r19 + r22
    dy[3] = -r2 - r16 - r17 - r23 + r15
    dy[4] = -r3 + r4 + r4 + r6 + r7 + r13 + r20
    dy[5] = -r6 - r8 - r14 - r20 + r3 + r18 + r18
    dy[6] = -r4 - r5 - r6 + r13
    dy[7] = r4 + r5 + r6 + r7
    dy[8] = -r7 - r8
    dy[9] = -r12 + r7 + r9
    dy[10] = -r9 - r10 + r8 + r11
    dy[11] = r9
    dy[12] = -r11 + r10
    dy[13] = -r13 + r12
    dy[14] = r14
    dy[15] = -r18 - r19 + r16
    dy[16] = -r20
    dy[17] = r20
    dy[18] = -r21 - r22 - r24 + r23 + r25
    dy[19] = -r25 + r24
    return dy


def _stoichiometry() -> np.ndarray:
    s = np.zeros((20, 25))
    for species, terms in _BALANCE.items():
        for term in terms.split():
            s[species, abs(int(term)) - 1] += 1.0 if term[0] == "+" else -1.0
    return s


_STOICH = _stoichiometry()


def pollu_xp(xp):
    s = _STOICH

    def f(t, y):
        rates = xp.stack([_K[j] * (y[r[0]] if len(r) == 1 else y[r[0]] * y[r[1]])
                          for j, r in enumerate(_REACTANTS)])
        return xp.asarray(s) @ rates
    return f


def pollu_jac(t, y):
    """Mass action by hand: J = S @ dr/dy, dr_j/dy_a = k_j * (the other reactant)."""
    drdy = np.zeros((25, 20))
    for j, r in enumerate(_REACTANTS):
        if len(r) == 1:
            drdy[j, r[0]] += _K[j]
        else:
            drdy[j, r[0]] += _K[j] * y[r[1]]
            drdy[j, r[1]] += _K[j] * y[r[0]]
    return _STOICH @ drdy


# -- E5, a chemical pyrolysis (Bari "E5", Enright, Hull & Lindberg 1975) ----------------------

_A, _B, _C, _M = 7.89e-10, 1.1e7, 1.13e3, 1.0e6


def e5(t, y):
    prod1 = _A * y[0]
    prod2 = _B * y[0] * y[2]
    prod3 = _M * _C * y[1] * y[2]
    prod4 = _C * y[3]
    f = np.empty(4)
    f[0] = -prod1 - prod2
    f[1] = prod1 - prod3
    f[3] = prod2 - prod4
    f[2] = f[1] - f[3]
    return f


def e5_xp(xp):
    def f(t, y):
        prod1, prod2 = _A * y[0], _B * y[0] * y[2]
        prod3, prod4 = _M * _C * y[1] * y[2], _C * y[3]
        f1, f3 = prod1 - prod3, prod2 - prod4
        return xp.stack([-prod1 - prod2, f1, f1 - f3, f3])
    return f


def e5_jac(t, y):
    j = np.zeros((4, 4))
    j[0, 0] = -_A - _B * y[2]
    j[0, 2] = -_B * y[0]
    j[1, 0] = _A
    j[1, 1] = -_M * _C * y[2]
    j[1, 2] = -_M * _C * y[1]
    j[3, 0] = _B * y[2]
    j[3, 2] = _B * y[0]
    j[3, 3] = -_C
    j[2] = j[1] - j[3]
    return j


# -- Van der Pol, mu = 1e3 (Hairer & Wanner II, IV.1, unscaled): y1'' = mu (1 - y1^2) y1' - y1 --

_MU = 1.0e3


def vanderpol(t, y):
    y1, y2 = y
    return np.array([y2, _MU * (1.0 - y1 * y1) * y2 - y1])


def vanderpol_xp(xp):
    def f(t, y):
        return xp.stack([y[1], _MU * (1.0 - y[0] * y[0]) * y[1] - y[0]])
    return f


def vanderpol_jac(t, y):
    y1, y2 = y
    return np.array([[0.0, 1.0], [-2.0 * _MU * y1 * y2 - 1.0, _MU * (1.0 - y1 * y1)]])


# -- 1-D Brusselator, reaction-diffusion (Hairer & Wanner II, IV.1, eq. (1.6')) ---------------
# u' = 1 + u^2 v - 4u + alpha (N+1)^2 (u_{i-1} - 2u_i + u_{i+1}), v' = 3u - u^2 v + ...,
# alpha = 1/50, u = 1, v = 3 at both ends; the unknowns interleaved (u1, v1, u2, v2, ...)
# so the Jacobian is banded, as in the book.

BRUSS1D_N = 100
_ALPHA1 = 1.0 / 50.0


def bruss1d(t, y):
    n = y.shape[0] // 2
    c = _ALPHA1 * (n + 1) ** 2
    u, v = y[0::2], y[1::2]
    f = np.empty(2 * n)
    f[0::2] = 1.0 + u * u * v - 4.0 * u - 2.0 * c * u
    f[1::2] = 3.0 * u - u * u * v - 2.0 * c * v
    f[2::2] += c * u[:-1]           # u_{i-1}
    f[0:-2:2] += c * u[1:]          # u_{i+1}
    f[3::2] += c * v[:-1]
    f[1:-2:2] += c * v[1:]
    f[0] += c * 1.0                 # boundary values u = 1, v = 3
    f[2 * n - 2] += c * 1.0
    f[1] += c * 3.0
    f[2 * n - 1] += c * 3.0
    return f


def bruss1d_xp(xp):
    def f(t, y):
        n = y.shape[0] // 2
        c = _ALPHA1 * (n + 1) ** 2
        u, v = y[0::2], y[1::2]
        one, three = xp.ones(1), 3.0 * xp.ones(1)
        ul, ur = xp.concatenate([one, u[:-1]]), xp.concatenate([u[1:], one])
        vl, vr = xp.concatenate([three, v[:-1]]), xp.concatenate([v[1:], three])
        du = 1.0 + u * u * v - 4.0 * u + c * (ul - 2.0 * u + ur)
        dv = 3.0 * u - u * u * v + c * (vl - 2.0 * v + vr)
        return xp.stack([du, dv], axis=1).reshape(-1)
    return f


def bruss1d_jac(t, y):
    import scipy.sparse as sp

    n = y.shape[0] // 2
    c = _ALPHA1 * (n + 1) ** 2
    u, v = y[0::2], y[1::2]
    iu, iv = np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)
    rows = [iu, iu, iv, iv, iu[1:], iu[:-1], iv[1:], iv[:-1]]
    cols = [iu, iv, iu, iv, iu[:-1], iu[1:], iv[:-1], iv[1:]]
    vals = [2 * u * v - 4.0 - 2 * c, u * u, 3.0 - 2 * u * v, -u * u - 2 * c,
            np.full(n - 1, c), np.full(n - 1, c), np.full(n - 1, c), np.full(n - 1, c)]
    return sp.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                        shape=(2 * n, 2 * n))


def bruss1d_loop(t, y):
    """The same model as an ``@njit`` author writes it: one loop over the grid."""
    n = y.shape[0] // 2
    c = _ALPHA1 * (n + 1) ** 2
    f = np.empty(2 * n)
    for i in range(n):
        u, v = y[2 * i], y[2 * i + 1]
        ul = y[2 * i - 2] if i > 0 else 1.0
        vl = y[2 * i - 1] if i > 0 else 3.0
        ur = y[2 * i + 2] if i < n - 1 else 1.0
        vr = y[2 * i + 3] if i < n - 1 else 3.0
        f[2 * i] = 1.0 + u * u * v - 4.0 * u + c * (ul - 2.0 * u + ur)
        f[2 * i + 1] = 3.0 * u - u * u * v + c * (vl - 2.0 * v + vr)
    return f


def bruss1d_y0(n: int = BRUSS1D_N) -> np.ndarray:
    x = np.arange(1, n + 1) / (n + 1)
    y = np.empty(2 * n)
    y[0::2] = 1.0 + np.sin(2 * np.pi * x)
    y[1::2] = 3.0
    return y


# -- 2-D Brusselator (Hairer & Wanner II, IV.10), periodic N x N grid --------------------------
# u' = 1 + u^2 v - 4.4 u + alpha N^2 lap(u), v' = 3.4 u - u^2 v + alpha N^2 lap(v), alpha = 0.1
# (the book's inhomogeneity, a source switched on at t >= 1.1, is left out).

BRUSS2D_N = 16
_ALPHA2 = 0.1


def bruss2d(t, y):
    n2 = y.shape[0] // 2
    n = int(round(n2 ** 0.5))
    u = y[:n2].reshape(n, n)
    v = y[n2:].reshape(n, n)
    c = _ALPHA2 * n * n
    lap_u = np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1) - 4 * u
    lap_v = np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1) - 4 * v
    uuv = u * u * v
    dydt = np.empty(2 * n2)
    dydt[:n2] = (1.0 + uuv - 4.4 * u + c * lap_u).ravel()
    dydt[n2:] = (3.4 * u - uuv + c * lap_v).ravel()
    return dydt


def bruss2d_xp(xp):
    def f(t, y):
        n2 = y.shape[0] // 2
        n = int(round(n2 ** 0.5))
        u, v = y[:n2].reshape(n, n), y[n2:].reshape(n, n)
        c = _ALPHA2 * n * n

        def lap(a):
            return (xp.roll(a, 1, 0) + xp.roll(a, -1, 0) + xp.roll(a, 1, 1)
                    + xp.roll(a, -1, 1) - 4 * a)
        uuv = u * u * v
        return xp.concatenate([(1.0 + uuv - 4.4 * u + c * lap(u)).ravel(),
                               (3.4 * u - uuv + c * lap(v)).ravel()])
    return f


def bruss2d_jac(t, y):
    import scipy.sparse as sp

    n2 = y.shape[0] // 2
    n = int(round(n2 ** 0.5))
    c = _ALPHA2 * n * n
    u, v = y[:n2], y[n2:]
    one = sp.eye_array(n, format="csr")
    shift = sp.csr_array((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
    ring = shift + shift.T - 2 * one
    lap = c * (sp.kron(ring, one) + sp.kron(one, ring))
    return sp.block_array([[lap + sp.diags_array(2 * u * v - 4.4), sp.diags_array(u * u)],
                           [sp.diags_array(3.4 - 2 * u * v), lap - sp.diags_array(u * u)]],
                          format="csc")


def bruss2d_loop(t, y):
    """The same model as an ``@njit`` author writes it: loops over the grid."""
    n2 = y.shape[0] // 2
    n = int(round(n2 ** 0.5))
    c = _ALPHA2 * n * n
    dydt = np.empty(2 * n2)
    for i in range(n):
        for j in range(n):
            k = i * n + j
            up, down = ((i - 1) % n) * n + j, ((i + 1) % n) * n + j
            left, right = i * n + (j - 1) % n, i * n + (j + 1) % n
            u, v = y[k], y[n2 + k]
            lap_u = y[up] + y[down] + y[left] + y[right] - 4.0 * u
            lap_v = y[n2 + up] + y[n2 + down] + y[n2 + left] + y[n2 + right] - 4.0 * v
            uuv = u * u * v
            dydt[k] = 1.0 + uuv - 4.4 * u + c * lap_u
            dydt[n2 + k] = 3.4 * u - uuv + c * lap_v
    return dydt


def bruss2d_y0(n: int = BRUSS2D_N) -> np.ndarray:
    x = np.arange(n) / n
    xx, yy = np.meshgrid(x, x, indexing="ij")
    u = 22.0 * yy * (1.0 - yy) ** 1.5
    v = 27.0 * xx * (1.0 - xx) ** 1.5
    return np.concatenate([u.ravel(), v.ravel()])


# -- the set ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Problem:
    """One stiff problem: the package-style right-hand side, its jnp form, its hand-written
    Jacobian, initial value, time span and the tolerances of the benchmark's solves."""

    name: str
    rhs: Callable[..., Any]
    rhs_xp: Callable[[Any], Callable[..., Any]]
    jac: Callable[..., Any]
    y0: np.ndarray
    t_span: tuple[float, float]
    rtol: float = 1e-6
    atol: float = 1e-10
    sparse: bool = False
    style: str = ""
    loop_rhs: Callable[..., Any] | None = None  # the model as an @njit loop, if rhs is not

    @property
    def njit_source(self) -> Callable[..., Any]:
        """The plain function that ``numba.njit`` compiles for the compiled rows."""
        return self.rhs if self.loop_rhs is None else self.loop_rhs

    @property
    def n(self) -> int:
        return int(self.y0.size)


PROBLEMS = [
    Problem("Robertson", robertson, robertson_xp, robertson_jac, np.array([1.0, 0.0, 0.0]),
            (0.0, 40.0), atol=1e-10, style="tuple unpacking, np.array([...]) of scalars"),
    Problem("OREGO", orego, orego_xp, orego_jac, np.array([1.0, 2.0, 3.0]), (0.0, 360.0),
            atol=1e-8, style="tuple unpacking, np.empty(3) filled entry by entry"),
    Problem("HIRES", hires, hires_xp, hires_jac,
            np.array([1.0, 0, 0, 0, 0, 0, 0, 0.0057]), (0.0, 321.8122), atol=1e-10,
            style="np.zeros(8) filled entry by entry"),
    Problem("POLLU", pollu, pollu_xp, pollu_jac,
            np.array([0, 0.2, 0, 0.04, 0, 0, 0.1, 0.3, 0.01, 0, 0, 0, 0, 0, 0, 0, 0.007, 0,
                      0, 0.0]), (0.0, 60.0), atol=1e-10,
            style="25 rates, np.zeros(20) filled entry by entry"),
    Problem("E5", e5, e5_xp, e5_jac, np.array([1.76e-3, 0.0, 0.0, 0.0]), (0.0, 1.0e5),
            rtol=1e-6, atol=1e-20, style="np.empty(4), an entry read back"),
    Problem("Van der Pol (mu = 1e3)", vanderpol, vanderpol_xp, vanderpol_jac,
            np.array([2.0, 0.0]), (0.0, 2000.0), atol=1e-8,
            style="tuple unpacking, np.array([...]) of scalars"),
    Problem(f"Brusselator 1-D ({2 * BRUSS1D_N} states)", bruss1d, bruss1d_xp, bruss1d_jac,
            bruss1d_y0(), (0.0, 10.0), atol=1e-8, sparse=True,
            style="np.empty with strided writes (f[0::2] = ...) and += on strides",
            loop_rhs=bruss1d_loop),
    Problem(f"Brusselator 2-D ({2 * BRUSS2D_N ** 2} states)", bruss2d, bruss2d_xp,
            bruss2d_jac, bruss2d_y0(), (0.0, 1.5), atol=1e-8, sparse=True,
            style="np.empty filled by two slice writes", loop_rhs=bruss2d_loop),
]
