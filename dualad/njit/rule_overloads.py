"""Arithmetic and ``math``/``np`` functions of dual numbers, generated from the rules tables.

Every overload here is a thin shell: when Numba types a call with a dual argument, it
looks up the *current* rule of the function (:func:`dualad.derivatives.registry.get_rule`), and
writes a scalar body from the rule's derivative expressions — the same expressions reverse
mode and the forward kernels use (one table, three modes). A rule added later with
``ad.define_rule`` is therefore picked up too; a function without a rule, or whose
derivative calls something Numba cannot compile, is a typing error naming the rule.

The only per-function knowledge here is spelling: which rule ``math.asin`` or ``a ** b``
means (:data:`SPELLINGS`).

Example:
    >>> import numba, numpy as np
    >>> from dualad.njit.dual_type import make_dual
    >>> @numba.njit
    ... def d_sin(x):
    ...     return np.sin(make_dual(x, (1.0,))).p[0]
    >>> d_sin(0.0)
    1.0
"""

from __future__ import annotations

import builtins
import hashlib
import math
import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import types
from numba.extending import overload

from ..derivatives.language import NUMBA_UFUNCS, OUTPUT_NAME, numba_scalar_source
from ..derivatives.registry import define_table_rules, derivative_kind, get_rule, on_rule_registered
from ..derivatives.tables import TABLES, table_path
from .dual_type import (
    OVERLOAD_OPTIONS,
    DualType,
    dual_constant,
    dual_linear,
    make_dual,
    user_error,
)

__all__ = ["SPELLINGS", "rule_fingerprint", "rule_implementation", "user_rule_stub"]

_NUMBER = (types.Number, types.Boolean)

# Derivatives follow numpy at poles (sqrt'(0) = inf), not Python (ZeroDivisionError).
_RULE_OPTIONS = {**OVERLOAD_OPTIONS, "error_model": "numpy"}

# How nopython code spells a rule's function: (callable, rule owner, rule attribute,
# value template). The template computes the value on float64 scalars.
_OPERATORS: list[tuple[Callable[..., Any], str, str]] = [
    (operator.add, "add", "({0} + {1})"),
    (operator.iadd, "add", "({0} + {1})"),
    (operator.sub, "subtract", "({0} - {1})"),
    (operator.isub, "subtract", "({0} - {1})"),
    (operator.mul, "multiply", "({0} * {1})"),
    (operator.imul, "multiply", "({0} * {1})"),
    (operator.truediv, "divide", "({0} / {1})"),
    (operator.itruediv, "divide", "({0} / {1})"),
    (operator.pow, "power", "({0} ** {1})"),
    (operator.ipow, "power", "({0} ** {1})"),
    (operator.mod, "remainder", "({0} % {1})"),
    (operator.floordiv, "floor_divide", "({0} // {1})"),
    (operator.neg, "negative", "(-{0})"),
    (operator.pos, "positive", "(+{0})"),
    (builtins.abs, "absolute", "abs({0})"),
    (builtins.pow, "power", "({0} ** {1})"),
]

