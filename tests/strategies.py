"""Hypothesis strategies for random numpy programs, and finite-difference helpers.

A :class:`Program` is a small DAG: 1 to 3 input arrays and 1 to 30 operations, each an
elementwise function drawn from the rules tables (``dualad.derivatives.registry.rules()``, whose
entries carry the domain to draw from) or a structured operation (sum, mean, reshape,
transpose, matmul, getitem, ...). Programs are generated against concrete input values, so
every elementwise argument is kept inside its rule's domain: when an operand's values fall
outside, the program maps them in with an affine step ``v * a + b`` (``|a| <= 1``), which is
part of the program and is differentiated like the rest.

A program is a plain Python function of numpy calls: it runs on arrays, graph nodes and
Duals alike. ``repr(program)`` prints it as Python source.

Example:
    >>> from hypothesis import given
    >>> @given(programs())
    ... def test(program):
    ...     program(*program.inputs)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

import dualad.derivatives.registry as rule_generator

MAX_SIZE = 24          # entries of any value in a program
MAX_INPUT_SIZE = 12    # entries of an input (finite differences cost one call per entry)
INPUT_SHAPES = [(), (1,), (2,), (3,), (4,), (2, 2), (2, 3), (3, 1), (1, 3), (2, 1, 3),
                (3, 4), (2, 3, 2)]

_OPERATOR_SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/",
                     "true_divide": "/", "power": "**"}


# -- the rules drawn from ----------------------------------------------------------------------


def chain(x: Any, n: int) -> Any:
    """``n`` operations cycling ``np.sin``, ``* 1.0001``, ``+ 0.1`` (a long program of
    known length, as benchmarks/compiled.py's chain)."""
    for i in range(n):
        r = i % 3
        x = np.sin(x) if r == 0 else (x * 1.0001 if r == 1 else x + 0.1)
    return x


def elementwise_rules() -> list[Any]:
    """Every registered rule that has a domain (the scipy.special table too, when present)."""
    try:
        import scipy.special  # noqa: F401  (its table loads once scipy.special is imported)
    except ImportError:  # scipy is optional
        pass
    rule_generator.load_deferred_tables()
    return [r for r in rule_generator.rules() if r.domain is not None]


# -- programs ----------------------------------------------------------------------------------


@dataclass
class Step:
    """One operation: ``apply(env)`` computes its value from earlier values; ``text`` shows it."""

    text: str
    apply: Callable[[list], Any]
    kind: str


@dataclass
class Program:
    """A random program: call it with its inputs; ``repr`` gives its Python source."""

    inputs: tuple
    steps: list[Step] = field(default_factory=list)
    output: int = -1

    def __call__(self, *args: Any) -> Any:
        env = list(args)
        for step in self.steps:
            env.append(step.apply(env))
        return env[self.output]

    @property
    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]

    def __repr__(self) -> str:
        n = len(self.inputs)
        names = ", ".join(f"v{i}" for i in range(n))
        lines = [f"def program({names}):"]
        for j, step in enumerate(self.steps):
            lines.append(f"    v{n + j} = {step.text}")
        out = self.output % (n + len(self.steps))
        lines.append(f"    return v{out}")
        shapes = ", ".join(str(np.shape(x)) for x in self.inputs)
        values = ", ".join(np.array2string(np.asarray(x), precision=17, separator=", ")
                           for x in self.inputs)
        lines.append(f"# input shapes {shapes}")
        lines.append(f"# inputs = ({values},)")
        return "\n".join(lines)


