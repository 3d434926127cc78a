"""Reverse-mode function transforms: grad, value_and_grad, vjp, and the reverse Jacobian.

User functions are plain numpy; the differentiated arguments are replaced by
``Variable``s of a fresh level, so transforms nest (``grad(grad(f))``).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.sin(x) * x ** 2))(np.array([0.0, 1.0]))
    array([0.        , 2.22324428])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import njit as _njit
from ..core.allocations import allocation_policy
from ..core.arguments import (
    Argnums,
    AuxOutput,
    as_differentiable,
    as_dtype,
    check_output,
    check_real_output,
    derivative_dtype,
    guard_opaque_calls,
    normalize_argnums,
    to_user,
)
from ..core.array_protocol import lift_object_array, shape_of
from ..core.errors import ShapeError
from ..core.marks import mark_transform
from ..core.tracing import Traced, new_level
from ..core.trees import is_container, tree_flatten, tree_unflatten
from .backward import reverse_pass
from .graph import AbstractNode, CachedNode, Variable

__all__ = ["grad", "value_and_grad", "vjp", "jacobian_reverse", "named_grad",
           "check_complex_inputs"]

class _Inputs:
    """Differentiated arguments replaced by Variables of one fresh level."""

    def __init__(self, args: tuple, argnums: tuple[int, ...], fname: str) -> None:
        self.holomorphic = False
        self.level = new_level()
        self.args = list(args)
        self.specs: list[Any] = []
        self.variables: list[list[Variable]] = []
        self.dtypes: list[list[Any]] = []
        for i in argnums:
            x = args[i]
            tx = type(x)
            if tx is np.ndarray and x.dtype is _F64 or tx is float or tx is np.float64:
                if tx is np.ndarray:  # one plain leaf: a float64 array, as it is
                    v = _new(Variable)
                    v.output = x
                    v.grad = None
                    v.level = self.level
                else:
                    v = Variable(as_differentiable(x), self.level)
                self.specs.append(_PLAIN_LEAF)
                self.variables.append([v])
                self.dtypes.append([None])
                self.args[i] = v
                continue
            leaves, spec = tree_flatten(x)
            vs = [Variable(as_differentiable(leaf, f"argument {i} of {fname}"), self.level)
                  for leaf in leaves]
            self.specs.append(spec)
            self.variables.append(vs)
            self.dtypes.append([derivative_dtype(leaf) for leaf in leaves])
            self.args[i] = tree_unflatten(spec, vs)

    def gradients(self, leaf_grads: dict[int, Any]) -> list[Any]:
        """One gradient tree per differentiated argument (zeros where unreached)."""
        trees = []
        for spec, vs, dtypes in zip(self.specs, self.variables, self.dtypes):
            if spec is _PLAIN_LEAF and dtypes[0] is None:  # a float64 leaf, as computed
                v = vs[0]
                g = leaf_grads.get(id(v))
                if type(g) is np.ndarray and g.shape == v.value.shape:
                    trees.append(g)
                    continue
            gs = []
            for v, dtype in zip(vs, dtypes):
                g = leaf_grads.get(id(v))
                if g is None:
                    g = np.zeros(shape_of(v.value))
                elif not isinstance(g, Traced) and shape_of(g) != shape_of(v.value):
                    g = np.broadcast_to(g, shape_of(v.value))
                gs.append(as_dtype(to_user(g), dtype))
            trees.append(gs[0] if spec is _PLAIN_LEAF else tree_unflatten(spec, gs))
        return trees


#: The spec of an argument that is one float64 array or number (no tree to flatten).
_PLAIN_LEAF = tree_flatten(0.0)[1]
_F64 = np.dtype(np.float64)
_new = object.__new__


def _output_value(out: Any, level: int) -> Any:
    if isinstance(out, AbstractNode) and out.level == level:
        return out._primal()
    return out


def _seeds(out_leaves: list[Any], cot_leaves: list[Any], level: int) -> dict:
    seeds: dict[int, tuple[Any, Any]] = {}
    for o, c in zip(out_leaves, cot_leaves):
        if isinstance(o, AbstractNode) and o.level == level:
            if shape_of(c) != shape_of(o):
                raise ShapeError(
                    f"vjp: the cotangent has shape {shape_of(c)} but the output it pairs with "
                    f"has shape {shape_of(o)}; pass cotangents shaped like the outputs."
                )
            prev = seeds.get(id(o))
            seeds[id(o)] = (o, c if prev is None else prev[1] + c)
    return seeds


def value_and_grad(f: Callable[..., Any], argnums: Argnums = 0, *,
                   has_aux: bool = False, holomorphic: bool = False,
                   allocations: str = "promote") -> Callable[..., Any]:
    """A function returning ``(f(*args), gradient)`` for a scalar-valued ``f`` (reverse mode).

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the function returns
    ``((output, aux), gradient)``; ``aux`` is not differentiated. For complex inputs
    (JAX's convention) the gradient of a real-valued ``f`` is the conjugate of the
    steepest-ascent direction; ``holomorphic=True`` gives ``f'(z)`` of a complex-valued,
    complex-differentiable ``f``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> v, g = ad.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
        >>> float(v), g
        (5.0, array([2., 4.]))
        >>> (v, aux), g = ad.value_and_grad(lambda x: (np.sum(x ** 2), x.size),
        ...                                 has_aux=True)(np.array([1.0, 2.0]))
        >>> aux
        2
    """
    if _njit.is_njit(f) and not has_aux and not holomorphic:  # compiled forward mode
        return _njit.value_and_grad(f, argnums)
    f = allocation_policy(f, allocations, "value_and_grad")
    wrapped = _value_and_grad(f, argnums, has_aux, f"value_and_grad({_name(f)})",
                              "value_and_grad", holomorphic)
    return mark_transform(wrapped, "value_and_grad", f, argnums,
                          lambda g, **o: value_and_grad(g, argnums, **{
                              "has_aux": has_aux, "holomorphic": holomorphic, **o}),
                          has_aux=has_aux, holomorphic=holomorphic)


def _name(f: Any) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


def _value_and_grad(f: Callable[..., Any], argnums: Argnums, has_aux: bool, fname: str,
                    transform: str, holomorphic: bool = False,
                    value_wanted: bool = True) -> Callable[..., Any]:
    """``value_and_grad``, with errors naming ``fname`` (the transform the user called);
    ``value_wanted=False`` (``grad``): the value of a recorded real number is not converted
    for the user (it is dropped)."""
    guarded = guard_opaque_calls(f, fname)

    checked: dict[int, tuple[tuple[int, ...], bool]] = {}  # argument count -> argnums

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        found = checked.get(len(args))
        if found is None:
            found = checked[len(args)] = normalize_argnums(argnums, len(args), fname)
        nums, single = found
        if holomorphic:
            check_complex_inputs(args, nums, True, fname)
        call = AuxOutput(guarded, fname) if has_aux else guarded
        inputs = _Inputs(args, nums, fname)
        out = call(*inputs.args, **kwargs)
        if type(out) is CachedNode and type(out.output) is np.float64 \
                and out.level == inputs.level:  # the common case: a recorded real number
            grads = inputs.gradients(reverse_pass({id(out): (out, np.float64(1.0))}))
            value = to_user(out.output) if value_wanted else None
            if has_aux:
                value = (value, call.aux())
            return value, (grads[0] if single else tuple(grads))
        out = lift_object_array(out)
        check_output(out, fname)
        if is_container(out):
            hint = (" (with has_aux=True it returns (output, aux))" if has_aux else
                    "; if the rest is auxiliary data, return (output, aux) and pass "
                    "has_aux=True")
            raise ValueError(
                f"{fname}: {transform} needs a scalar output, but the function returned a "
                f"{type(out).__name__}{hint}; use ad.jacobian or ad.vjp for several "
                f"outputs."
            )
        shape = shape_of(out)
        if shape != () and int(np.prod(shape, dtype=np.int64)) != 1:
            raise ValueError(
                f"{fname}: {transform} needs a scalar output, but the function returned "
                f"shape {shape}; reduce it (e.g. np.sum) or use ad.jacobian(f) / "
                f"ad.vjp(f, x) for non-scalar outputs."
            )
        if not holomorphic:
            check_real_output(out, fname)
        leaf_grads: dict[int, Any] = {}
        if isinstance(out, AbstractNode) and out.level == inputs.level:
            seed = np.float64(1.0) if shape == () else np.ones(shape)
            leaf_grads = reverse_pass({id(out): (out, seed)})
        grads = inputs.gradients(leaf_grads)
        value = to_user(_output_value(out, inputs.level))
        if has_aux:
            value = (value, call.aux())
        return value, (grads[0] if single else tuple(grads))

    return wrapped


def grad(f: Callable[..., Any], argnums: Argnums = 0, *,
         has_aux: bool = False, holomorphic: bool = False,
         allocations: str = "promote") -> Callable[..., Any]:
    """The gradient of a scalar-valued ``f`` (reverse mode), shaped like the argument.

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the function returns
    ``(gradient, aux)``; ``aux`` is not differentiated (as in JAX).

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.grad(lambda x, y: x * y, argnums=(0, 1))(2.0, 3.0)
        (array(3.), array(2.))
        >>> g, aux = ad.grad(lambda x: (x ** 2, {"x2": x ** 2}), has_aux=True)(3.0)
        >>> g, aux
        (array(6.), {'x2': array(9.)})
    """
    if _njit.is_njit(f) and not has_aux and not holomorphic:  # compiled forward mode
        return _njit.grad(f, argnums)
    f = allocation_policy(f, allocations, "grad")
    wrapped = named_grad(f, argnums, f"grad({_name(f)})", "grad", has_aux=has_aux,
                         holomorphic=holomorphic)
    return mark_transform(wrapped, "grad", f, argnums,
                          lambda g, **o: grad(g, argnums, **{
                              "has_aux": has_aux, "holomorphic": holomorphic, **o}),
                          has_aux=has_aux, holomorphic=holomorphic)


def named_grad(f: Callable[..., Any], argnums: Argnums, fname: str, transform: str, *,
               has_aux: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """``grad(f, argnums)`` whose errors name ``fname`` (e.g. ``hessian(f)``, built on it)."""
    vg = _value_and_grad(f, argnums, has_aux, fname, transform, holomorphic,
                         value_wanted=False)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False,
        allocations: str = "promote") -> tuple[Any, ...]:
    """``(f(*primals), pullback)``; ``pullback(cotangent)`` gives one gradient per primal.

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and ``vjp`` returns
    ``(output, pullback, aux)``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> out, pullback = ad.vjp(lambda x: x * 3.0, np.ones(2))
        >>> pullback(np.array([1.0, 2.0]))
        (array([3., 6.]),)
    """
    f = allocation_policy(f, allocations, "vjp")
    fname = f"vjp({_name(f)})"
    call = AuxOutput(guard_opaque_calls(f, fname), fname) if has_aux else \
        guard_opaque_calls(f, fname)
    inputs = _Inputs(primals, tuple(range(len(primals))), fname)
    out = call(*inputs.args)
    check_output(out, fname)
    out_leaves, out_spec = tree_flatten(out)
    out_leaves = [lift_object_array(o) for o in out_leaves]
    level = inputs.level
    values = tree_unflatten(out_spec, [to_user(_output_value(o, level)) for o in out_leaves])

    def pullback(cotangent: Any) -> tuple:
        cot_leaves, cot_spec = tree_flatten(cotangent)
        if len(cot_leaves) != len(out_leaves):
            raise ShapeError(
                f"{fname}: the cotangent has {len(cot_leaves)} leaves but the output has "
                f"{len(out_leaves)}; pass a cotangent with the output's structure."
            )
        cot_leaves = [c if isinstance(c, Traced) else _cotangent_array(c) for c in cot_leaves]
        seeds = _seeds(out_leaves, cot_leaves, level)
        return tuple(inputs.gradients(reverse_pass(seeds) if seeds else {}))

    if has_aux:
        return values, pullback, call.aux()
    return values, pullback


def _cotangent_array(c: Any) -> np.ndarray:
    """A cotangent as float64, or complex128 for a complex one."""
    c = np.asarray(c)
    return c.astype(np.complex128 if c.dtype.kind == "c" else np.float64, copy=False)


def _is_complex_value(x: Any) -> bool:
    if isinstance(x, AbstractNode):
        x = x._primal()
    return type(x) is complex or getattr(getattr(x, "dtype", None), "kind", "f") == "c"


def check_complex_inputs(args: tuple, nums: tuple[int, ...], holomorphic: bool,
                          fname: str) -> None:
    """Complex differentiated inputs need ``holomorphic=True``, which needs them complex."""
    leaves = [leaf for i in nums for leaf in tree_flatten(args[i])[0]]
    complex_in = [_is_complex_value(leaf) or np.iscomplexobj(leaf) for leaf in leaves
                  if not isinstance(leaf, Traced)]
    if holomorphic and not all(complex_in):
        raise TypeError(
            f"{fname}: holomorphic=True needs complex inputs (the complex derivative df/dz); "
            f"pass complex arrays, e.g. x.astype(complex)."
        )
    if not holomorphic and any(complex_in):
        raise TypeError(
            f"{fname}: the input is complex; pass holomorphic=True for a complex-"
            f"differentiable f (the result is df/dz), use ad.grad for a real-valued f, or "
            f"ad.vjp / ad.jvp for anything else (or split the input into real and "
            f"imaginary parts)."
        )


def jacobian_reverse(f: Callable[..., Any], nums: tuple[int, ...], args: tuple,
                      kwargs: dict, fname: str, holomorphic: bool = False) -> list[Any]:
    inputs = _Inputs(args, nums, fname)
    inputs.holomorphic = holomorphic
    out = f(*inputs.args, **kwargs)
    check_output(out, fname)
    out_leaves, out_spec = tree_flatten(out)
    in_shapes = [[shape_of(v.value) for v in vs] for vs in inputs.variables]
    # per output leaf, per differentiated argument: the Jacobian leaves
    blocks = [_jacobian_blocks(lift_object_array(o), inputs, in_shapes) for o in out_leaves]
    results = []
    for a, spec in enumerate(inputs.specs):
        per_out = [tree_unflatten(spec, block[a]) for block in blocks]
        results.append(tree_unflatten(out_spec, per_out))
    return results


def _jacobian_blocks(out: Any, inputs: _Inputs, in_shapes: list[list[tuple[int, ...]]]
                     ) -> list[list[Any]]:
    """The Jacobian of one output leaf w.r.t. every input leaf, one backward pass per entry."""
    level = inputs.level
    out_shape = shape_of(out)
    rows: list[list[list[Any]]] = [[[] for _ in vs] for vs in inputs.variables]
    n_out = int(np.prod(out_shape, dtype=np.int64))
    traced = isinstance(out, AbstractNode) and out.level == level
    template = np.zeros(out_shape)
    # A complex output of real inputs: a cotangent c gives the gradient of Re(c * out), so
    # the real and imaginary parts take a pass each (c = 1 and c = -1j). For complex inputs
    # (holomorphic) one pass gives d out / d z.
    imaginary = traced and _is_complex_value(out) and not inputs.holomorphic
    for k in range(n_out):
        leaf_grads = {}
        imag_grads = {}
        if traced:
            seed = template.copy()
            seed.flat[k] = 1.0
            leaf_grads = reverse_pass({id(out): (out, seed)})
            if imaginary:
                imag_grads = reverse_pass({id(out): (out, seed * -1j)})
        for a, vs in enumerate(inputs.variables):
            for j, v in enumerate(vs):
                g = leaf_grads.get(id(v))
                if imaginary and imag_grads.get(id(v)) is not None:
                    g = (0.0 if g is None else g) + 1j * imag_grads[id(v)]
                rows[a][j].append(np.zeros(in_shapes[a][j]) if g is None else g)
    blocks = []
    for a in range(len(inputs.variables)):
        leaves = []
        for j, shape in enumerate(in_shapes[a]):
            if n_out == 0:
                leaves.append(np.zeros(out_shape + shape))
                continue
            items: list[Any] = [np.broadcast_to(r, shape) if not isinstance(r, Traced) else r
                                for r in rows[a][j]]
            stacked = np.stack(items)
            leaves.append(as_dtype(to_user(np.reshape(stacked, out_shape + shape)),
                                   inputs.dtypes[a][j]))
        blocks.append(leaves)
    return blocks