# math.<name> -> (table module, rule's function name in it). Functions returning an int
# in Python (floor, ceil, trunc) give the plain value: their derivative is zero.
_MATH = {
    "sin": ("numpy", "sin"), "cos": ("numpy", "cos"), "tan": ("numpy", "tan"),
    "asin": ("numpy", "arcsin"), "acos": ("numpy", "arccos"), "atan": ("numpy", "arctan"),
    "atan2": ("numpy", "arctan2"), "sinh": ("numpy", "sinh"), "cosh": ("numpy", "cosh"),
    "tanh": ("numpy", "tanh"), "asinh": ("numpy", "arcsinh"),
    "acosh": ("numpy", "arccosh"), "atanh": ("numpy", "arctanh"), "exp": ("numpy", "exp"),
    "expm1": ("numpy", "expm1"), "log": ("numpy", "log"), "log1p": ("numpy", "log1p"),
    "log10": ("numpy", "log10"), "log2": ("numpy", "log2"), "sqrt": ("numpy", "sqrt"),
    "fabs": ("numpy", "fabs"), "hypot": ("numpy", "hypot"), "pow": ("numpy", "power"),
    "copysign": ("numpy", "copysign"), "fmod": ("numpy", "fmod"),
    "degrees": ("numpy", "rad2deg"), "radians": ("numpy", "deg2rad"),
    "floor": ("numpy", "floor"), "ceil": ("numpy", "ceil"), "trunc": ("numpy", "trunc"),
    "erf": ("scipy.special", "erf"), "erfc": ("scipy.special", "erfc"),
    "gamma": ("scipy.special", "gamma"), "lgamma": ("scipy.special", "gammaln"),
}
_INT_VALUED = frozenset(("floor", "ceil", "trunc"))


def _spellings() -> list[tuple[Callable[..., Any], str, str, str, bool]]:
    """``(callable, table module, rule function name, value template, int-valued)``."""
    out = [(fn, "numpy", name, tmpl, False) for fn, name, tmpl in _OPERATORS]
    for mname, (module, name) in _MATH.items():
        fn = getattr(math, mname, None)
        if fn is not None:
            arity = 2 if mname in ("atan2", "hypot", "pow", "copysign", "fmod") else 1
            tmpl = f"math.{mname}(" + ", ".join(f"{{{i}}}" for i in range(arity)) + ")"
            out.append((fn, module, name, tmpl, mname in _INT_VALUED))
    for name in sorted(NUMBA_UFUNCS):
        fn = getattr(np, name, None)
        if isinstance(fn, np.ufunc) and fn.nin in (1, 2):
            tmpl = f"np.{name}(" + ", ".join(f"{{{i}}}" for i in range(fn.nin)) + ")"
            out.append((fn, "numpy", name, tmpl, False))
    return out


#: Every callable given a dual-number overload, with the rule it means.
SPELLINGS = _spellings()


def _rule_for(module: str, name: str) -> Any:
    if module == "numpy":
        define_table_rules()
        return get_rule(getattr(np, name))
    import scipy.special  # only when nopython code calls math.erf & co. on a dual

    define_table_rules(scipy=True)
    return get_rule(getattr(scipy.special, name))


def _tables_text() -> str:
    return "\n".join(table_path(stem).read_text() for stem in sorted(TABLES))


_USER_RULES: dict[str, str] = {}
_FINGERPRINT: dict[str, Any] = {"digest": None}


def _note_rule(rule: Any) -> None:
    if rule.source == "<user>":
        texts = "; ".join(d.text for d in rule.expressions)
        _USER_RULES[rule.name] = f"{rule.name}({', '.join(rule.arg_names)}): {texts}"
        _FINGERPRINT["digest"] = None


def rule_fingerprint() -> str:
    """A digest that changes when a rule changes (part of the disk-cache key): of the
    built-in tables' files and of the rules defined at run time.

    Example:
        >>> len(rule_fingerprint())
        64
    """
    digest = _FINGERPRINT["digest"]
    if digest is None:
        h = hashlib.sha256(_tables_text().encode())
        for name in sorted(_USER_RULES):
            h.update(b"\0" + _USER_RULES[name].encode())
        digest = _FINGERPRINT["digest"] = h.hexdigest()
    return digest


on_rule_registered(_note_rule)


_lock = threading.Lock()
_IMPLS: dict[tuple, Callable[..., Any]] = {}


def _is_dual(t: types.Type) -> bool:
    return isinstance(t, DualType)


