"""The little language of derivative expressions used by the rules tables.

A derivative is written as a numpy-style expression in the rule's argument names and
``y``, the function's output (so ``tanh' = 1 - y*y`` reuses the value). Allowed are
numeric constants, ``pi``, ``inf``, ``nan``, the operators ``+ - * / **`` and unary
``-``, calls of the functions in :data:`FUNCTIONS`, and comparisons (combined with
``&``, ``|``, ``~``) as the condition of ``where(...)``. Anything else is a
:class:`~dualad.core.errors.RuleTableError` naming the table, the entry and the expression.

Expressions are checked with :mod:`ast`, then translated twice: to Python built only from
numpy calls (so it also runs on graph nodes and dual numbers, which gives higher
derivatives), and to scalar Numba source for fused value-and-partials kernels.

Example:
    >>> from dualad.derivatives.language import compile_derivatives
    >>> d = compile_derivatives(("x",), ("1 - y*y",), name="tanh")
    >>> d(0.0, 0.0)
    (np.float64(1.0),)
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..core.errors import RuleTableError

__all__ = [
    "FUNCTIONS",
    "NOT_DIFFERENTIABLE",
    "NO_CLOSED_FORM",
    "NUMBA_SCALAR_FORMS",
    "NUMBA_UFUNCS",
    "OUTPUT_NAME",
    "SCIPY_FUNCTIONS",
    "Derivative",
    "check_arg_names",
    "constant_value",
    "compile_derivatives",
    "kernel_masks",
    "kernel_module_source",
    "kernel_name",
    "numba_scalar_call",
    "numba_scalar_source",
    "parse_expression",
    "set_function",
]

#: The marker, in a table or in ``define_rule``, of an argument with no derivative.
NOT_DIFFERENTIABLE = "not differentiable"
#: A derivative that exists but has no closed form: asking for it is an error.
NO_CLOSED_FORM = "no closed form"

#: The name of the function's output value inside an expression.
OUTPUT_NAME = "y"

_NUMPY_NAMES = frozenset(
    (
        "abs", "absolute", "fabs", "sign", "negative", "positive", "sqrt", "cbrt", "square",
        "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp",
        "logaddexp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "hypot", "sinh",
        "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "power",
        "float_power", "maximum", "minimum", "fmax", "fmin", "floor", "ceil", "trunc", "rint",
        "copysign", "ldexp", "heaviside", "floor_divide", "remainder", "fmod", "where", "isfinite",
        "isinf", "isnan", "signbit",
    )
)

#: Special functions an expression may call; they resolve in ``scipy.special`` on first use.
SCIPY_FUNCTIONS = frozenset(
    (
        "erf", "erfc", "erfcx", "erfinv", "erfcinv", "gamma", "gammaln", "digamma",
        "polygamma", "expit", "logit", "log_expit", "xlogy", "xlog1py", "i0", "i1", "i0e",
        "i1e", "j0", "j1", "y0", "y1", "k0", "k1", "ndtr", "ndtri", "log_ndtr",
        "betaln", "iv", "ive", "jv", "yv", "kv", "kve", "k0e", "k1e", "ellipk", "ellipe",
        "expn",
    )
)

#: Every function name an expression may call.
FUNCTIONS = frozenset(_NUMPY_NAMES) | SCIPY_FUNCTIONS

# Functions whose result is a boolean: usable only inside a condition.
_PREDICATES = frozenset({"isfinite", "isinf", "isnan", "signbit"})

_CONSTANTS = {"pi": math.pi, "inf": math.inf, "nan": math.nan}

_BINARY = {
    ast.Add: ("add", "+"),
    ast.Sub: ("subtract", "-"),
    ast.Mult: ("multiply", "*"),
    ast.Div: ("true_divide", "/"),
    ast.Pow: ("power", "**"),
}

_COMPARE = {
    ast.Eq: ("equal", "=="),
    ast.NotEq: ("not_equal", "!="),
    ast.Lt: ("less", "<"),
    ast.LtE: ("less_equal", "<="),
    ast.Gt: ("greater", ">"),
    ast.GtE: ("greater_equal", ">="),
}


class _Functions:
    """The functions compiled expressions call, looked up by name on first use.

    numpy names resolve to numpy, the others to ``scipy.special`` (imported only then);
    :func:`set_function` replaces one, e.g. by a traced wrapper of a non-ufunc function.
    """

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in _NUMPY_NAMES:
            fn = getattr(np, name)
        elif name in SCIPY_FUNCTIONS:
            import scipy.special

            fn = getattr(scipy.special, name)
        else:
            raise AttributeError(name)
        setattr(self, name, fn)
        return fn


_FN = _Functions()


def set_function(name: str, fn: Callable[..., Any]) -> None:
    """Make expressions call ``fn`` for ``name`` (used for traced non-ufunc functions)."""
    if name not in FUNCTIONS:
        raise KeyError(f"{name!r} is not a function of the rule language")
    setattr(_FN, name, fn)


def _fail(message: str, *, table: str, entry: str, text: str) -> RuleTableError:
    return RuleTableError(f"{table}, entry {entry!r}, expression {text!r}: {message}")


@dataclass(frozen=True)
class Derivative:
    """One checked derivative expression.

    ``tree`` is ``None`` for an argument that is not differentiable; ``constant`` is the
    expression's value when it does not depend on any name (``0`` for ``floor``).
    """

    text: str
    tree: ast.expr | None = field(repr=False)
    names: frozenset[str]
    constant: float | None

    @property
    def differentiable(self) -> bool:
        return self.tree is not None

    @property
    def is_zero(self) -> bool:
        return self.constant == 0.0


class _Checker:
    def __init__(self, arg_names: Sequence[str], table: str, entry: str, text: str) -> None:
        self.args = frozenset(arg_names)
        self.table, self.entry, self.text = table, entry, text
        self.names: set[str] = set()

    def fail(self, message: str) -> RuleTableError:
        return _fail(message, table=self.table, entry=self.entry, text=self.text)

    def value(self, node: ast.expr) -> None:
        """Check a numeric subexpression."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise self.fail(f"constant {node.value!r} is not a number")
        elif isinstance(node, ast.Name):
            if node.id in self.args or node.id == OUTPUT_NAME:
                self.names.add(node.id)
            elif node.id not in _CONSTANTS:
                hint = " (it is a function: call it)" if node.id in FUNCTIONS else ""
                raise self.fail(
                    f"unknown name {node.id!r}{hint}; allowed are the arguments "
                    f"{sorted(self.args)}, {OUTPUT_NAME!r} (the output) and {sorted(_CONSTANTS)}"
                )
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self.value(node.left)
            self.value(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self.value(node.operand)
        elif isinstance(node, ast.Call):
            name = self.call(node)
            if name in _PREDICATES:
                raise self.fail(f"{name}(...) is a condition; use it inside where(...)")
            if name == "where":
                if len(node.args) != 3:
                    raise self.fail("where takes exactly 3 arguments: where(condition, a, b)")
                self.condition(node.args[0])
                self.value(node.args[1])
                self.value(node.args[2])
            else:
                for a in node.args:
                    self.value(a)
        elif isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr))
        ):
            raise self.fail("a comparison is allowed only as the condition of where(...)")
        else:
            raise self.fail(f"{type(node).__name__} is not allowed in a derivative expression")

    def condition(self, node: ast.expr) -> None:
        """Check a boolean subexpression (the first argument of ``where``)."""
        if isinstance(node, ast.Compare):
            if not all(type(op) in _COMPARE for op in node.ops):
                raise self.fail("only ==, !=, <, <=, >, >= comparisons are allowed")
            self.value(node.left)
            for c in node.comparators:
                self.value(c)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            self.condition(node.left)
            self.condition(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            self.condition(node.operand)
        elif isinstance(node, ast.Call) and self.call(node) in _PREDICATES:
            if len(node.args) != 1:
                raise self.fail(f"{node.func.id} takes exactly 1 argument")  # type: ignore[attr-defined]
            self.value(node.args[0])
        elif isinstance(node, ast.BoolOp):
            raise self.fail("combine conditions with & and | (not 'and'/'or')")
        else:
            raise self.fail("the condition of where(...) must be a comparison")

    def call(self, node: ast.Call) -> str:
        if not isinstance(node.func, ast.Name):
            raise self.fail("only plain function names can be called (exp(x), not np.exp(x))")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(f"{node.func.id}(...) takes positional arguments only")
        if node.func.id not in FUNCTIONS:
            raise self.fail(f"unknown function {node.func.id!r}")
        if not node.args:
            raise self.fail(f"{node.func.id}() needs an argument")
        return node.func.id


def constant_value(node: ast.expr) -> float | None:
    """The value of a checked subexpression without names, else ``None``.

    Example:
        >>> constant_value(ast.parse("2 * pi", mode="eval").body)
        6.283185307179586
    """
    if isinstance(node, ast.Constant):
        return float(cast(float, node.value))  # the checker admits numbers only
    if isinstance(node, ast.Name):
        return _CONSTANTS.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = constant_value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = constant_value(node.left), constant_value(node.right)
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            return float(getattr(np, _BINARY[type(node.op)][0])(a, b))
    if isinstance(node, ast.Call) and node.func.id in _NUMPY_NAMES and node.func.id != "where":  # type: ignore[attr-defined]
        vals = [constant_value(a) for a in node.args]
        if any(v is None for v in vals):
            return None
        with np.errstate(all="ignore"):
            return float(getattr(np, node.func.id)(*vals))  # type: ignore[attr-defined]
    return None


def check_arg_names(arg_names: Sequence[str], *, table: str = "<user>", entry: str = "?") -> None:
    """Argument names must be distinct identifiers, not ``y`` nor a function or constant name.

    Example:
        >>> check_arg_names(("x1", "x2"))
    """
    seen: set[str] = set()
    for a in arg_names:
        problem = None
        if not isinstance(a, str) or not a.isidentifier():
            problem = "is not an identifier"
        elif a == OUTPUT_NAME:
            problem = "is reserved for the output value (use x, x1, x2, ...)"
        elif a in FUNCTIONS or a in _CONSTANTS or a in ("np", "numba"):
            problem = "is the name of a function or constant of the rule language"
        elif a.startswith("_"):
            problem = "starts with an underscore"
        elif a in seen:
            problem = "is repeated"
        if problem:
            raise RuleTableError(f"{table}, entry {entry!r}: argument name {a!r} {problem}")
        seen.add(a)


def parse_expression(
    text: str | None,
    arg_names: Sequence[str],
    *,
    table: str = "<user>",
    entry: str = "?",
) -> Derivative:
    """Check one derivative expression; ``None`` or ``"not differentiable"`` mark no derivative
    (a zero gradient); ``"no closed form"`` one that differentiating raises MissingRuleError.

    Example:
        >>> parse_expression("cos(x)", ("x",)).names
        frozenset({'x'})
    """
    if text is None or (isinstance(text, str) and text.strip() == NOT_DIFFERENTIABLE):
        return Derivative(NOT_DIFFERENTIABLE, None, frozenset(), None)
    if isinstance(text, str) and text.strip() == NO_CLOSED_FORM:
        return Derivative(NO_CLOSED_FORM, None, frozenset(), None)
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = repr(text)
    if not isinstance(text, str):
        raise _fail(f"expected a string, got {type(text).__name__}", table=table, entry=entry,
                    text=repr(text))
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise _fail(f"invalid syntax ({exc.msg})", table=table, entry=entry, text=text) from None
    checker = _Checker(arg_names, table, entry, text)
    checker.value(tree)
    return Derivative(text, tree, frozenset(checker.names), constant_value(tree))


# -- translation -----------------------------------------------------------------------


def _structure(node: ast.AST) -> Any:
    """A hashable key equal for structurally equal trees."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant):
        return ("const", float(cast(float, node.value)))
    parts: list[Any] = [type(node).__name__]
    for _, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            parts.append(_structure(value))
        elif isinstance(value, list):
            parts.append(tuple(_structure(v) for v in value))
    return tuple(parts)


class _PythonWriter:
    """Python source from checked trees, numpy calls only, common subexpressions shared."""

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}
        self.temps: dict[Any, str] = {}
        self.keys: dict[int, Any] = {}
        self.lines: list[str] = []

    def key(self, node: ast.expr) -> Any:
        k = self.keys.get(id(node))
        if k is None:
            k = self.keys[id(node)] = _structure(node)
        return k

    def count(self, node: ast.expr) -> None:
        if constant_value(node) is not None or isinstance(node, ast.Name):
            return
        k = self.key(node)
        self.counts[k] = self.counts.get(k, 0) + 1
        if self.counts[k] == 1:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.count(child)

    def const(self, v: float) -> str:
        if math.isnan(v):
            return "_nan"
        if math.isinf(v):
            return "_inf" if v > 0 else "(-_inf)"
        return repr(float(v))

    def emit(self, node: ast.expr) -> str:
        folded = constant_value(node)
        if folded is not None:
            return self.const(folded)
        if isinstance(node, ast.Name):
            return node.id
        k = self.key(node)
        if k in self.temps:
            return self.temps[k]
        src = self.build(node)
        if self.counts.get(k, 0) > 1:
            name = f"_t{len(self.temps)}"
            self.lines.append(f"    {name} = {src}")
            self.temps[k] = name
            return name
        return src

    def build(self, node: ast.expr) -> str:
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                p = constant_value(node.right)
                base = self.emit(node.left)
                if p == 2.0:
                    return f"_np.square({base})"
                if p == 0.5:
                    return f"_np.sqrt({base})"
                if p == -1.0:
                    return f"_np.reciprocal({base})"
                if p == 1.0:
                    return base
            if isinstance(node.op, ast.BitAnd):
                return f"_np.logical_and({self.emit(node.left)}, {self.emit(node.right)})"
            if isinstance(node.op, ast.BitOr):
                return f"_np.logical_or({self.emit(node.left)}, {self.emit(node.right)})"
            # Python operators: numpy's own semantics on arrays and numpy scalars (the
            # arguments are made numpy scalars first), the operand's on traced values,
            # and a tenth of a ufunc call's cost on scalars.
            sym = _BINARY[type(node.op)][1]
            return f"({self.emit(node.left)} {sym} {self.emit(node.right)})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return f"(-{self.emit(node.operand)})"
            if isinstance(node.op, ast.Invert):
                return f"_np.logical_not({self.emit(node.operand)})"
            return self.emit(node.operand)
        if isinstance(node, ast.Compare):
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                fn = _COMPARE[type(op)][0]
                parts.append(f"_np.{fn}({self.emit(left)}, {self.emit(right)})")
                left = right
            src = parts[0]
            for part in parts[1:]:
                src = f"_np.logical_and({src}, {part})"
            return src
        if isinstance(node, ast.Call):
            name = node.func.id  # type: ignore[attr-defined]
            args = ", ".join(self.emit(a) for a in node.args)
            owner = "_np" if name in _NUMPY_NAMES else "_fn"
            return f"{owner}.{name}({args})"
        raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover


def _safe_identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "rule"


def compile_derivatives(
    arg_names: Sequence[str],
    expressions: Sequence[str | None | Derivative],
    *,
    name: str = "rule",
    table: str = "<user>",
) -> Callable[..., tuple]:
    """A function ``derivatives(*args, y)`` returning one partial derivative per argument.

    Each result broadcasts against the output (a constant derivative is a scalar);
    non-differentiable arguments give ``None``. Only numpy functions and arithmetic
    operators are used (Python numbers become numpy scalars first), so the function also
    accepts graph nodes and dual numbers.

    Example:
        >>> d = compile_derivatives(("x1", "x2"), ("x2", "x1"), name="multiply")
        >>> d(2.0, 3.0, 6.0)
        (np.float64(3.0), np.float64(2.0))
    """
    derivs = [
        e if isinstance(e, Derivative) else parse_expression(e, arg_names, table=table, entry=name)
        for e in expressions
    ]
    if len(derivs) != len(arg_names):
        raise _fail(
            f"{len(arg_names)} arguments but {len(derivs)} derivatives",
            table=table, entry=name, text=", ".join(d.text for d in derivs),
        )
    writer = _PythonWriter()
    for d in derivs:
        if d.tree is not None:
            writer.count(d.tree)
    results = [("None" if d.tree is None else writer.emit(d.tree)) for d in derivs]
    params = ", ".join([*arg_names, OUTPUT_NAME])
    fname = f"d_{_safe_identifier(name)}"
    # Python numbers become numpy scalars, so operators follow numpy (1 / 0.0 is inf).
    prologue = [
        f"    if type({a}) in _PY_NUMBERS:\n        {a} = _f64({a})"
        for a in (*arg_names, OUTPUT_NAME)
    ]
    body = "\n".join(prologue + writer.lines
                     + [f"    return ({''.join(r + ', ' for r in results)})"])
    source = f"def {fname}({params}):\n{body}\n"
    namespace: dict[str, Any] = {"_np": np, "_fn": _FN, "_inf": math.inf, "_nan": math.nan,
                                 "_f64": np.float64, "_PY_NUMBERS": (float, int, bool)}
    exec(compile(source, f"<dualad rule {name}>", "exec"), namespace)  # noqa: S102
    fn = namespace[fname]
    fn.__doc__ = f"Partial derivatives of {name}: " + "; ".join(d.text for d in derivs)
    fn.source = source
    return fn


class _NumbaWriter(_PythonWriter):
    """Scalar Numba source: Python operators, ``np`` scalar functions, ternaries."""

    def const(self, v: float) -> str:
        if math.isnan(v):
            return "np.nan"
        if math.isinf(v):
            return "np.inf" if v > 0 else "(-np.inf)"
        return repr(float(v))

    def build(self, node: ast.expr) -> str:
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitAnd):
                return f"({self.emit(node.left)} and {self.emit(node.right)})"
            if isinstance(node.op, ast.BitOr):
                return f"({self.emit(node.left)} or {self.emit(node.right)})"
            if isinstance(node.op, ast.Pow):
                p = constant_value(node.right)
                base = self.emit(node.left)
                if p == 2.0:
                    return f"({base} * {base})"
                return f"np.power({base}, {self.emit(node.right)})"
            sym = _BINARY[type(node.op)][1]
            return f"({self.emit(node.left)} {sym} {self.emit(node.right)})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return f"(-{self.emit(node.operand)})"
            if isinstance(node.op, ast.Invert):
                return f"(not {self.emit(node.operand)})"
            return self.emit(node.operand)
        if isinstance(node, ast.Compare):
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                parts.append(f"({self.emit(left)} {_COMPARE[type(op)][1]} {self.emit(right)})")
                left = right
            return "(" + " and ".join(parts) + ")"
        if isinstance(node, ast.Call):
            name = node.func.id  # type: ignore[attr-defined]
            args = [self.emit(a) for a in node.args]
            if name == "where":
                return f"({args[1]} if {args[0]} else {args[2]})"
            if name in SCIPY_FUNCTIONS:
                raise NotImplementedError(name)
            return numba_scalar_call(name, args)
        raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover


def numba_scalar_source(
    derivs: Sequence[Derivative], indent: str = "        "
) -> tuple[list[str], list[str]] | None:
    """Scalar statements and one expression per derivative, for a Numba loop body.

    Returns ``(lines, expressions)`` (``"0.0"`` for missing or zero derivatives), or
    ``None`` when an expression uses a function Numba cannot compile (scipy's).
    """
    writer = _NumbaWriter()
    for d in derivs:
        if d.tree is not None:
            writer.count(d.tree)
    try:
        exprs = [("0.0" if d.tree is None else writer.emit(d.tree)) for d in derivs]
    except NotImplementedError:
        return None
    return [indent + line.strip() for line in writer.lines], exprs


#: numpy ufuncs Numba compiles on float64 scalars (``heaviside`` and ``ldexp`` it does not).
NUMBA_UFUNCS = frozenset(
    (
        "negative", "positive", "absolute", "fabs", "sign", "add", "subtract", "multiply",
        "divide", "true_divide", "floor_divide", "power", "float_power", "square", "sqrt",
        "cbrt", "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
        "logaddexp", "logaddexp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
        "arctan2", "hypot", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
        "deg2rad", "rad2deg", "degrees", "radians", "maximum", "minimum", "fmax", "fmin",
        "floor", "ceil", "trunc", "rint", "mod", "fmod", "remainder", "copysign",
        "conjugate",
    )
)


#: Scalar forms of numpy ufuncs in Numba source that compile faster than a ufunc call and
#: give the same float64 result (Python operators and ``math`` functions, which Numba lowers
#: to the same LLVM operations and libm calls).
NUMBA_SCALAR_FORMS = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "divide": "({0} / {1})", "true_divide": "({0} / {1})", "negative": "(-{0})",
    "positive": "(+{0})", "square": "({0} * {0})", "sqrt": "math.sqrt({0})",
    "exp": "math.exp({0})", "sin": "math.sin({0})", "cos": "math.cos({0})",
    "tan": "math.tan({0})", "tanh": "math.tanh({0})", "sinh": "math.sinh({0})",
    "cosh": "math.cosh({0})", "arctan": "math.atan({0})", "expm1": "math.expm1({0})",
    "log1p": "math.log1p({0})", "fabs": "math.fabs({0})", "absolute": "math.fabs({0})",
}


def numba_scalar_call(numpy_name: str, args: Sequence[str]) -> str:
    """Numba source computing ``np.<numpy_name>(*args)`` on float64 scalars."""
    form = NUMBA_SCALAR_FORMS.get(numpy_name)
    if form is not None:
        return form.format(*args)
    return f"np.{numpy_name}({', '.join(args)})"


def numba_predicate_call(numpy_name: str, args: Sequence[str]) -> str:
    """Numba source of a boolean ufunc (a comparison, ``isnan``) on float64 scalars, as
    the float 1.0 or 0.0 (how compiled programs store a mask).

    Example:
        >>> numba_predicate_call("less", ["a", "b"])
        '(1.0 if np.less(a, b) else 0.0)'
    """
    return f"(1.0 if np.{numpy_name}({', '.join(args)}) else 0.0)"


def kernel_masks(n_args: int) -> list[tuple[bool, ...]]:
    """Which arguments carry partials, for each kernel variant: every non-empty subset.

    Example:
        >>> kernel_masks(2)
        [(True, True), (True, False), (False, True)]
    """
    masks = []
    for bits in range(2**n_args - 1, 0, -1):
        masks.append(tuple(bool(bits >> (n_args - 1 - i) & 1) for i in range(n_args)))
    return masks


def kernel_name(mask: Sequence[bool]) -> str:
    """The kernel variant's function name: ``kernel_10`` when only the first argument carries partials."""
    return "kernel_" + "".join("1" if m else "0" for m in mask)


def kernel_module_source(
    numpy_name: str, arg_names: Sequence[str], derivs: Sequence[Derivative]
) -> str | None:
    """Source of a module of Numba kernels fusing ``np.<numpy_name>`` with its partials.

    One ``@numba.njit(cache=True)`` function per mask of :func:`kernel_masks`; for a unary
    rule ``kernel_1(x, xp, out, outp)``, for a binary one ``kernel_11(x1, x1p, x2, x2p,
    out, outp)``, ``kernel_10(x1, x1p, x2, out, outp)`` and ``kernel_01(x1, x2, x2p, out,
    outp)``. Values and ``out`` have shape ``(n,)``, partials and ``outp`` shape ``(n, k)``,
    all float64 and C-contiguous; the loop computes ``out[i] = f(...)`` once and
    ``outp[i, j] = sum_a d_a * xp_a[i, j]``. Returns ``None`` when Numba cannot compile the
    rule (a scipy function, a non-differentiable argument, an unsupported ufunc).
    """
    if numpy_name not in NUMBA_UFUNCS or not all(d.differentiable for d in derivs):
        return None
    body = numba_scalar_source(derivs, indent=" " * 8)
    if body is None:
        return None
    temps, exprs = body
    args = ", ".join(arg_names)
    out = [
        f'"""Fused value-and-partials kernels of np.{numpy_name} (from its derivative rule)."""',
        "import math",
        "import numba",
        "import numpy as np",
    ]
    for mask in kernel_masks(len(arg_names)):
        params = []
        for a, m in enumerate(mask):
            params.append(f"_v{a}")
            if m:
                params.append(f"_p{a}")
        out += [
            "",
            "",
            '@numba.njit(cache=True, error_model="numpy")',
            f"def {kernel_name(mask)}({', '.join(params)}, _out, _outp):",
            "    for _i in range(_out.shape[0]):",
        ]
        out += [f"        {a} = _v{i}[_i]" for i, a in enumerate(arg_names)]
        out += [f"        {OUTPUT_NAME} = np.{numpy_name}({args})", f"        _out[_i] = {OUTPUT_NAME}"]
        out += temps
        terms = []
        reads = []
        for a, m in enumerate(mask):
            if m and not derivs[a].is_zero:
                out.append(f"        _d{a} = {exprs[a]}")
                reads.append(f"            _t{a} = _p{a}[_i, _j]")
                # NaN-safe: a zero tangent entry contributes zero, even times inf or NaN
                terms.append(f"(_d{a} * _t{a} if _t{a} != 0.0 else 0.0)")
        out += ["        for _j in range(_outp.shape[1]):"] + reads + [
            f"            _outp[_i, _j] = {' + '.join(terms) or '0.0'}",
        ]
    if len(arg_names) == 1:
        out += ["", "", "kernel = kernel_1"]
    return "\n".join(out) + "\n"
