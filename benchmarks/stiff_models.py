"""Small stiff ODE right-hand sides from the IVP test set (Hairer & Wanner; Mazzia &
Magherini), written the way users write them (``np.array([...])`` of expressions, or
``np.zeros_like(y)`` filled by index), each with its hand-written Jacobian.

``xp`` is the array module (numpy, or jax.numpy for the jax rows); ``MODELS`` lists
``(name, f(t, y, xp=np), jacobian(t, y), y0)``.
"""

from __future__ import annotations

import numpy as np


def robertson(t, y, xp=np):
    r1 = 0.04 * y[0]
    r2 = 1e4 * y[1] * y[2]
    r3 = 3e7 * y[1] * y[1]
    return xp.array([r2 - r1, r1 - r2 - r3, r3])


def robertson_jac(t, y):
    return np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])


MU = 1000.0


def van_der_pol(t, y, xp=np):
    if xp is not np:  # jax arrays are immutable: the same expressions, stacked
        return xp.array([y[1], MU * ((1 - y[0] ** 2) * y[1]) - y[0]])
    dy = np.zeros_like(y)
    dy[0] = y[1]
    dy[1] = MU * ((1 - y[0] ** 2) * y[1]) - y[0]
    return dy


def van_der_pol_jac(t, y):
    return np.array([[0.0, 1.0],
                     [-2.0 * MU * y[0] * y[1] - 1.0, MU * (1.0 - y[0] ** 2)]])


def orego(t, y, xp=np):
    y1, y2, y3 = y[0], y[1], y[2]
    return xp.array([77.27 * (y2 + y1 * (1 - 8.375e-6 * y1 - y2)),
                     (y3 - (1 + y1) * y2) / 77.27,
                     0.161 * (y1 - y3)])


def orego_jac(t, y):
    y1, y2 = y[0], y[1]
    return np.array([[77.27 * (1 - 2 * 8.375e-6 * y1 - y2), 77.27 * (1 - y1), 0.0],
                     [-y2 / 77.27, -(1 + y1) / 77.27, 1 / 77.27],
                     [0.161, 0.0, -0.161]])


def hires(t, y, xp=np):
    return xp.array([
        -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
        1.71 * y[0] - 8.75 * y[1],
        -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
        8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
        -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
        -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
        280.0 * y[5] * y[7] - 1.81 * y[6],
        -280.0 * y[5] * y[7] + 1.81 * y[6],
    ])


def hires_jac(t, y):
    J = np.zeros((8, 8))
    J[0, 0], J[0, 1], J[0, 2] = -1.71, 0.43, 8.32
    J[1, 0], J[1, 1] = 1.71, -8.75
    J[2, 2], J[2, 3], J[2, 4] = -10.03, 0.43, 0.035
    J[3, 1], J[3, 2], J[3, 3] = 8.32, 1.71, -1.12
    J[4, 4], J[4, 5], J[4, 6] = -1.745, 0.43, 0.43
    J[5, 3], J[5, 4], J[5, 5], J[5, 6], J[5, 7] = \
        0.69, 1.71, -0.43 - 280.0 * y[7], 0.69, -280.0 * y[5]
    J[6, 5], J[6, 6], J[6, 7] = 280.0 * y[7], -1.81, 280.0 * y[5]
    J[7, 5], J[7, 6], J[7, 7] = -280.0 * y[7], 1.81, -280.0 * y[5]
    return J


K = [0.35, 26.6, 1.23e4, 8.6e-4, 8.2e-4, 1.5e4, 1.3e-4, 2.4e4, 1.65e4, 9.0e3, 0.022,
     1.2e4, 1.88, 1.63e4, 4.8e6, 3.5e-4, 0.0175, 1.0e8, 4.44e11, 1240.0, 2.1, 5.78,
     0.0474, 1780.0, 3.12]


def pollu(t, y, xp=np):
    k = K
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
    return xp.array([
        -r1 - r10 - r14 - r23 - r24 + r2 + r3 + r9 + r11 + r12 + r22 + r25,
        -r2 - r3 - r9 - r12 + r1 + r21,
        -r15 + r1 + r17 + r19 + r22,
        -r2 - r16 - r17 - r23 + r15,
        -r3 + r4 + r4 + r6 + r7 + r13 + r20,
        -r6 - r8 - r14 - r20 + r3 + r18 + r18,
        -r4 - r5 - r6 + r13,
        r4 + r5 + r6 + r7,
        -r7 - r8,
        -r12 + r7 + r9,
        -r9 - r10 + r8 + r11,
        r9,
        -r11 + r10,
        -r13 + r12,
        r14,
        -r18 - r19 + r16,
        -r20,
        r20,
        -r21 - r22 - r24 + r23 + r25,
        -r25 + r24,
    ])


# the stoichiometry of POLLU's 25 reactions (rows: species, columns: reactions)
_S = np.zeros((20, 25))
for _species, _terms in enumerate([
        "-1 -10 -14 -23 -24 +2 +3 +9 +11 +12 +22 +25", "-2 -3 -9 -12 +1 +21",
        "-15 +1 +17 +19 +22", "-2 -16 -17 -23 +15", "-3 +4 +4 +6 +7 +13 +20",
        "-6 -8 -14 -20 +3 +18 +18", "-4 -5 -6 +13", "+4 +5 +6 +7", "-7 -8", "-12 +7 +9",
        "-9 -10 +8 +11", "+9", "-11 +10", "-13 +12", "+14", "-18 -19 +16", "-20", "+20",
        "-21 -22 -24 +23 +25", "-25 +24"]):
    for _term in _terms.split():
        _S[_species, abs(int(_term)) - 1] += 1.0 if _term[0] == "+" else -1.0
# reaction j: rate K[j] * y[a] (* y[b]); (a, b) per reaction, b = -1 for first order
_PAIRS = np.array([(0, -1), (1, 3), (4, 1), (6, -1), (6, -1), (6, 5), (8, -1), (8, 5),
                   (10, 1), (10, 0), (12, -1), (9, 1), (13, -1), (0, 5), (2, -1), (3, -1),
                   (3, -1), (15, -1), (15, -1), (16, 5), (18, -1), (18, -1), (0, 3),
                   (18, 0), (19, -1)])
_KA = np.array(K)
_SECOND = _PAIRS[:, 1] >= 0
_J2 = np.flatnonzero(_SECOND)


def pollu_jac(t, y):
    """dr/dy (25 x 20) by index, then the stoichiometry times it."""
    a, b = _PAIRS[:, 0], _PAIRS[:, 1]
    dr = np.zeros((25, 20))
    first = np.where(_SECOND, _KA * y[np.maximum(b, 0)], _KA)
    dr[np.arange(25), a] = first
    dr[_J2, b[_J2]] += _KA[_J2] * y[a[_J2]]
    return _S @ dr


MODELS = [
    ("Robertson", robertson, robertson_jac, np.array([1.0, 2e-5, 3e-2])),
    ("Van der Pol", van_der_pol, van_der_pol_jac, np.array([2.0, -0.66])),
    ("OREGO", orego, orego_jac, np.array([1.0, 2.0, 3.0])),
    ("HIRES", hires, hires_jac,
     np.array([1.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.0057])),
    ("POLLU", pollu, pollu_jac, np.linspace(0.01, 0.2, 20)),
]