def rule_implementation(
    rule: Any, value_template: str, arg_types: tuple[types.Type, ...], *,
    label: str, plain_result: bool = False, namespace: dict[str, Any] | None = None,
) -> Callable[..., Any] | None:
    """A Python function Numba compiles for ``rule`` at these argument types.

    ``value_template`` spells the value on floats (``"np.sin({0})"``); arguments that are
    dual numbers contribute ``derivative * partials``. ``None`` when no argument is dual
    or an argument is neither a dual nor a number. Raises a typing error naming the rule
    when a derivative cannot be compiled or a dual reaches a non-differentiable argument.
    """
    if len(arg_types) != len(rule.arg_names):
        return None
    if not all(_is_dual(t) or isinstance(t, _NUMBER) for t in arg_types):
        return None
    mask = tuple(_is_dual(t) for t in arg_types)
    if not any(mask):
        return None
    widths = {t.width for t in arg_types if _is_dual(t)}
    if len(widths) != 1:
        raise user_error(f"{label}: dual numbers of different widths {sorted(widths)}")
    width = widths.pop()
    for m, d, a in zip(mask, rule.expressions, rule.arg_names):
        if m and not d.differentiable:
            raise user_error(
                f"{label}: argument {a!r} of rule {rule.name!r} is not differentiable, but a "
                f"dual number (a value depending on the differentiated input) reaches it"
            )
    key = (id(rule), rule.expressions, value_template, mask, width, plain_result)
    with _lock:
        impl = _IMPLS.get(key)
        if impl is not None:
            return impl
    body = numba_scalar_source(rule.expressions, indent="    ")
    if body is None:
        texts = "; ".join(d.text for d in rule.expressions)
        raise user_error(
            f"missing-rule: the derivative of {label} (rule {rule.name!r}: {texts}) uses a "
            f"function Numba cannot compile; redefine it with ad.define_rule using numpy "
            f"functions only"
        )
    temps, exprs = body
    params = [f"_a{i}" for i in range(len(mask))]
    lines = [f"def impl({', '.join(params)}):"]
    for i, (m, a) in enumerate(zip(mask, rule.arg_names)):
        lines.append(f"    {a} = _a{i}.v" if m else f"    {a} = float(_a{i})")
    lines.append(f"    {OUTPUT_NAME} = float({value_template.format(*rule.arg_names)})")
    if plain_result:
        lines.append(f"    return {OUTPUT_NAME}")
    else:
        lines += temps
        terms = []
        for i, (m, d) in enumerate(zip(mask, rule.expressions)):
            kind = derivative_kind(d) if m else "zero"
            if kind == "zero":
                continue
            if kind == "expr":
                lines.append(f"    _d{i} = {exprs[i]}")
            coef = {"one": "1.0", "minus_one": "-1.0"}.get(kind, f"_d{i}")
            terms.append(f"{coef}, _a{i}, ")
        if terms:
            lines.append(f"    return dual_linear({OUTPUT_NAME}, ({''.join(terms)}))")
        else:
            lines.append(f"    return dual_constant({OUTPUT_NAME}, _a{mask.index(True)})")
    source = "\n".join(lines) + "\n"
    ns = {"np": np, "math": math, "dual_linear": dual_linear, "dual_constant": dual_constant,
          **(namespace or {})}
    exec(compile(source, f"<dualad njit rule {rule.name}>", "exec"), ns)  # noqa: S102
    impl = ns["impl"]
    impl.source = source
    with _lock:
        _IMPLS[key] = impl
    return impl


def _describe_call(label: str, arg_types: tuple[types.Type, ...]) -> str:
    names = ["dual" if _is_dual(t) else str(t) for t in arg_types]
    return f"{label}({', '.join(names)})"


