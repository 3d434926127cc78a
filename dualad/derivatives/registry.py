"""Turning derivative tables into rules: one :class:`ElementwiseRule` per function.

Each rule holds the function, its argument names, the compiled derivative function
``derivatives(*args, y)`` (numpy calls only, so it also runs on graph nodes and dual
numbers, which gives higher derivatives) and a lazily compiled Numba kernel that fuses
the value with its partials. Registering a rule calls every :func:`on_rule_registered`
hook: each mode attaches its rule there (reverse mode a ``gradient`` method for
``Broadcasted[f]``, forward mode a tangent method), so this module knows neither mode.

Example:
    >>> import numpy as np, dualad as ad
    >>> def softplus(x):
    ...     return np.log1p(np.exp(x))
    >>> softplus = ad.define_rule(softplus, args=("x",), derivatives=("1 / (1 + exp(-x))",))
    >>> float(ad.grad(softplus)(0.0))
    0.5
"""

from __future__ import annotations

import ast
import importlib.util
import operator
import sys
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import plum

from ..core.dispatch import forward, register_rule_loader
from ..core.errors import RuleTableError
from ..core.operators import Broadcasted, Operator, function_key
from ..core.tracing import primitive
from .codegen import import_kernel_module, kernel_cache_directory
from .language import (
    FUNCTIONS,
    NO_CLOSED_FORM,
    Derivative,
    check_arg_names,
    compile_derivatives,
    constant_value,
    kernel_masks,
    kernel_module_source,
    kernel_name,
    parse_expression,
    set_function,
)
from .tables import TABLES, Domain, RuleEntry, function_arity, load_table, parse_domain
from .tables import table_path as _table_path

__all__ = [
    "ElementwiseRule",
    "define_rule",
    "get_rule",
    "kernel_cache_directory",
    "load_deferred_tables",
    "refused_positions",
    "not_differentiable_message",
    "on_rule_registered",
    "define_elementwise_rule",
    "define_table_rules",
    "rules",
    "traced_function",
    "undefined_derivative_error",
]

# Functions that can divide by zero or leave their domain where the rule's function did
# not (sqrt'(0) = 0.5 / 0); rules calling them, or dividing by or raising to a
# non-constant, evaluate their derivatives with numpy's divide/invalid warnings off.
_RISKY_FUNCTIONS = frozenset(
    (
        "log", "log2", "log10", "log1p", "sqrt", "arcsin", "arccos", "arccosh", "arctanh",
        "power", "float_power", "reciprocal", "floor_divide", "remainder", "fmod",
    )
)


def _may_warn(derivs: Sequence[Derivative]) -> bool:
    """Whether evaluating the derivatives may emit numpy divide/invalid warnings."""

    def risky(node: ast.AST) -> bool:
        if isinstance(node, ast.expr) and constant_value(node) is not None:
            return False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if constant_value(node.right) is None:
                return True
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            p = constant_value(node.right)
            if p is None or p < 0 or p != int(p):
                return True
        elif isinstance(node, ast.Call) and node.func.id in _RISKY_FUNCTIONS:  # type: ignore[attr-defined]
            return True
        return any(risky(child) for child in ast.iter_child_nodes(node))

    return any(d.tree is not None and risky(d.tree) for d in derivs)


