"""Programs that write in place into computed values seen through other names and views
(numpy's aliasing), shared by the reverse-mode, tape and sparsity tests."""

import numpy as np

X = np.array([0.3, -1.2, 2.1, 0.7])
POINTS = [X, np.array([0.3, 1.2, -2.1, 0.7]), np.array([-0.5, -1.1, -0.4, 1.7])]


# the two programs that were silently wrong


def view_then_in_place(x):
    y = x * 1.0
    view = y[1:]
    y += x * x
    return view * 1.0


def alias_then_in_place(x):
    y = x * 2.0
    alias = y
    y += 1.0
    return alias * x


# -- more aliasing forms --------------------------------------------------------------------


def view_of_view(x):
    y = np.sin(x)
    v = y[1:]
    w = v[::2]
    y *= x
    return np.concatenate([w, v])


def reshape_view(x):
    y = x * x
    m = y.reshape(2, 2)
    t = m.T
    y -= x
    return t @ m


def ravel_and_transpose(x):
    m = np.outer(x, x[:2])
    flat = m.ravel()
    t = m.T
    m /= 2.0 + x[:, None] ** 2
    return np.concatenate([flat, t.reshape(-1)])


def write_through_view(x):
    y = x * 3.0
    v = y[1:]
    v += x[:3] ** 2
    return y


def write_through_view_of_view(x):
    y = np.exp(x)
    v = y[1:]
    w = v[1:]
    w *= x[:2]
    return np.concatenate([y, v])


def views_then_item_write(x):
    y = x * 1.0
    v = y[1:]
    y[0] = x[3] ** 2
    y[2] = v[0] * x[0]
    return np.concatenate([y, v])


def item_write_into_computed(x):
    y = np.cos(x)
    y[1:3] = x[:2] * x[2:]
    return y


def several_writes_with_reads_between(x):
    y = x * 1.0
    a = y
    s0 = np.sum(y)
    y += x ** 2
    s1 = np.sum(a)
    a *= x
    return np.stack([s0, s1, np.sum(y * a)])


def consumer_before_and_after(x):
    y = x * 2.0
    before = y * y
    view = y[:2]
    y += 1.0
    return np.concatenate([before, view, y])


def in_place_on_a_list_item(x):
    ys = [x * 1.0, x * 2.0]
    first = ys[0]
    ys[0] += x * x
    return first + ys[1]


def alias_in_a_loop(x):
    acc = x * 0.0
    history = []
    for i in range(3):
        history.append(acc)
        acc += x ** (i + 1)
    return np.stack(history)


def matrix_row_view(x):
    m = np.outer(x, x)
    row = m[1]
    m *= 0.5
    m[2] = row * x
    return m.ravel()


def in_place_power_and_division(x):
    y = x * 1.0 + 3.0
    alias = y
    y **= 2
    y /= x ** 2 + 1.0
    return alias


def other_is_a_view_of_the_target(x):
    y = x * 1.0
    y += y[::-1]
    return y


def writable_copy_then_views(x):
    y = np.copy(x * 1.0)
    v = y[1:]
    a = y
    y += x * x
    a *= 2.0
    return np.concatenate([v, a])


def scalar_in_place_rebinds(x):
    s = x[0] * 1.0  # a numpy scalar: immutable, += rebinds in numpy
    t = s
    s += x[1]
    return np.stack([s, t])


def ufunc_out_into_computed(x):
    y = x * 1.0
    v = y[1:]
    z = np.add(y, x * x, out=y)
    return np.concatenate([v, z, y])


def ufunc_out_into_buffer_with_alias(x):
    y = np.zeros_like(x)
    a = y
    np.multiply(x, x[::-1], out=y)
    np.sin(y, out=y)
    return a * x


def ufunc_out_into_view(x):
    y = np.exp(x)
    np.multiply(y[:2], x[2:], out=y[:2])  # a fresh view: the write reaches y
    return y


def real_part_is_the_array(x):
    y = x * 1.0
    r = y.real  # a real array's .real is the array itself
    y *= 3.0
    return r * x


def alias_in_a_dict_and_a_closure(x):
    y = x * 1.0
    d = {"y": y}
    get = lambda: y  # noqa: E731
    y += x * x
    return d["y"] + get() * x


def broadcast_and_squeeze_views(x):
    y = (x * 1.0)[None]
    b = np.broadcast_to(y, (2, 4))
    s = np.squeeze(y)
    y += x
    return np.concatenate([b.ravel(), s])


ALIAS_PROGRAMS = [real_part_is_the_array, alias_in_a_dict_and_a_closure,
                  broadcast_and_squeeze_views, ufunc_out_into_computed, ufunc_out_into_buffer_with_alias,
                  ufunc_out_into_view, view_of_view, reshape_view, ravel_and_transpose, write_through_view,
                  write_through_view_of_view, views_then_item_write, item_write_into_computed,
                  several_writes_with_reads_between, consumer_before_and_after,
                  in_place_on_a_list_item, alias_in_a_loop, matrix_row_view,
                  in_place_power_and_division, other_is_a_view_of_the_target,
                  writable_copy_then_views, scalar_in_place_rebinds]


def split_pieces_then_in_place(x):
    y = x * 1.0
    a, b = np.split(y, 2)
    y += x * x
    return np.concatenate([b, a])


def alias_step(which, a, b, margin=None):
    """Step ``which`` of the differential guards: in-place writes into computed values seen
    through other names and views (numpy's aliasing); ``margin(values, threshold)`` is told
    how near a mask's threshold the values are."""
    if which == "view":
        y = a * 1.0
        v = y[1:]
        y += b * b
        return np.concatenate([v, y[:1]])
    if which == "name":
        y = a * 2.0
        other = y
        y *= b
        return other + a
    if which == "reshape_transpose":
        y = a * b
        mat = y.reshape(2, 2)
        t = mat.T
        y -= np.sin(a)
        return t.reshape(-1) + mat.ravel()
    if which == "view_of_view":
        y = np.tanh(a)
        v = y[::2]
        w = v[1:]
        w *= b[:1]
        return y + np.concatenate([v, v])
    if which == "write_through_view":
        y = a + b
        v = y[1:3]
        v += b[:2] * a[:2]
        return y
    if which == "item_writes":
        y = a * b
        v = y[::2]
        y[1] = a[0] ** 2
        y[2] = v[0] * b[3]
        return y + np.concatenate([v, v])
    if which == "ufunc_out":
        y = a * 1.0
        v = y[:2]
        np.multiply(y, b, out=y)
        return y + np.concatenate([v, v])
    # a masked in-place update of a value another name refers to
    t = 0.21
    if margin is not None:
        margin(a, t)
    y = b * 1.0
    other = y
    y[a > t] += a[a > t] ** 2
    return other * a


ALIAS_FORMS = ["view", "name", "reshape_transpose", "view_of_view", "write_through_view",
               "item_writes", "ufunc_out", "masked"]