def _register(fn: Callable[..., Any], module: str, name: str, template: str,
              plain: bool) -> None:
    label = (
        f"math.{fn.__name__}" if getattr(fn, "__module__", None) == "math"
        else f"np.{name}" if isinstance(fn, np.ufunc)
        else f"operator {getattr(fn, '__name__', name)}"
    )
    arity = template.count("{")

    def typer(*args):
        if not any(_is_dual(t) for t in args):
            return None
        if len(args) != arity:
            return None
        rule = _rule_for(module, name)
        if rule is None:
            raise user_error(
                f"missing-rule: {_describe_call(label, args)} has no derivative rule; add "
                f"one with ad.define_rule({'np.' if module == 'numpy' else module + '.'}"
                f"{name}, args=(...), derivatives=(...))"
            )
        impl = rule_implementation(rule, template, args, label=label, plain_result=plain)
        if impl is None:
            return None
        return impl

    if arity == 1:
        overload(fn, jit_options=_RULE_OPTIONS)(lambda _a0: typer(_a0))
    else:
        overload(fn, jit_options=_RULE_OPTIONS)(lambda _a0, _a1: typer(_a0, _a1))


_seen: set[int] = set()
for _fn, _module, _name, _template, _plain in SPELLINGS:
    if (id(_fn), _template.count("{")) in _seen:
        continue
    _seen.add((id(_fn), _template.count("{")))
    _register(_fn, _module, _name, _template, _plain)


# -- min and max of Python: one of the arguments, chosen on the values --------------------


def _choose(symbol: str):
    def typer_exec(a, b):
        if not (_is_dual(a) or _is_dual(b)):
            return None
        if not all(_is_dual(t) or isinstance(t, _NUMBER) for t in (a, b)):
            return None
        width = a.width if _is_dual(a) else b.width
        zeros = "(" + "0.0, " * width + ")"
        left = "a" if _is_dual(a) else f"make_dual(a, {zeros})"
        right = "b" if _is_dual(b) else f"make_dual(b, {zeros})"
        src = (
            "def choose(a, b):\n"
            f"    l = {left}\n"
            f"    r = {right}\n"
            f"    return l if l.v {symbol} r.v else r\n"
        )
        ns = {"make_dual": make_dual}
        exec(compile(src, "<dualad njit min/max>", "exec"), ns)  # noqa: S102
        return ns["choose"]

    return typer_exec


overload(builtins.max, jit_options=OVERLOAD_OPTIONS)(_choose(">="))
overload(builtins.min, jit_options=OVERLOAD_OPTIONS)(_choose("<="))


# -- functions with a rule from ad.define_rule, called inside nopython code ---------------


def user_rule_stub(rule: Any, value_function: Callable[..., Any]) -> Callable[..., Any]:
    """A function standing for ``rule``'s function inside the recompiled code.

    On plain numbers it calls ``value_function`` (a Numba-compilable version of the
    original); on dual numbers it adds the rule's derivatives.
    """
    params = ", ".join(f"_a{i}" for i in range(len(rule.arg_names)))
    ns: dict[str, Any] = {}
    src = f"def {rule.name}({params}):\n    raise NotImplementedError\n"
    exec(compile(src, f"<dualad njit stub {rule.name}>", "exec"), ns)  # noqa: S102
    stub = ns[rule.name]
    template = "_value(" + ", ".join(f"{{{i}}}" for i in range(len(rule.arg_names))) + ")"
    label = rule.name

    def typer(*args):
        if not any(_is_dual(t) for t in args):
            plain = f"def plain({params}):\n    return _value({params})\n"
            pns = {"_value": value_function}
            exec(compile(plain, f"<dualad njit plain {rule.name}>", "exec"), pns)  # noqa: S102
            return pns["plain"]
        return rule_implementation(rule, template, args, label=label,
                                   namespace={"_value": value_function})

    arity = len(rule.arg_names)
    shells = {
        1: lambda _a0: typer(_a0),
        2: lambda _a0, _a1: typer(_a0, _a1),
        3: lambda _a0, _a1, _a2: typer(_a0, _a1, _a2),
        4: lambda _a0, _a1, _a2, _a3: typer(_a0, _a1, _a2, _a3),
    }
    if arity not in shells:
        raise ValueError(f"{rule.name}: rules of {arity} arguments are not supported in njit code")
    overload(stub, jit_options=_RULE_OPTIONS)(shells[arity])
    return stub