class ElementwiseRule:
    """The derivative rule of one elementwise function.

    Attributes:
        function: what calls on traced values record as ``Broadcasted[function]`` (the
            ufunc itself, or the traced wrapper of a plain Python function).
        name, arg_names, notes, source: from the table entry (or ``define_rule``).
        expressions: the checked :class:`~dualad.derivatives.language.Derivative` per argument.
        derivatives: ``derivatives(*args, y)`` -> one partial per argument (``None`` for a
            non-differentiable one); each broadcasts against the output.
        domain: ``{arg: Domain}`` where tests draw points, or ``None``.

    Example:
        >>> import numpy as np
        >>> from dualad.derivatives.registry import get_rule
        >>> rule = get_rule(np.tanh)
        >>> rule.derivatives(0.0, np.tanh(0.0))
        (np.float64(1.0),)
    """

    __slots__ = (
        "function", "name", "arg_names", "expressions", "derivatives", "domain", "notes",
        "source", "numpy_name", "may_warn", "scalar_value", "quiet_when", "quiet_value",
        "_kernels", "_kernel_module",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        name: str,
        arg_names: Sequence[str],
        expressions: Sequence[Derivative],
        *,
        domain: Mapping[str, Domain] | None = None,
        notes: str = "",
        source: str = "<user>",
        numpy_name: str | None = None,
    ) -> None:
        self.function = function
        self.name = name
        self.arg_names = tuple(arg_names)
        self.expressions = tuple(expressions)
        self.derivatives = compile_derivatives(
            self.arg_names, self.expressions, name=name, table=source
        )
        self.domain = dict(domain) if domain is not None else None
        self.notes = notes
        self.source = source
        self.numpy_name = numpy_name
        self.may_warn = _may_warn(self.expressions)
        self._kernels: dict[tuple[bool, ...], Any] = {}
        self._kernel_module: Any = None
        #: A Python operator that computes the function on two floats exactly as numpy
        #: does (the table's ``scalar_operator``), else ``None``.
        self.scalar_value: Callable[..., Any] | None = None
        #: ``quiet_when(*args)``: True when, on these numbers, neither the function nor
        #: its derivatives can warn (divide, invalid), so ``np.errstate`` can be skipped;
        #: None when the table names no such condition (see ``quiet_condition``).
        self.quiet_when: Callable[..., bool] | None = None
        #: A Python operator that computes the function on two numbers exactly as numpy
        #: does where ``quiet_when`` holds (``/``: a non-zero divisor), else ``None``.
        self.quiet_value: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        exprs = ", ".join(repr(d.text) for d in self.expressions)
        return f"ElementwiseRule({self.name}, args={self.arg_names}, derivatives=({exprs}))"

    @property
    def differentiable(self) -> tuple[bool, ...]:
        """Per argument: whether it has a derivative."""
        return tuple(d.differentiable for d in self.expressions)

    @property
    def kernel_source(self) -> str | None:
        """The Numba module source of this rule's fused kernels, or ``None`` if it has none."""
        if self.numpy_name is None:
            return None
        return kernel_module_source(self.numpy_name, self.arg_names, self.expressions)

    def kernel(self, mask: Sequence[bool] | None = None) -> Callable[..., None] | None:
        """The Numba kernel for the arguments carrying partials (``mask``; default: all).

        Imports numba and writes the kernel module on first use; ``None`` when the rule has
        no kernel (see :func:`~dualad.derivatives.language.kernel_module_source`). Calling
        convention: ``kernel(x1, x1p, x2, x2p, ..., out, outp)`` where each argument
        carrying partials is followed by them; values and ``out`` are float64 of shape
        ``(n,)``, partials and ``outp`` of shape ``(n, k)``, all C-contiguous.
        """
        key = tuple(True for _ in self.arg_names) if mask is None else tuple(map(bool, mask))
        try:
            return self._kernels[key]
        except KeyError:
            pass
        if len(key) != len(self.arg_names) or key not in kernel_masks(len(key)):
            raise ValueError(f"{self.name}: no kernel for mask {key}")
        module = self._kernel_module
        if module is None:
            source = self.kernel_source
            if source is None or importlib.util.find_spec("numba") is None:
                module = False
            else:
                module = import_kernel_module(source)
            self._kernel_module = module
        fn = getattr(module, kernel_name(key), None) if module is not False else None
        self._kernels[key] = fn
        return fn

    def fused(
        self, values: Sequence[Any], partials: Sequence[np.ndarray | None]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Value and partials together: ``values`` broadcast to a shape ``S``; ``partials[i]``
        is ``None`` or shaped ``shape(values[i]) + (k,)``. Returns ``(out, out_partials)``
        of shapes ``S`` and ``S + (k,)``, using the Numba kernel when there is one.

        Example:
            >>> import numpy as np
            >>> from dualad.derivatives.registry import get_rule
            >>> out, outp = get_rule(np.multiply).fused((2.0, 3.0), (np.eye(2)[0], None))
            >>> float(out), outp.tolist()
            (6.0, [3.0, 0.0])
        """
        if len(values) != len(self.arg_names) or len(partials) != len(values):
            raise ValueError(
                f"{self.name} takes {len(self.arg_names)} argument(s); got {len(values)} "
                f"values and {len(partials)} partials"
            )
        mask = tuple(p is not None for p in partials)
        if not any(mask):
            raise ValueError(f"{self.name}: at least one argument must carry partials")
        k = next(np.shape(p)[-1] for p in partials if p is not None)
        kern = self.kernel(mask) if all(self.differentiable[i] for i, m in enumerate(mask) if m) \
            else None
        if kern is None:
            return self._fused_numpy(values, partials, k)
        arrays = np.broadcast_arrays(*[np.asarray(v, dtype=np.float64) for v in values])
        shape = arrays[0].shape
        n = arrays[0].size
        call: list[np.ndarray] = []
        for v, p in zip(arrays, partials):
            call.append(np.ascontiguousarray(v).reshape(n))
            if p is not None:
                full = np.broadcast_to(np.asarray(p, dtype=np.float64), shape + (k,))
                call.append(np.ascontiguousarray(full).reshape(n, k))
        out = np.empty(n)
        outp = np.empty((n, k))
        kern(*call, out, outp)
        return out.reshape(shape), outp.reshape(shape + (k,))

    def _fused_numpy(
        self, values: Sequence[Any], partials: Sequence[np.ndarray | None], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        out = np.asarray(self.function(*values))
        with np.errstate(divide="ignore", invalid="ignore"):
            ds = self.derivatives(*values, out)
        outp = np.zeros(out.shape + (k,))
        for d, e, p in zip(ds, self.expressions, partials):
            if p is not None and d is not None and not e.is_zero:
                outp = outp + np.expand_dims(d, -1) * p
        return out, outp


# -- registry and registration ---------------------------------------------------------

_RULES: dict[Hashable, ElementwiseRule] = {}
_ORIGINALS: dict[Hashable, Callable[..., Any]] = {}  # plain function -> its traced wrapper
_HOOKS: list[Callable[[ElementwiseRule], Any]] = []
_registry_lock = threading.RLock()


def get_rule(f: Callable[..., Any]) -> ElementwiseRule | None:
    """The rule of ``f`` (a ufunc, a traced wrapper, or the function it wraps), or ``None``."""
    key = function_key(f)
    rule = _RULES.get(key)
    if rule is None and key in _ORIGINALS:
        rule = _RULES.get(function_key(_ORIGINALS[key]))
    return rule


def rules() -> list[ElementwiseRule]:
    """Every registered rule, in registration order."""
    return list(_RULES.values())


def traced_function(f: Callable[..., Any]) -> Callable[..., Any]:
    """The function to call on traced values for ``f``: ``f`` itself for a ufunc, else the
    traced wrapper made when its rule was registered (e.g. for ``scipy.special.polygamma``).
    """
    return _ORIGINALS.get(function_key(f), f)


def on_rule_registered(callback: Callable[[ElementwiseRule], Any]) -> Callable[..., Any]:
    """Call ``callback(rule)`` for every rule registered so far and every later one.

    This is where forward mode attaches its tangent rules. Usable as a decorator.

    Example:
        >>> from dualad.derivatives.registry import forget_rule_hook, on_rule_registered
        >>> names = []
        >>> hook = on_rule_registered(lambda rule: names.append(rule.name))
        >>> "sin" in names
        True
        >>> forget_rule_hook(hook)
    """
    with _registry_lock:
        _HOOKS.append(callback)
        existing = list(_RULES.values())
    for rule in existing:
        callback(rule)
    return callback


def forget_rule_hook(callback: Callable[[ElementwiseRule], Any]) -> None:
    """Stop calling ``callback`` for rules registered from now on."""
    with _registry_lock:
        _HOOKS.remove(callback)


def operator_type(f: Callable[..., Any]) -> type:
    """The operator type a rule for ``f`` dispatches on: ``Broadcasted[f]``, or the
    operator of a primitive wrapper."""
    op = getattr(f, "__dualad_operator__", None)
    if isinstance(op, Operator):
        return type(op)
    return Broadcasted[f]  # type: ignore[misc]  # __class_getitem__, which mypy does not read


def undefined_derivative_error(rule: ElementwiseRule, index: int) -> TypeError:
    """The error for differentiating ``rule``'s function with respect to an argument whose
    derivative the rule declares ``None`` (not differentiable)."""
    name = rule.arg_names[index] if index < len(rule.arg_names) else str(index)
    return TypeError(
        f"dualad: {rule.name}'s rule declares no derivative (None) for its argument "
        f"{name!r} (position {index}), but that argument depends on the variable being "
        f"differentiated. Pass it as a constant (ad.value(...)) or give the rule a "
        f"derivative expression for {name!r} (ad.define_rule(..., derivatives=(...)))."
    )


def derivative_kind(d: Derivative) -> str:
    """How a rule uses a derivative: ``none``, ``refuse`` (no closed form), ``zero``, ``one``,
    ``minus_one`` or ``expr``."""
    if d.tree is None:
        return "refuse" if d.text == NO_CLOSED_FORM else "none"
    if d.constant == 0.0:
        return "zero"
    if d.constant == 1.0:
        return "one"
    if d.constant == -1.0:
        return "minus_one"
    return "expr"


def refused_positions(f: Callable[..., Any]) -> tuple[int, ...] | None:
    """The arguments of ``f`` whose derivative has no closed form (``None``: no rule)."""
    rule = get_rule(f)
    if rule is None:
        return None
    return tuple(i for i, d in enumerate(rule.expressions) if derivative_kind(d) == "refuse")


def not_differentiable_message(rule: ElementwiseRule, index: int) -> str:
    """The error for differentiating ``rule.function`` in an argument it has no rule for."""
    if rule.numpy_name is not None:
        label = f"np.{rule.name}"
    elif str(rule.source).endswith("scipy_special.toml"):
        label = f"scipy.special.{rule.name}"
    else:
        label = rule.name
    arg = rule.arg_names[index]
    return (
        f"dualad: {label} has no closed-form derivative in its argument {arg!r} "
        f"(argument {index}), so dualad cannot differentiate it there. Pass a constant there "
        f"(a plain number or array), and differentiate with respect to the other "
        f"arguments only."
    )


def _add(rule: ElementwiseRule) -> ElementwiseRule:
    with _registry_lock:
        _RULES[function_key(rule.function)] = rule
        hooks = list(_HOOKS)
    for hook in hooks:
        hook(rule)
    return rule


def _numpy_name(f: Callable[..., Any]) -> str | None:
    name = getattr(f, "__name__", None)
    if isinstance(f, np.ufunc) and name and getattr(np, name, None) is f:
        return name
    return None


def _traced(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` if calls on traced values record it already (a ufunc, a primitive), else a
    traced elementwise wrapper of it (remembered, so ``get_rule(f)`` finds the rule)."""
    if isinstance(f, np.ufunc) or isinstance(getattr(f, "__dualad_operator__", None), Operator):
        return f
    key = function_key(f)
    if key not in _ORIGINALS:
        _ORIGINALS[key] = primitive(f, elementwise=True)
    return _ORIGINALS[key]


def define_elementwise_rule(
    func: Callable[..., Any],
    arg_names: Sequence[str],
    derivative_exprs: Sequence[str | None | Derivative],
    *,
    domain: Mapping[str, Any] | None = None,
    notes: str = "",
    source: str = "<user>",
    name: str | None = None,
    scalar_operator: str | None = None,
    quiet_when: str | None = None,
) -> ElementwiseRule:
    """Check, compile and register the rule of ``func``; returns the :class:`ElementwiseRule`.

    ``derivative_exprs`` holds one expression per argument (``None`` or
    ``"not differentiable"`` for none). The reverse-mode method for
    ``Broadcasted[traced_function(func)]`` is added and the :func:`on_rule_registered`
    hooks run. Registering ``func`` again replaces its rule.
    """
    name = name or getattr(func, "__name__", None) or repr(func)
    if isinstance(func, np.ufunc) and (func.nout != 1 or func.signature is not None):
        raise ValueError(
            f"{name}: only single-output elementwise ufuncs take rules (nout={func.nout}, "
            f"signature={func.signature!r})"
        )
    arg_names = tuple(arg_names)
    check_arg_names(arg_names, table=source, entry=name)
    exprs = tuple(derivative_exprs)
    if len(exprs) != len(arg_names):
        raise RuleTableError(
            f"{source}, entry {name!r}: {len(arg_names)} argument(s) {list(arg_names)} but "
            f"{len(exprs)} derivative(s)"
        )
    parsed = tuple(
        e if isinstance(e, Derivative) else parse_expression(e, arg_names, table=source, entry=name)
        for e in exprs
    )
    if domain is not None and not all(isinstance(v, Domain) for v in domain.values()):
        domain = parse_domain(domain, arg_names, table=source, entry=name)
    traced = _traced(func)
    rule = ElementwiseRule(
        traced, name, arg_names, parsed, domain=domain, notes=notes, source=source,
        numpy_name=_numpy_name(func),
    )
    if quiet_when is not None:
        rule.quiet_when = quiet_condition(quiet_when)
    if scalar_operator in _QUIET_OPERATORS:
        rule.quiet_value = _QUIET_OPERATORS[scalar_operator]
    elif scalar_operator is not None:
        rule.scalar_value = _PYTHON_OPERATORS[scalar_operator]
    return _add(rule)


def define_rule(
    f: Callable[..., Any],
    args: Sequence[str] = ("x",),
    derivatives: Sequence[str | None] = (),
    *,
    domain: Mapping[str, Any] | None = None,
    notes: str = "",
) -> Callable[..., Any]:
    """Give the elementwise function ``f`` derivatives written in the rule language.

    Returns the function to call: ``f`` itself for a ufunc (or a primitive), else a
    traced wrapper of ``f`` (calls with traced arguments record ``Broadcasted[wrapper]``).
    Expressions use the argument names, ``y`` (the output) and numpy functions; ``None``
    marks an argument that is not differentiable.

    Example:
        >>> import numpy as np, dualad as ad
        >>> def sigmoid(x):
        ...     return 1 / (1 + np.exp(-x))
        >>> sigmoid = ad.define_rule(sigmoid, args=("x",), derivatives=("y * (1 - y)",))
        >>> float(ad.grad(sigmoid)(0.0))
        0.25
    """
    label = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
    if not callable(f):
        raise TypeError(f"define_rule: {label} is not callable")
    if isinstance(args, str):
        args = (args,)
    if isinstance(derivatives, str):
        derivatives = (derivatives,)
    args, derivatives = tuple(args), tuple(derivatives)
    if len(derivatives) != len(args):
        raise ValueError(
            f"define_rule({label}): {len(args)} argument(s) {list(args)} need "
            f"{len(args)} derivative(s), got {len(derivatives)}"
        )
    arity = function_arity(f)
    if isinstance(f, np.ufunc) and arity != len(args):
        raise ValueError(
            f"define_rule({label}): the ufunc takes {arity} argument(s), args lists {len(args)}"
        )
    rule = define_elementwise_rule(f, args, derivatives, domain=domain, notes=notes,
                                     name=getattr(f, "__name__", label))
    if rule.function is not f and type(f).__module__.split(".")[0] == "numba":
        # a numba.njit helper: numba code that calls the returned wrapper (a model that
        # uses it as a global) still compiles, typing it as the helper itself
        import numba

        rule.function._numba_type_ = numba.typeof(f)  # type: ignore[attr-defined]
    return rule.function


# -- the built-in tables ---------------------------------------------------------------

_loaded: set[str] = set()
_TABLES_READ: dict[str, Any] = {}


_PYTHON_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
# exact (numpy's IEEE result) only where the rule's quiet_when holds
_QUIET_OPERATORS = {"/": operator.truediv}
_NUMBERS = frozenset((float, np.float64, int))
_INF = float("inf")


def _positive(x: Any, y: Any = None) -> bool:
    if y is not None and not (type(y) in _NUMBERS and y > 0):
        return False
    return type(x) in _NUMBERS and x > 0


def _nonzero_divisor(x: Any, y: Any) -> bool:
    return type(x) in _NUMBERS and type(y) in _NUMBERS and y != 0 and -_INF < y < _INF


_TINY = float(np.finfo(np.float64).tiny)  # below it 1 / x overflows


def _positive_base(x: Any, p: Any) -> bool:
    return type(x) in _NUMBERS and type(p) in _NUMBERS and _TINY <= x < _INF and \
        -_INF < p < _INF


def quiet_condition(name: str) -> Callable[..., bool]:
    """The predicate of a table's ``quiet_when`` condition, on number arguments (any
    other argument, an array for one, makes it False).

    Example:
        >>> quiet_condition("nonzero divisor")(1.0, 0.0), quiet_condition("positive")(2.0)
        (False, True)
    """
    return {"positive": _positive, "nonzero divisor": _nonzero_divisor,
            "positive base": _positive_base}[name]


def _register_scalar_operator(func: Callable[..., Any], symbol: str) -> None:
    """Evaluate ``func`` on two Python/numpy floats with the Python operator ``symbol``.

    numpy's binary ufuncs cost about a microsecond on scalars, the operator a tenth of
    that; the table marks the entries where both give the same IEEE result.
    """
    python_operator = _PYTHON_OPERATORS[symbol]
    op_type = operator_type(func)

    def scalar_value(op: Any, x: Any, y: Any):
        return python_operator(x, y)

    for types in ((float, float), (float, int), (int, float)):
        forward.register(scalar_value, plum.Signature(op_type, *types), builtin=True)


def _register_entry(entry: RuleEntry) -> ElementwiseRule:
    rule = define_elementwise_rule(
        entry.function, entry.arg_names, entry.derivatives, domain=entry.domain,
        notes=entry.notes, source=entry.source, name=entry.name,
        scalar_operator=entry.scalar_operator, quiet_when=entry.quiet_when,
    )
    if entry.scalar_operator in _PYTHON_OPERATORS:
        _register_scalar_operator(entry.function, entry.scalar_operator)
    if entry.module != "numpy" and rule.function is not entry.function and \
            entry.attribute in FUNCTIONS:  # (a function no expression calls needs nothing)
        set_function(entry.attribute, rule.function)  # expressions call the traced wrapper
    return rule


def _load(stem: str) -> list[ElementwiseRule]:
    with _registry_lock:
        if stem in _loaded:
            return []
        table = load_table(_table_path(stem))
        _TABLES_READ[stem] = table
        registered = [_register_entry(e) for e in table.entries]
        _loaded.add(stem)
        return registered


def define_table_rules(scipy: bool | None = None) -> list[ElementwiseRule]:
    """Register the built-in tables (once); returns the rules registered by this call.

    The numpy table always; the scipy.special table if ``scipy`` is true, or, by default,
    if ``scipy.special`` has been imported already (importing it costs a third of a
    second). Otherwise it waits for :func:`load_deferred_tables`.
    """
    registered = _load("numpy_ufuncs")
    if scipy or (scipy is None and "scipy.special" in sys.modules):
        registered += _load("scipy_special")
    return registered


def load_deferred_tables() -> bool:
    """Register tables held back until their module was imported; ``True`` if any were.

    Call it when a rule is missing (e.g. for a ``scipy.special`` function), then retry.
    """
    registered = False
    for stem, module in TABLES.items():
        if stem not in _loaded and module in sys.modules:
            registered = bool(_load(stem)) or registered
    return registered


register_rule_loader(load_deferred_tables)


def not_differentiable_functions() -> dict[Any, str]:
    """Functions the loaded tables declare not differentiable: ``{function: reason}``.

    Example:
        >>> import numpy as np
        >>> from dualad.derivatives.registry import not_differentiable_functions
        >>> not_differentiable_functions()[np.less]
        'comparison: boolean output'
    """
    found: dict[Any, str] = {}
    for stem in sorted(_loaded):
        table = _TABLES_READ[stem]
        for name, reason in table.not_differentiable.items():
            f = _function_of(table.module, name)
            if f is not None:
                found[f] = reason
    return found


def _function_of(module: str, name: str) -> Any:
    mod = sys.modules.get(module)
    return getattr(mod, name, None) if mod is not None else None