def _fmt(c: Any) -> str:
    if np.ndim(c) == 0:
        return repr(float(c))
    arr = np.asarray(c)
    dtype = "" if arr.dtype.kind == "f" else f", dtype=np.{arr.dtype.name}"
    return f"np.array({np.array2string(arr, precision=17, separator=', ')}{dtype})"


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Builder:
    """Builds a program step by step against the concrete values ``values``."""

    def __init__(self, draw: Callable[[Any], Any], inputs: tuple) -> None:
        self.draw = draw
        self.program = Program(tuple(inputs))
        self.values: list[np.ndarray] = [np.asarray(x, dtype=np.float64) for x in inputs]

    # helpers -----------------------------------------------------------------------------
    def name(self, i: int) -> str:
        return f"v{i}"

    def add(self, text: str, apply: Callable[[list], Any], kind: str) -> bool:
        value = np.asarray(apply(self.values), dtype=np.float64)
        if value.size > MAX_SIZE or value.size == 0 or not np.all(np.isfinite(value)):
            return False
        self.program.steps.append(Step(text, apply, kind))
        self.values.append(value)
        return True

    def pick(self, want: Callable[[np.ndarray], bool] = lambda v: True) -> int | None:
        candidates = [i for i, v in enumerate(self.values) if want(v)]
        if not candidates:
            return None
        # prefer recent values so programs are deep rather than wide
        weights = st.sampled_from(candidates[-6:]) if self.draw(st.booleans()) else \
            st.sampled_from(candidates)
        return self.draw(weights)

    def unit(self) -> float:
        return self.draw(st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False))

    def constant(self, shape: tuple[int, ...], lo: float, hi: float,
                 integer: bool = False) -> np.ndarray:
        seed = self.draw(st.integers(0, 2 ** 32 - 1))
        rng = np.random.default_rng(seed)
        if integer:
            return rng.integers(int(lo), int(hi), size=shape, endpoint=True).astype(np.int64)
        return lo + (hi - lo) * (0.1 + 0.8 * rng.random(shape))

    def broadcast_partner_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``shape`` (same, 1s, fewer or more leading axes)."""
        choice = self.draw(st.integers(0, 4))
        if choice == 0 or not shape:
            return shape if choice != 4 else ()
        if choice == 1:
            return ()
        if choice == 2:
            return tuple(1 if self.draw(st.booleans()) else n for n in shape)
        if choice == 3:
            return shape[self.draw(st.integers(1, len(shape))):]
        extra = (2,) if _size(shape) * 2 <= MAX_SIZE else (1,)
        return extra + shape

    def into_domain(self, i: int, domain: Any) -> tuple[str, Callable[[list], Any]]:
        """Operand ``v{i}`` mapped into ``domain`` (an affine step only when needed)."""
        v = self.values[i]
        lo, hi = domain.intervals[self.draw(st.integers(0, len(domain.intervals) - 1))]
        width = hi - lo
        tlo, thi = lo + 0.1 * width, hi - 0.1 * width
        vmin, vmax = float(np.min(v)), float(np.max(v))
        if tlo <= vmin and vmax <= thi and self.draw(st.booleans()):
            return self.name(i), lambda env, i=i: env[i]
        spread = vmax - vmin
        a = 1.0 if spread <= 0 else min(1.0, 0.8 * width / spread)
        if self.draw(st.booleans()) and spread > 0:
            a = -a
        low_end, high_end = (a * vmin, a * vmax) if a > 0 else (a * vmax, a * vmin)
        b_lo, b_hi = tlo - low_end, thi - high_end
        b = b_lo + (b_hi - b_lo) * self.unit()
        a, b = float(a), float(b)
        return (f"({self.name(i)} * {a!r} + {b!r})",
                lambda env, i=i, a=a, b=b: env[i] * a + b)

    # operations --------------------------------------------------------------------------
    def elementwise(self, rule: Any) -> bool:
        f = rule.function
        first = self.pick()
        assert first is not None
        shape = self.values[first].shape
        texts: list[str] = []
        getters: list[Callable[[list], Any]] = []
        used_first = False
        for arg, differentiable in zip(rule.arg_names, rule.differentiable):
            domain = rule.domain[arg]
            if not differentiable or domain.integer:
                c = self.constant(self.broadcast_partner_shape(shape), *domain.intervals[0],
                                  integer=domain.integer)
                shape = np.broadcast_shapes(shape, c.shape)
                texts.append(_fmt(c))
                getters.append(lambda env, c=c: c)
                continue
            if not used_first and self.draw(st.integers(0, 3)) > 0:
                i = first
                used_first = True
            else:
                i = self.pick(lambda v, shape=shape: _broadcasts(v.shape, shape))
                if i is None or self.draw(st.integers(0, 4)) == 0:
                    lo, hi = domain.intervals[0]
                    c = self.constant(self.broadcast_partner_shape(shape), lo, hi)
                    shape = np.broadcast_shapes(shape, c.shape)
                    texts.append(_fmt(c))
                    getters.append(lambda env, c=c: c)
                    continue
            shape = np.broadcast_shapes(shape, self.values[i].shape)
            text, get = self.into_domain(i, domain)
            texts.append(text)
            getters.append(get)
        label = _function_label(f)
        symbol = _OPERATOR_SYMBOLS.get(rule.name) if len(getters) == 2 else None
        if symbol and getattr(np, rule.name, None) is f and self.draw(st.booleans()):
            ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                   "/": lambda a, b: a / b, "**": lambda a, b: a ** b}
            binop = ops[symbol]
            g0, g1 = getters
            return self.add(f"{texts[0]} {symbol} {texts[1]}",
                            lambda env: binop(g0(env), g1(env)), rule.name)
        return self.add(f"{label}({', '.join(texts)})",
                        lambda env: f(*[g(env) for g in getters]), rule.name)

    def reduction(self, kind: str) -> bool:
        i = self.pick()
        v = self.values[i]
        fn = {"sum": np.sum, "mean": np.mean}[kind]
        kwargs: dict[str, Any] = {}
        if v.ndim and self.draw(st.booleans()):
            axes = self.draw(st.lists(st.integers(-v.ndim, v.ndim - 1), min_size=1,
                                      max_size=v.ndim, unique_by=lambda a: a % v.ndim))
            kwargs["axis"] = axes[0] if len(axes) == 1 and self.draw(st.booleans()) \
                else tuple(axes)
        if self.draw(st.booleans()):
            kwargs["keepdims"] = True
        method = self.draw(st.booleans())
        args = ", ".join(f"{k}={val!r}" for k, val in kwargs.items())
        if method:
            text = f"{self.name(i)}.{kind}({args})"
            return self.add(text, lambda env: getattr(env[i], kind)(**kwargs), kind)
        text = f"np.{kind}({self.name(i)}{', ' if args else ''}{args})"
        return self.add(text, lambda env: fn(env[i], **kwargs), kind)

    def reshape(self) -> bool:
        i = self.pick()
        n = self.values[i].size
        shapes = [s for s in _factorizations(n) if len(s) <= 3]
        shape = list(self.draw(st.sampled_from(shapes)))
        if shape and self.draw(st.booleans()):
            shape[self.draw(st.integers(0, len(shape) - 1))] = -1
        shape_t = tuple(shape)
        order = self.draw(st.sampled_from(["C", "C", "F"]))
        if self.draw(st.booleans()):
            return self.add(f"{self.name(i)}.reshape({shape_t!r}, order={order!r})",
                            lambda env: env[i].reshape(shape_t, order=order), "reshape")
        return self.add(f"np.reshape({self.name(i)}, {shape_t!r}, order={order!r})",
                        lambda env: np.reshape(env[i], shape_t, order=order), "reshape")

    def transpose(self) -> bool:
        i = self.pick()
        nd = self.values[i].ndim
        form = self.draw(st.integers(0, 2))
        if form == 0:
            return self.add(f"{self.name(i)}.T", lambda env: env[i].T, "transpose")
        perm = tuple(self.draw(st.permutations(range(nd))))
        if form == 1:
            return self.add(f"np.transpose({self.name(i)}, {perm!r})",
                            lambda env: np.transpose(env[i], perm), "transpose")
        return self.add(f"{self.name(i)}.transpose({perm!r})",
                        lambda env: env[i].transpose(perm), "transpose")

    def matmul(self) -> bool:
        i = self.pick(lambda v: v.ndim >= 1)
        if i is None:
            return False
        sa = self.values[i].shape
        partners = [j for j, v in enumerate(self.values)
                    if v.ndim >= 1 and _matmul_shape(sa, v.shape) is not None]
        if partners and self.draw(st.integers(0, 3)) > 0:
            j = self.draw(st.sampled_from(partners))
            right = self.draw(st.booleans())
            a, b = (i, j) if right else (j, i)
            if _matmul_shape(self.values[a].shape, self.values[b].shape) is None:
                a, b = b, a
                if _matmul_shape(self.values[a].shape, self.values[b].shape) is None:
                    return False
            if self.draw(st.booleans()):
                return self.add(f"{self.name(a)} @ {self.name(b)}",
                                lambda env: env[a] @ env[b], "matmul")
            return self.add(f"np.matmul({self.name(a)}, {self.name(b)})",
                            lambda env: np.matmul(env[a], env[b]), "matmul")
        # with a constant of a compatible shape, on either side
        k = self.draw(st.integers(1, 3))
        if self.draw(st.booleans()):     # v @ C
            cshape = (sa[-1],) if self.draw(st.booleans()) else (sa[-1], k)
            c = self.constant(cshape, -1.0, 1.0)
            return self.add(f"{self.name(i)} @ {_fmt(c)}", lambda env: env[i] @ c, "matmul")
        cshape = (sa[-2] if len(sa) >= 2 else sa[0],)
        cshape = cshape if self.draw(st.booleans()) else (k,) + cshape
        c = self.constant(cshape, -1.0, 1.0)
        return self.add(f"{_fmt(c)} @ {self.name(i)}", lambda env: c @ env[i], "matmul")

    def getitem(self) -> bool:
        i = self.pick(lambda v: v.ndim >= 1)
        if i is None:
            return False
        shape = self.values[i].shape
        form = self.draw(st.integers(0, 4))
        if form == 0:        # an integer on the first axis
            k = self.draw(st.integers(-shape[0], shape[0] - 1))
            key: Any = k
        elif form == 1:      # slices, possibly with a step, a newaxis or an ellipsis
            parts = []
            for n in shape[: self.draw(st.integers(1, len(shape)))]:
                start = self.draw(st.integers(0, n - 1))
                step = self.draw(st.sampled_from([1, 1, 2, -1]))
                parts.append(slice(start, None, step) if step > 0 else slice(None, None, -1))
            if self.draw(st.booleans()):
                parts.append(None)
            if len(parts) < len(shape) and self.draw(st.booleans()):
                parts.insert(0, Ellipsis)
            key = tuple(parts)
        elif form == 2 or len(shape) < 2:      # an integer array with repeats
            idx = np.array(self.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1,
                                              max_size=4)))
            key = idx
        elif form == 3:      # two integer arrays
            n = self.draw(st.integers(1, 3))
            rows = np.array(self.draw(st.lists(st.integers(0, shape[0] - 1), min_size=n,
                                               max_size=n)))
            cols = np.array(self.draw(st.lists(st.integers(0, shape[1] - 1), min_size=n,
                                               max_size=n)))
            key = (rows, cols)
        else:                # a boolean mask on the first axis
            mask = np.array(self.draw(st.lists(st.booleans(), min_size=shape[0],
                                               max_size=shape[0])))
            if not mask.any():
                mask[0] = True
            key = mask
        return self.add(f"{self.name(i)}[{_key_text(key)}]", lambda env: env[i][key],
                        "getitem")

    def axis_of(self, v: np.ndarray, allow_none: bool = True) -> int | None:
        if v.ndim == 0 or (allow_none and self.draw(st.integers(0, 3)) == 0):
            return None
        return self.draw(st.integers(-v.ndim, v.ndim - 1))

    def unary_call(self, kind: str, fn: Callable[..., Any], name: str, args: str,
                   want: Callable[[np.ndarray], bool] = lambda v: True,
                   **kwargs: Any) -> bool:
        i = self.pick(want)
        if i is None:
            return False
        text_kwargs = "".join(f", {k}={val!r}" for k, val in kwargs.items())
        return self.add(f"{name}({self.name(i)}{args}{text_kwargs})",
                        lambda env: fn(env[i], **kwargs), kind)

    def axis_reduction(self, kind: str) -> bool:
        fn = {"prod": np.prod, "max": np.max, "min": np.min, "var": np.var,
              "cumsum": np.cumsum, "cumprod": np.cumprod}[kind]
        i = self.pick()
        v = self.values[i]
        kwargs: dict[str, Any] = {"axis": self.axis_of(v)}
        if kind not in ("cumsum", "cumprod") and self.draw(st.booleans()):
            kwargs["keepdims"] = True
        if kind == "var" and self.draw(st.booleans()) and v.size > 1:
            n = v.size if kwargs["axis"] is None else v.shape[kwargs["axis"]]
            if n > 1:
                kwargs["ddof"] = 1
        args = "".join(f", {k}={val!r}" for k, val in kwargs.items())
        return self.add(f"np.{kind}({self.name(i)}{args})", lambda env: fn(env[i], **kwargs),
                        kind)

    def where(self) -> bool:
        i = self.pick()
        shape = self.values[i].shape
        j = self.pick(lambda v: _broadcasts(v.shape, shape))
        cshape = self.broadcast_partner_shape(np.broadcast_shapes(shape, self.values[j].shape))
        seed = self.draw(st.integers(0, 2 ** 32 - 1))
        cond = np.random.default_rng(seed).random(cshape) < 0.5
        return self.add(f"np.where({_fmt(cond)}, {self.name(i)}, {self.name(j)})",
                        lambda env: np.where(cond, env[i], env[j]), "where")

    def joined(self, kind: str) -> bool:
        i = self.pick()
        v = self.values[i]
        if kind == "stack":
            same = [j for j, w in enumerate(self.values) if w.shape == v.shape]
            axis = self.draw(st.integers(-v.ndim - 1, v.ndim))
        else:
            if v.ndim == 0:
                return False
            axis = self.draw(st.integers(-v.ndim, v.ndim - 1))
            ax = axis % v.ndim
            same = [j for j, w in enumerate(self.values) if w.ndim == v.ndim and all(
                a == b for k, (a, b) in enumerate(zip(w.shape, v.shape)) if k != ax)]
        others = self.draw(st.lists(st.sampled_from(same), min_size=1, max_size=2))
        refs = [i] + others
        fn = np.stack if kind == "stack" else np.concatenate
        names = ", ".join(self.name(j) for j in refs)
        return self.add(f"np.{kind}([{names}], axis={axis})",
                        lambda env: fn([env[j] for j in refs], axis=axis), kind)

    def rearranged(self, kind: str) -> bool:
        i = self.pick()
        v = self.values[i]
        nd = v.ndim
        if kind == "flip":
            kwargs = {"axis": self.axis_of(v)}
            return self.add(f"np.flip({self.name(i)}, axis={kwargs['axis']!r})",
                            lambda env: np.flip(env[i], **kwargs), kind)
        if kind == "roll":
            shift = self.draw(st.integers(-3, 3))
            axis = self.axis_of(v)
            return self.add(f"np.roll({self.name(i)}, {shift}, axis={axis!r})",
                            lambda env: np.roll(env[i], shift, axis=axis), kind)
        if kind == "swapaxes":
            if nd < 2:
                return False
            a1, a2 = self.draw(st.integers(0, nd - 1)), self.draw(st.integers(-nd, nd - 1))
            return self.add(f"np.swapaxes({self.name(i)}, {a1}, {a2})",
                            lambda env: np.swapaxes(env[i], a1, a2), kind)
        if kind == "expand_dims":
            axis = self.draw(st.integers(-nd - 1, nd))
            return self.add(f"np.expand_dims({self.name(i)}, {axis})",
                            lambda env: np.expand_dims(env[i], axis), kind)
        if kind == "broadcast_to":
            shape = (self.draw(st.integers(1, 3)),) + v.shape
            return self.add(f"np.broadcast_to({self.name(i)}, {shape!r})",
                            lambda env: np.broadcast_to(env[i], shape), kind)
        if kind == "sort":
            axis = self.axis_of(v, allow_none=False) if nd else None
            if axis is None or np.any(np.diff(np.sort(v, axis=axis), axis=axis) < 1e-3):
                return False  # ties: sort is not differentiable there (any order is right)
            return self.add(f"np.sort({self.name(i)}, axis={axis})",
                            lambda env: np.sort(env[i], axis=axis), kind)
        if kind == "take":
            if nd == 0:
                return False
            axis = self.axis_of(v)
            n = v.size if axis is None else v.shape[axis]
            idx = np.array(self.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4)))
            return self.add(f"np.take({self.name(i)}, {_fmt(idx)}, axis={axis!r})",
                            lambda env: np.take(env[i], idx, axis=axis), kind)
        if kind == "diagonal":
            if nd < 2:
                return False
            offset = self.draw(st.integers(-1, 1))
            if min(v.shape[0] + min(offset, 0), v.shape[1] - max(offset, 0)) <= 0:
                return False
            return self.add(f"np.diagonal({self.name(i)}, {offset})",
                            lambda env: np.diagonal(env[i], offset), kind)
        if kind == "clip":
            lo = float(np.quantile(v, 0.25)) - 0.01
            hi = float(np.quantile(v, 0.75)) + 0.01
            return self.add(f"np.clip({self.name(i)}, {lo!r}, {hi!r})",
                            lambda env: np.clip(env[i], lo, hi), kind)
        if kind == "norm":
            return self.add(f"np.linalg.norm({self.name(i)})",
                            lambda env: np.linalg.norm(env[i]), kind)
        raise ValueError(kind)

    def einsum(self) -> bool:
        i = self.pick(lambda v: v.ndim in (1, 2))
        if i is None:
            return False
        v = self.values[i]
        if v.ndim == 1:
            spec = self.draw(st.sampled_from(["i->", "i,i->", "i,j->ij", "i->i"]))
        else:
            options = ["ij->ji", "ij->", "ij->i", "ij,ij->j", "ij,j->i", "ij,kj->ik"]
            if v.shape[0] == v.shape[1]:
                options += ["ii->i", "ii->", "ij,jk->ik"]
            spec = self.draw(st.sampled_from(options))
        inputs = spec.split("->")[0].split(",")
        if len(inputs) == 1:
            return self.add(f"np.einsum({spec!r}, {self.name(i)})",
                            lambda env: np.einsum(spec, env[i]), "einsum")
        dims = dict(zip(inputs[0], v.shape))
        other = tuple(dims.get(c, self.draw(st.integers(1, 3))) for c in inputs[1])
        partners = [j for j, w in enumerate(self.values) if w.shape == other]
        if partners and self.draw(st.booleans()):
            j = self.draw(st.sampled_from(partners))
            return self.add(f"np.einsum({spec!r}, {self.name(i)}, {self.name(j)})",
                            lambda env: np.einsum(spec, env[i], env[j]), "einsum")
        c = self.constant(other, -1.0, 1.0)
        return self.add(f"np.einsum({spec!r}, {self.name(i)}, {_fmt(c)})",
                        lambda env: np.einsum(spec, env[i], c), "einsum")

    def structured(self, kind: str) -> bool:
        if kind in ("sum", "mean"):
            return self.reduction(kind)
        if kind in ("prod", "max", "min", "var", "cumsum", "cumprod"):
            return self.axis_reduction(kind)
        if kind in ("stack", "concatenate"):
            return self.joined(kind)
        if kind in ("flip", "roll", "swapaxes", "expand_dims", "broadcast_to", "sort", "take",
                    "diagonal", "clip", "norm"):
            return self.rearranged(kind)
        return getattr(self, kind)()


#: Structured operations a program draws from (besides the elementwise rules).
STRUCTURED = ["sum", "mean", "reshape", "transpose", "matmul", "getitem",
              "prod", "max", "min", "var", "cumsum", "cumprod", "where", "stack", "concatenate",
              "flip", "roll", "swapaxes", "expand_dims", "broadcast_to", "sort", "take",
              "diagonal", "clip", "norm", "einsum"]


def _function_label(f: Any) -> str:
    name = getattr(f, "__name__", repr(f))
    if getattr(np, name, None) is f:
        return f"np.{name}"
    module = getattr(f, "__module__", "") or ""
    if module.startswith("scipy"):
        return f"scipy.special.{name}"
    return name


def _key_text(key: Any) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    for p in parts:
        if isinstance(p, slice):
            out.append(f"{'' if p.start is None else p.start}:"
                       f"{'' if p.stop is None else p.stop}"
                       f"{'' if p.step is None else ':' + str(p.step)}")
        elif p is None:
            out.append("None")
        elif p is Ellipsis:
            out.append("...")
        elif isinstance(p, np.ndarray):
            out.append(f"np.array({p.tolist()!r})")
        else:
            out.append(repr(p))
    text = ", ".join(out)
    return text + "," if isinstance(key, tuple) and len(parts) == 1 else text


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        shape = np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return _size(shape) <= MAX_SIZE


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        shape = np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        return None
    return shape if 0 < _size(shape) <= MAX_SIZE else None


def _factorizations(n: int) -> list[tuple[int, ...]]:
    out = [(n,)]
    if n == 1:
        out += [(), (1, 1)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
            for b in range(2, n // a):
                if (n // a) % b == 0:
                    out.append((a, b, n // a // b))
    out.append((1, n))
    return out


@st.composite
def inputs(draw: Callable[[Any], Any], max_inputs: int = 3) -> tuple:
    """1 to ``max_inputs`` float arrays of small shapes with values in [-2, 2]; some are
    non-contiguous views."""
    n = draw(st.integers(1, max_inputs))
    result = []
    for _ in range(n):
        shape = draw(st.sampled_from(INPUT_SHAPES))
        size = _size(shape)
        values = draw(st.lists(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False,
                                         allow_subnormal=False),
                               min_size=size, max_size=size))
        # no tiny nonzero values: formulas such as i1' = i0(x) - i1(x) / x lose all accuracy
        # in their derivatives there (cancellation), which says nothing about the modes
        arr = np.array([v if abs(v) >= 1e-3 else 0.0 for v in values],
                       dtype=np.float64).reshape(shape)
        if arr.ndim >= 1 and draw(st.booleans()):
            big = np.empty(tuple(2 * d for d in shape))
            view = big[(slice(None, None, 2),) * arr.ndim]
            view[...] = arr
            arr = view
        result.append(arr)
    return tuple(result)


@st.composite
def programs(draw: Callable[[Any], Any], max_ops: int = 30, max_inputs: int = 3,
             structured: Sequence[str] | None = None, last: Any = None) -> Program:
    """A random program of 1 to ``max_ops`` operations on 1 to ``max_inputs`` inputs.

    ``last`` (an elementwise rule or the name of a structured operation) forces the final
    operation, whose value is then the program's output: every rule can be exercised.
    """
    structured = list(STRUCTURED if structured is None else structured)
    rules = elementwise_rules()
    builder = _Builder(draw, draw(inputs(max_inputs)))
    n_ops = draw(st.integers(0 if last is not None else 1, max_ops))
    attempts = 0
    with np.errstate(all="ignore"):
        while len(builder.program.steps) < n_ops and attempts < 3 * n_ops:
            attempts += 1
            if draw(st.integers(0, 2)) and rules:
                builder.elementwise(draw(st.sampled_from(rules)))
            else:
                builder.structured(draw(st.sampled_from(structured)))
        if last is not None:
            before = len(builder.program.steps)
            for _ in range(5):
                if isinstance(last, str):
                    builder.structured(last)
                else:
                    builder.elementwise(last)
                if len(builder.program.steps) > before:
                    break
            else:
                reject()
            builder.program.output = len(builder.values) - 1
            return builder.program
        if not builder.program.steps:
            builder.elementwise(rule_generator.get_rule(np.sin))
    # return the last value, or now and then an earlier one
    n_values = len(builder.values)
    last_index = n_values - 1
    builder.program.output = last_index if draw(st.integers(0, 4)) else draw(
        st.integers(len(builder.program.inputs), last_index))
    return builder.program


# -- finite differences ------------------------------------------------------------------------


def _differences(f: Callable[..., Any], args: Sequence[Any], argnum: int,
                 scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Central differences and the gap between the one-sided ones, w.r.t. ``args[argnum]``,
    with steps ``scale * 6e-6 * max(1, |x|)``; both shaped ``out.shape + in.shape``."""
    args = [np.array(a, dtype=np.float64) for a in args]
    x = args[argnum]
    flat = x.reshape(-1)
    f0 = np.asarray(f(*args))
    central, gap = [], []
    for k in range(flat.size):
        h = scale * 6e-6 * max(1.0, abs(flat[k]))
        plus, minus = flat.copy(), flat.copy()
        plus[k] += h
        minus[k] -= h
        fp = np.asarray(f(*args[:argnum], plus.reshape(x.shape), *args[argnum + 1:]))
        fm = np.asarray(f(*args[:argnum], minus.reshape(x.shape), *args[argnum + 1:]))
        central.append(((fp - fm) / (2 * h)).reshape(-1))
        gap.append((((fp - f0) - (f0 - fm)) / h).reshape(-1))
    if not central:
        zeros = np.zeros(f0.shape + x.shape)
        return zeros, zeros
    shape = f0.shape + x.shape
    return (np.stack(central, axis=-1).reshape(shape), np.stack(gap, axis=-1).reshape(shape))


