"""Forward-mode transforms: jvp, derivative, and the chunked forward Jacobian.

The differentiated arguments become :class:`~dualad.forward_mode.dual.Dual` numbers of a fresh tag,
seeded with ``k`` directions at once (a *chunk*); one evaluation of ``f`` then gives ``k``
columns of the Jacobian. The chunk is chosen from measurement (:func:`choose_chunk`): all
``n`` inputs in one pass while the seed partials (``n * k`` float64) fit in
:data:`CHUNK_BUDGET` bytes, otherwise the fewest equal chunks that fit.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.jacobian(lambda x: np.sin(x) * x[0], mode="forward")(np.array([1.0, 2.0]))
    array([[ 1.38177329,  0.        ],
           [ 0.90929743, -0.41614684]])
    >>> float(ad.derivative(lambda x: x ** 3)(2.0))
    12.0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import njit as _njit
from ..core.allocations import allocation_policy
from ..core.arguments import (
    AuxOutput,
    as_differentiable,
    as_dtype,
    check_output,
    derivative_dtype,
    guard_opaque_calls,
    to_user,
)
from ..core.arguments import value as plain_value
from ..core.array_protocol import lift_object_array, shape_of
from ..core.errors import ShapeError
from ..core.tracing import Traced
from ..core.trees import is_container, tree_flatten, tree_unflatten
from .dual import Dual, Tag, new_dual
from .rows import stack_rows

__all__ = ["jvp", "derivative", "jacobian_forward", "choose_chunk", "CHUNK_BUDGET"]

_ONE = np.float64(1.0)

#: Bytes of seed partials (``n`` inputs x ``k`` directions x 8) one pass may use: 8 MiB,
#: so up to 1024 inputs go in one pass. Every pass runs ``f`` (and its Python overhead)
#: again: that costs about n/k times more on loops and small arrays, while smaller chunks
#: win at most a few times on large vectorised functions (their partials stay in cache).
#: Measured (one thread, 2-core AMD EPYC with 512 KiB L2 per core, shared and loaded; ms
#: per Jacobian): Lorenz-96 (np.roll form) n = 100: k = 12 1.2, k = 100 0.23; n = 1000:
#: k = 12 17, k = 50 8.5, k = 250 22, k = 1000 20; the 1-D Brusselator written as a Python
#: loop (400 states): k = 12 1194, k = 100 189, k = 400 56. ``chunk=`` overrides.
CHUNK_BUDGET = 8 << 20


def choose_chunk(n: int, chunk: int | None = None, *, budget: int | None = None) -> int:
    """Directions per pass for ``n`` inputs: ``chunk`` if given, else all ``n`` while the seed
    partials (``n * k * 8`` bytes) fit in ``budget`` (default :data:`CHUNK_BUDGET`), else the
    fewest equal chunks that fit.

    Example:
        >>> choose_chunk(10), choose_chunk(1000), choose_chunk(2000), choose_chunk(100, 7)
        (10, 1000, 500, 7)
    """
    if n <= 0:
        return 1
    if chunk is not None:
        return max(1, min(int(chunk), n))
    budget = CHUNK_BUDGET if budget is None else int(budget)
    widest = max(1, budget // (8 * n))
    if n <= widest:
        return n
    passes = -(-n // widest)
    return -(-n // passes)


def _prepare(leaf: Any, what: str, complex_ok: bool = False) -> Any:
    """A differentiated leaf as the value of a Dual: float64, 0-d as ``np.float64``
    (complex128 where ``complex_ok``: jvp with complex tangents)."""
    x = as_differentiable(leaf, what)
    if isinstance(x, np.ndarray) and x.dtype.kind == "c":
        if not complex_ok:
            raise TypeError(
                f"dualad: the {what} is complex ({x.dtype}, shape {x.shape}); forward-mode "
                f"Jacobians take real inputs. Use mode='reverse' or ad.jvp with complex "
                f"tangents, or split it into real and imaginary parts (x.real, x.imag)."
            )
        return x[()] if x.ndim == 0 else x.copy()
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return np.float64(x)
        return x.copy()
    return x


def _seed_value(value: Any, seed: np.ndarray, tag: Tag) -> Dual:
    if type(value) is np.float64 and seed.shape == (1,):
        return Dual._scalar(value, np.float64(seed[0]), tag)
    return Dual._make(value, seed, tag)


def _lift(out: Any, tag: Tag) -> Any:
    """``out`` with an object array of traced values (``np.array([a, b])``) made one traced
    array: directly for scalars of ``tag`` with a few directions (rows) and numbers."""
    if type(out) is np.ndarray and out.dtype.kind == "O" and out.size:
        stacked = stack_rows(out.tolist() if out.ndim == 1 else out.ravel().tolist(), tag)
        if stacked is not None:
            if out.ndim != 1:
                stacked = new_dual(stacked.value.reshape(out.shape),
                                   stacked.partials.reshape(out.shape + (stacked.k,)), tag)
            return stacked
    return lift_object_array(out)


def _out_parts(o: Any, tag: Tag) -> tuple[Any, Any]:
    """``(value, partials or None)`` of an output leaf at ``tag``."""
    if isinstance(o, Dual) and o.tag is tag:
        return o.value, o.partials
    return o, None


def _result_leaf(x: Any) -> Any:
    if isinstance(x, (Traced, np.ndarray)):
        return x
    return to_user(x)


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], *,
        has_aux: bool = False,
        allocations: str = "promote") -> tuple[Any, ...]:
    """``(f(*primals), J @ tangents)`` in one forward pass.

    ``primals`` and ``tangents`` are tuples (or lists) of the same tree structure; each
    tangent is shaped like its primal. With ``has_aux=True``, ``f`` returns
    ``(output, aux)`` and ``jvp`` returns ``(output, tangent, aux)``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.jvp(lambda x, y: x * y, (2.0, 3.0), (1.0, 0.0))
        (array(6.), array(3.))
    """
    f = allocation_policy(f, allocations, "jvp")
    if _njit.is_njit(f) and not has_aux:  # a numba.njit function: compiled dual numbers
        return _njit.jvp(f, primals, tangents)
    fname = f"jvp({getattr(f, '__name__', 'f')})"
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            f"{fname}: primals and tangents must be tuples, e.g. jvp(f, (x,), (v,)); got "
            f"{type(primals).__name__} and {type(tangents).__name__}."
        )
    if len(primals) != len(tangents):
        raise ValueError(
            f"{fname}: {len(primals)} primal(s) but {len(tangents)} tangent(s); pass one "
            f"tangent per primal."
        )
    call = AuxOutput(guard_opaque_calls(f, fname), fname) if has_aux else \
        guard_opaque_calls(f, fname)
    tag = Tag()
    args = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_spec = tree_flatten(p)
        t_leaves, _ = tree_flatten(t)
        if len(p_leaves) != len(t_leaves):
            raise ValueError(
                f"{fname}: primal {i} has {len(p_leaves)} leaves but its tangent has "
                f"{len(t_leaves)}; give tangents the primals' structure."
            )
        duals = []
        for pv, tv in zip(p_leaves, t_leaves):
            value = _prepare(pv, f"primal {i} of {fname}", complex_ok=True)
            if not isinstance(tv, Traced):
                tv = np.asarray(tv)
                # the dtype of a traced primal, read without recording a value of it
                real_primal = not np.iscomplexobj(plain_value(value))
                if tv.dtype.kind == "c" and real_primal:
                    raise TypeError(
                        f"{fname}: a tangent of primal {i} is complex but the primal is "
                        f"real; pass a complex primal (x.astype(complex)) for complex "
                        f"directions."
                    )
                tv = tv.astype(np.float64 if real_primal else np.complex128)
            if shape_of(tv) != shape_of(value):
                raise ShapeError(
                    f"{fname}: a tangent of primal {i} has shape {shape_of(tv)} but the "
                    f"primal has shape {shape_of(value)}; tangents are shaped like primals."
                )
            if type(value) is np.float64 and isinstance(tv, np.ndarray):
                duals.append(Dual._scalar(value, np.float64(tv), tag))
            else:
                duals.append(Dual._make(value, np.reshape(tv, shape_of(tv) + (1,)), tag))
        args.append(tree_unflatten(p_spec, duals))
    out = call(*args)
    check_output(out, fname)
    leaves, spec = tree_flatten(out)
    values, tans = [], []
    for o in leaves:
        o = _lift(o, tag)
        v, p = _out_parts(o, tag)
        v = _result_leaf(v)
        values.append(v)
        if p is None:
            t = np.zeros(shape_of(v))
        elif isinstance(o, Dual) and o._p is None:
            t = to_user(o._d)
        else:
            t = _result_leaf(p[..., 0])
        tans.append(as_dtype(t, derivative_dtype(v)))  # a float32 output: float32 tangent
    if has_aux:
        return tree_unflatten(spec, values), tree_unflatten(spec, tans), call.aux()
    return tree_unflatten(spec, values), tree_unflatten(spec, tans)


def derivative(f: Callable[..., Any], *,
               allocations: str = "promote") -> Callable[..., Any]:
    """``df/dx`` for a scalar input ``x`` (the first argument), shaped like the output.

    For an array ``x`` and an elementwise ``f`` (output shaped like ``x``), the derivative
    of each output entry w.r.t. its own input entry, as autograd's ``elementwise_grad``:
    one forward pass with a tangent of ones, ``J @ 1`` (for a function that mixes entries
    this is the sum of each Jacobian row, not a derivative: use ``ad.jacobian``). Further
    arguments pass through undifferentiated.

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.derivative(lambda x: np.array([x, x ** 2]))(3.0)
        array([1., 6.])
        >>> ad.derivative(np.tanh)(np.array([0.0, 1.0]))   # 1 - tanh(x) ** 2
        array([1.        , 0.41997434])
    """
    f = allocation_policy(f, allocations, "derivative")
    if _njit.is_njit(f):  # a numba.njit function: compiled dual numbers
        return _njit.derivative(f)
    fname = f"derivative({getattr(f, '__name__', 'f')})"
    call = guard_opaque_calls(f, fname)

    @functools.wraps(f)
    def wrapped(x: Any, *args: Any, **kwargs: Any) -> Any:
        if type(x) is float or type(x) is np.float64:
            value = np.float64(x)
        else:
            value = _prepare(x, f"the argument of {fname}")
        tag = Tag()
        if type(value) is np.float64:
            dx = new_dual(value, None, tag, _ONE)
        elif shape_of(value) != ():
            dx = Dual._make(value, np.ones(shape_of(value) + (1,)), tag)
            out = call(dx, *args, **kwargs)
            return _elementwise_derivative(out, tag, shape_of(value), fname)
        else:
            dx = Dual._make(value, np.ones(1), tag)
        out = call(dx, *args, **kwargs)
        if type(out) is Dual and out.tag is tag:
            if out._p is None:
                return np.array(out._d, dtype=np.float64)
            return _result_leaf(out.partials[..., 0])
        check_output(out, fname)
        if type(out) is np.ndarray and out.dtype == object:
            out = lift_object_array(out)
        if type(out) is Dual and out.tag is tag:
            if out._p is None:
                return np.array(out._d, dtype=np.float64)
            return _result_leaf(out.partials[..., 0])
        leaves, spec = tree_flatten(out)
        result = []
        for o in leaves:
            v, p = _out_parts(lift_object_array(o), tag)
            if p is None:
                result.append(np.zeros(shape_of(v)))
            elif isinstance(o, Dual) and o._p is None:
                result.append(to_user(o._d))
            else:
                result.append(_result_leaf(p[..., 0]))
        return tree_unflatten(spec, result)

    return wrapped


def _elementwise_derivative(out: Any, tag: Any, in_shape: tuple[int, ...], fname: str) -> Any:
    """The tangent of ``out`` (seeded with ones) for an elementwise function of an array."""
    check_output(out, fname)
    out = lift_object_array(out)
    if isinstance(out, (list, tuple, dict)) or shape_of(out) != in_shape:
        raise ValueError(
            f"{fname}: for an array input (shape {in_shape}) derivative needs an elementwise "
            f"f, whose output has the input's shape (got "
            f"{type(out).__name__ if isinstance(out, (list, tuple, dict)) else shape_of(out)})"
            f"; use ad.jacobian(f) for the whole Jacobian or ad.jvp for a directional "
            f"derivative."
        )
    v, p = _out_parts(out, tag)
    if p is None:
        return np.zeros(in_shape)
    return _result_leaf(p[..., 0])


_LEAF_TYPES = frozenset((np.ndarray, np.float64, float, int))


def _flatten(tree: Any) -> tuple[list[Any], Any]:
    """``tree_flatten``, with a shortcut for a single array or number."""
    if type(tree) in _LEAF_TYPES or isinstance(tree, Traced):
        return [tree], None
    return tree_flatten(tree)


def _unflatten(spec: Any, leaves: list[Any]) -> Any:
    return leaves[0] if spec is None else tree_unflatten(spec, leaves)


class _Seeds:
    """The differentiated leaves of all argnums, numbered as one input vector."""

    __slots__ = ("args", "nums", "specs", "leaves", "offsets", "sizes", "n", "dtypes")

    def __init__(self, args: tuple, nums: tuple[int, ...], fname: str) -> None:
        self.args = list(args)
        self.nums = nums
        self.specs: list[Any] = []
        self.leaves: list[list[Any]] = []
        self.offsets: list[list[int]] = []
        self.sizes: list[list[int]] = []
        self.dtypes: list[list[Any]] = []
        n = 0
        for i in nums:
            leaves, spec = _flatten(args[i])
            self.dtypes.append([derivative_dtype(leaf) for leaf in leaves])
            values = [_prepare(leaf, f"argument {i} of {fname}") for leaf in leaves]
            self.specs.append(spec)
            self.leaves.append(values)
            offs, sizes = [], []
            for v in values:
                size = math.prod(shape_of(v))
                offs.append(n)
                sizes.append(size)
                n += size
            self.offsets.append(offs)
            self.sizes.append(sizes)
        self.n = n

    def arguments(self, start: int, width: int, tag: Tag) -> list[Any]:
        """The call's arguments with leaves seeded for directions ``start .. start+width``."""
        args = list(self.args)
        for a, i in enumerate(self.nums):
            duals = []
            for v, off, size in zip(self.leaves[a], self.offsets[a], self.sizes[a]):
                seed: np.ndarray = np.eye(size, width, k=off - start)
                if type(v) is np.ndarray and v.ndim != 1:
                    seed = seed.reshape(v.shape + (width,))
                elif type(v) is not np.ndarray:
                    seed = seed.reshape(shape_of(v) + (width,))
                duals.append(_seed_value(v, seed, tag))
            args[i] = _unflatten(self.specs[a], duals)
        return args


