"""Sparsity detection follows numpy's aliasing: writes into an array reach its views, and
writes through a view reach the array (buffers from np.zeros / np.zeros_like, computed
values, in-place operators). The detected pattern holds every nonzero of the Jacobian, and
sparse_jacobian agrees with the dense one."""

import numpy as np
import pytest
from alias_programs import (
    ALIAS_PROGRAMS,
    POINTS,
    alias_then_in_place,
    split_pieces_then_in_place,
    view_then_in_place,
)

import dualad as ad


def buffer_views(x):
    out = np.zeros(4)
    head, tail = out[:2], out[2:]
    head[:] = x[:2] * x[2]
    tail[0] = x[0]
    tail[1] = head[0] + 1.0
    return out


def zeros_like_view(x):
    out = np.zeros_like(x)
    head = out[1:3]
    head[:] = x[:2] * x[3]
    return out


def transpose_of_buffer(x):
    m = np.zeros((2, 2))
    t = m.T
    t[0, 1] = x[0] * x[3]
    m[1, 1] = t[1, 0] + x[2]
    return m.ravel()


def view_of_view_of_buffer(x):
    out = np.zeros(4)
    v = out[1:]
    w = v[::2]
    w[:] = x[:2] ** 2
    return out + v[0]


def view_then_buffer_write(x):
    out = np.zeros(4)
    v = out[2:]
    out[:] = x[::-1] * x[0]
    return np.concatenate([v, v])


PROGRAMS = [buffer_views, zeros_like_view, transpose_of_buffer, view_of_view_of_buffer,
            view_then_buffer_write, view_then_in_place, alias_then_in_place, *ALIAS_PROGRAMS]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_detected_pattern_holds_every_nonzero(f):
    for x in POINTS:
        dense = ad.jacobian(f, mode="reverse")(x).reshape(-1, x.size)
        pattern = ad.jacobian_sparsity(f)(x).toarray()
        missed = (dense != 0) & ~pattern
        assert not missed.any(), f"entries outside the detected pattern: {np.argwhere(missed)}"
        np.testing.assert_allclose(ad.sparse_jacobian(f)(x).toarray(), dense, rtol=1e-12,
                                   atol=1e-14)


def test_the_pattern_of_a_write_through_a_view_is_exact():
    pattern = ad.jacobian_sparsity(buffer_views)(POINTS[0]).toarray().astype(int)
    np.testing.assert_array_equal(pattern, [[1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 0],
                                            [1, 0, 1, 0]])


def test_pattern_of_split_pieces_written_later():
    f = split_pieces_then_in_place
    for x in POINTS:
        dense = ad.jacobian(f, mode="reverse")(x)
        pattern = ad.jacobian_sparsity(f)(x).toarray()
        assert not ((dense != 0) & ~pattern).any()
        np.testing.assert_allclose(ad.sparse_jacobian(f)(x).toarray(), dense, rtol=1e-12)