def central_differences(f: Callable[..., Any], args: Sequence[Any], argnum: int,
                        scale: float = 1.0) -> np.ndarray:
    """Central-difference Jacobian w.r.t. ``args[argnum]`` with steps ``scale * 6e-6 * max(1,
    |x|)``: shape ``out.shape + in.shape``."""
    return _differences(f, args, argnum, scale)[0]


def reliable_differences(f: Callable[..., Any], args: Sequence[Any], argnum: int,
                         rtol: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """The finite-difference Jacobian and a mask of the entries where it can be trusted.

    An entry is trusted when the one-sided differences agree (no kink of max, abs or clip
    within a step, where a derivative is a convention rather than a limit) and two step
    sizes give the same central difference (not too badly conditioned).
    """
    with np.errstate(all="ignore"):
        fine, gap = _differences(f, args, argnum, 1.0)
        coarse = _differences(f, args, argnum, 4.0)[0]
    size = 1.0 + np.abs(fine)
    scale = 1.0 + np.max(np.abs(fine), initial=0.0)
    ok = (np.isfinite(fine) & (np.abs(gap) <= 1e-3 * size)
          & (np.abs(fine - coarse) <= 0.1 * rtol * scale + rtol * np.abs(fine)))
    return fine, ok


def assert_close_where(actual: np.ndarray, expected: np.ndarray, ok: np.ndarray, rtol: float,
                       atol: float, what: str) -> None:
    """Compare two Jacobians on the entries ``ok``; the message names the worst entry."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shapes {actual.shape} != {expected.shape}"
    err = np.where(ok, np.abs(actual - expected) - (atol + rtol * np.abs(expected)), -np.inf)
    if err.size and np.max(err) > 0:
        where = np.unravel_index(int(np.argmax(err)), err.shape)
        raise AssertionError(
            f"{what}: largest discrepancy at {where}: {actual[where]!r} vs {expected[where]!r} "
            f"(rtol={rtol}, atol={atol})"
        )


__all__ = [
    "Program",
    "Step",
    "STRUCTURED",
    "assert_close_where",
    "central_differences",
    "elementwise_rules",
    "inputs",
    "programs",
    "reliable_differences",
]