def jacobian_forward(f: Callable[..., Any], nums: tuple[int, ...], args: tuple, kwargs: dict,
                     chunk: int | None, fname: str) -> list[Any]:
    """Forward-mode Jacobians of ``f`` w.r.t. ``args[i]`` for ``i in nums``.

    Returns one tree per argnum (the argument's structure); each leaf has shape
    ``out.shape + leaf.shape``. An output tree gives, per argnum, the output's structure
    with such a tree at each output leaf.
    """
    if len(nums) == 1:
        x = args[nums[0]]
        if type(x) is np.ndarray and x.dtype == np.float64 and x.ndim:
            return [_jacobian_array(f, nums[0], x, args, kwargs, chunk, fname)]
    return _jacobian_general(f, nums, args, kwargs, chunk, fname)


def _jacobian_general(f: Callable[..., Any], nums: tuple[int, ...], args: tuple, kwargs: dict,
                      chunk: int | None, fname: str) -> list[Any]:
    seeds = _Seeds(args, nums, fname)
    n = seeds.n
    width = choose_chunk(n, chunk)
    blocks: list[list[Any]] = []  # per pass: per output leaf, partials O + (w,)
    widths: list[int] = []
    out_values: list[Any] = []
    out_spec: Any = None
    start = 0
    passes = -(-n // width) if n else 1
    for _ in range(passes):
        w = min(width, n - start)
        tag = Tag()
        out = f(*seeds.arguments(start, w, tag), **kwargs)
        check_output(out, fname)
        leaves, out_spec = _flatten(out)
        parts = [_out_parts(_lift(o, tag), tag) for o in leaves]
        if not out_values:
            out_values = [v for v, _ in parts]
        blocks.append([p for _, p in parts])
        widths.append(w)
        start += w
    results = []
    for a in range(len(nums)):
        per_out = []
        for j, v in enumerate(out_values):
            oshape = shape_of(v)
            full = _assemble([b[j] for b in blocks], widths, oshape, n)
            leaves = []
            for leaf, off, size, dtype in zip(seeds.leaves[a], seeds.offsets[a],
                                              seeds.sizes[a], seeds.dtypes[a]):
                block = full if size == n else full[..., off:off + size]
                leaves.append(as_dtype(_result_leaf(np.reshape(block, oshape + shape_of(leaf))),
                                       dtype))
            per_out.append(_unflatten(seeds.specs[a], leaves))
        results.append(_unflatten(out_spec, per_out))
    return results


_EYES: dict[int, np.ndarray] = {}


def _seed_block(n: int, start: int, width: int) -> np.ndarray:
    """Fresh ``(n, width)`` seeds: ones at ``(start + j, j)``."""
    if start == 0 and width == n:
        eye = _EYES.get(n)
        if eye is None:
            eye = np.eye(n)
            if n > 64:
                return eye
            _EYES[n] = eye
        return eye.copy()  # never the cached one: user code may write into its inputs
    seed = np.zeros((n, width))
    seed.reshape(-1)[start * width::width + 1][:width] = 1.0
    return seed


#: Inputs up to this size take :func:`_jacobian_one_pass` (their seeds are cached).
_SMALL = 64


def _jacobian_one_pass(f: Callable[..., Any], i: int, x: np.ndarray, args: tuple,
                       kwargs: dict, chunk: int | None, fname: str) -> Any:
    """The forward Jacobian w.r.t. a small float64 vector ``x`` (``n <= _SMALL``): one pass
    seeded by a copy of a cached identity, the output's partials handed back as they are."""
    n = x.shape[0]
    eye = _EYES.get(n)
    if eye is None:
        eye = _EYES[n] = np.eye(n)
    tag = Tag()
    seeded = new_dual(x.copy(), eye.copy(), tag)
    if i == 0:
        out = f(seeded, *args[1:], **kwargs)
    else:
        out = f(*args[:i], seeded, *args[i + 1:], **kwargs)
    if type(out) is not Dual:  # object arrays, foreign arrays holding Duals
        out = _lift(out, tag)
    if type(out) is Dual and out.tag is tag:
        p = out._p
        if type(p) is np.ndarray:
            return p
        p = out.partials
        return p if type(p) is np.ndarray else _result_leaf(p)
    if is_container(out):  # an output tree: the general path
        return _jacobian_general(f, (i,), args, kwargs, chunk, fname)[0]
    check_output(out, fname)
    return np.zeros(shape_of(out) + (n,))


def _jacobian_array(f: Callable[..., Any], i: int, x: np.ndarray, args: tuple, kwargs: dict,
                    chunk: int | None, fname: str) -> Any:
    """The forward Jacobian w.r.t. one float64 array argument (the common case).

    Each pass's partials are written straight into the result (no list of blocks: holding
    them all would touch twice the memory).
    """
    n = x.size
    shape = x.shape
    if n == 0:  # no directions: the Jacobian is empty, shaped by the output
        out = lift_object_array(f(*args, **kwargs))
        check_output(out, fname)
        if is_container(out):
            return _jacobian_general(f, (i,), args, kwargs, chunk, fname)[0]
        return np.zeros(shape_of(out) + shape)
    if chunk is None and n <= _SMALL and len(shape) == 1:  # one pass, seeded by the identity
        return _jacobian_one_pass(f, i, x, args, kwargs, chunk, fname)
    width = choose_chunk(n, chunk)
    call = list(args)
    jac: Any = None  # out_shape + (n,), once the first pass gave plain partials
    blocks: list[Any] = []  # otherwise (partials traced by an outer differentiation)
    widths: list[int] = []
    out_shape: tuple[int, ...] = ()
    for start in range(0, n, width):
        w = min(width, n - start)
        tag = Tag()
        seed = _seed_block(n, start, w)
        call[i] = Dual._make(x.copy(), seed if len(shape) == 1 else seed.reshape(shape + (w,)),
                             tag)
        out = f(*call, **kwargs)
        if type(out) is not Dual:  # object arrays, foreign arrays holding Duals
            out = _lift(out, tag)
        if type(out) is Dual and out.tag is tag:
            out_shape = shape_of(out.value)
            p = out.partials
        elif is_container(out):  # an output tree: the general path
            return _jacobian_general(f, (i,), args, kwargs, chunk, fname)[0]
        else:
            check_output(out, fname)
            out_shape = shape_of(out)
            p = None
        if w == n:
            if p is None:
                return np.zeros(out_shape + shape)
            if type(p) is np.ndarray:
                return p if len(shape) == 1 else p.reshape(out_shape + shape)
            return _result_leaf(np.reshape(p, out_shape + shape))
        if start == 0 and type(p) is np.ndarray:
            jac = np.empty(out_shape + (n,))
        if jac is not None and (p is None or type(p) is np.ndarray):
            jac[..., start:start + w] = 0.0 if p is None else p
        else:
            if jac is not None:  # traced partials after plain ones: keep what was written
                blocks.append(jac[..., :start])
                widths.append(start)
                jac = None
            blocks.append(p)
            widths.append(w)
    if jac is not None:
        return jac if len(shape) == 1 else jac.reshape(out_shape + shape)
    return _result_leaf(np.reshape(_assemble(blocks, widths, out_shape, n), out_shape + shape))


def _assemble(blocks: list[Any], widths: list[int], oshape: tuple[int, ...], n: int) -> Any:
    """The ``oshape + (n,)`` Jacobian from per-pass partials (``None``: a zero block)."""
    if len(blocks) == 1 and blocks[0] is not None:
        return blocks[0]
    if all(type(b) is np.ndarray for b in blocks):
        full = np.empty(oshape + (n,))
        start = 0
        for b, w in zip(blocks, widths):
            full[..., start:start + w] = b
            start += w
        return full
    if all(b is None or isinstance(b, np.ndarray) for b in blocks):
        full = np.zeros(oshape + (n,))
        start = 0
        for b, w in zip(blocks, widths):
            if b is not None:
                full[..., start:start + w] = b
            start += w
        return full
    parts = [np.zeros(oshape + (w,)) if b is None else b for b, w in zip(blocks, widths)]
    return np.concatenate(parts, axis=-1)
