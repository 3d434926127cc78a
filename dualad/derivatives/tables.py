"""Finding, reading and checking the declarative derivative tables (``rules/*.toml``).

The tables ship inside the wheel as package data, ``dualad/_rules`` (the build maps the
repository's ``rules/`` there); a checkout or an editable install reads ``rules/`` beside
the package. Every entry
is validated: its function must exist, its arity must match the function's and the number
of derivatives, its domain must name each argument, and its expressions must parse. An
error names the table file and the entry.

Example:
    >>> from dualad.derivatives.tables import load_table, table_path
    >>> table = load_table(table_path("numpy_ufuncs"))
    >>> entry = table.entry("sin")
    >>> entry.arg_names, entry.derivatives[0].text
    (('x',), 'cos(x)')
"""

from __future__ import annotations

import importlib
import importlib.resources
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import RuleTableError
from .language import Derivative, check_arg_names, parse_expression

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "TABLES",
    "Domain",
    "RuleEntry",
    "Table",
    "function_arity",
    "load_table",
    "parse_domain",
    "rules_directory",
    "table_path",
]

#: The built-in tables: file stem -> the module their functions live in.
TABLES = {"numpy_ufuncs": "numpy", "scipy_special": "scipy.special"}

# An entry's key naming its function, per module.
_FUNCTION_KEYS = {"numpy": "numpy", "scipy": "scipy.special"}
_ENTRY_KEYS = frozenset(
    {"name", "args", "derivatives", "domain", "notes", "aliases", "scalar_operator",
     "quiet_when"}
) | set(
    _FUNCTION_KEYS
)


def rules_directory() -> Path:
    """The directory holding the tables: the package data ``dualad/_rules`` of an installed
    wheel, else the checkout's ``rules/`` beside the package (an editable install)."""
    installed = importlib.resources.files("dualad").joinpath("_rules")
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / "rules"


def table_path(stem: str) -> Path:
    """The path of the built-in table ``stem`` (e.g. ``"numpy_ufuncs"``)."""
    return rules_directory() / f"{stem}.toml"


@dataclass(frozen=True)
class Domain:
    """Where tests draw an argument from: a union of intervals, or a range of integers.

    Example:
        >>> d = Domain(((0.1, 10.0),))
        >>> bool(np.all((d.sample(np.random.default_rng(0), (3,)) >= 0.1)))
        True
    """

    intervals: tuple[tuple[float, float], ...]
    integer: bool = False

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...] = ()) -> np.ndarray:
        """Draw points: uniform in a randomly chosen interval (or integers, inclusive)."""
        if self.integer:
            lo, hi = self.intervals[0]
            return rng.integers(int(lo), int(hi), size=shape, endpoint=True)
        pick = rng.integers(len(self.intervals), size=shape)
        bounds = np.asarray(self.intervals, dtype=float)
        lo, hi = bounds[pick, 0], bounds[pick, 1]
        return lo + (hi - lo) * rng.random(shape)


def parse_domain(
    spec: Any, arg_names: Sequence[str], *, table: str = "<user>", entry: str = "?"
) -> dict[str, Domain]:
    """Check a domain table ``{arg: [lo, hi] | [[lo, hi], ...] | {integers = [lo, hi]}}``."""
    where = f"{table}, entry {entry!r}"
    if not isinstance(spec, Mapping):
        raise RuleTableError(f"{where}: domain must be a table of one range per argument")
    unknown = set(spec) - set(arg_names)
    missing = [a for a in arg_names if a not in spec]
    if unknown or missing:
        raise RuleTableError(
            f"{where}: domain must give exactly the arguments {list(arg_names)} "
            f"(missing {missing}, unknown {sorted(unknown)})"
        )
    result = {}
    for a in arg_names:
        s = spec[a]
        integer = isinstance(s, Mapping)
        if integer:
            if set(s) != {"integers"}:
                raise RuleTableError(f"{where}: domain of {a!r} must be {{ integers = [lo, hi] }}")
            s = s["integers"]
        pairs = s if s and isinstance(s[0], (list, tuple)) else [s]
        intervals = []
        for p in pairs:
            ok = (
                isinstance(p, (list, tuple))
                and len(p) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in p)
                and p[0] <= p[1]
            )
            if not ok:
                raise RuleTableError(
                    f"{where}: domain of {a!r} must be [lo, hi] with lo <= hi, a list of such "
                    f"intervals, or {{ integers = [lo, hi] }}; got {spec[a]!r}"
                )
            intervals.append((float(p[0]), float(p[1])))
        if integer and len(intervals) != 1:
            raise RuleTableError(f"{where}: domain of {a!r}: one integer range only")
        result[a] = Domain(tuple(intervals), integer)
    return result


def function_arity(f: Callable[..., Any]) -> int | None:
    """How many positional arguments ``f`` takes: ``nin`` of a ufunc, else its required ones."""
    nin = getattr(f, "nin", None)
    if isinstance(nin, int):
        return nin
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


@dataclass(frozen=True)
class RuleEntry:
    """One checked table entry."""

    name: str
    function: Callable[..., Any]
    module: str
    attribute: str
    arg_names: tuple[str, ...]
    derivatives: tuple[Derivative, ...]
    domain: dict[str, Domain] | None
    notes: str
    source: str
    aliases: tuple[str, ...] = ()
    scalar_operator: str | None = None
    quiet_when: str | None = None


#: Python operators that compute a binary ufunc on two floats exactly as numpy does.
SCALAR_OPERATORS = ("+", "-", "*")
#: Python operators exact only where the entry's ``quiet_when`` holds (a non-zero divisor).
QUIET_OPERATORS = ("/",)
#: Conditions on number arguments under which neither the function nor its derivatives
#: can raise numpy's divide or invalid warnings (so no ``np.errstate`` is needed):
#: ``positive``, every argument > 0; ``nonzero divisor``, the last argument finite and
#: non-zero; ``positive base``, the first argument a finite normal positive number (not
#: subnormal) and the second finite.
QUIET_CONDITIONS = ("positive", "nonzero divisor", "positive base")


@dataclass(frozen=True)
class Table:
    """A loaded table: its entries and the functions it declares not differentiable."""

    path: Path
    module: str
    entries: tuple[RuleEntry, ...]
    not_differentiable: dict[str, str] = field(default_factory=dict)

    def entry(self, name: str) -> RuleEntry:
        """The entry called ``name``."""
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)


def _resolve(module: str, attribute: str, where: str) -> Callable[..., Any]:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise RuleTableError(f"{where}: cannot import {module} ({exc})") from None
    f = getattr(mod, attribute, None)
    if f is None or not callable(f):
        raise RuleTableError(f"{where}: {module} has no function {attribute!r}")
    return f


def _entry(raw: Any, index: int, path: str) -> RuleEntry:
    if not isinstance(raw, Mapping):
        raise RuleTableError(f"{path}, rule #{index + 1}: expected a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise RuleTableError(f"{path}, rule #{index + 1}: missing 'name'")
    where = f"{path}, entry {name!r}"
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise RuleTableError(
            f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_ENTRY_KEYS)})"
        )
    keys = [k for k in _FUNCTION_KEYS if k in raw]
    if len(keys) != 1:
        raise RuleTableError(
            f"{where}: give exactly one of {sorted(_FUNCTION_KEYS)} naming the function"
        )
    module, attribute = _FUNCTION_KEYS[keys[0]], raw[keys[0]]
    if not isinstance(attribute, str):
        raise RuleTableError(f"{where}: {keys[0]!r} must be a string")
    function = _resolve(module, attribute, where)
    aliases = tuple(raw.get("aliases", ()))
    for alias in aliases:
        if _resolve(module, alias, where) is not function:
            raise RuleTableError(f"{where}: alias {alias!r} is not the same object as {attribute!r}")
    args = raw.get("args")
    if not isinstance(args, list) or not args:
        raise RuleTableError(f"{where}: 'args' must be a non-empty list of argument names")
    check_arg_names(args, table=path, entry=name)
    arity = function_arity(function)
    if arity is not None and arity != len(args):
        raise RuleTableError(
            f"{where}: {module}.{attribute} takes {arity} argument(s) but args lists {len(args)}"
        )
    derivs = raw.get("derivatives")
    if not isinstance(derivs, list) or len(derivs) != len(args):
        count = len(derivs) if isinstance(derivs, list) else "no list of"
        raise RuleTableError(
            f"{where}: {len(args)} argument(s) need {len(args)} derivative(s), got {count}"
        )
    parsed = tuple(parse_expression(d, args, table=path, entry=name) for d in derivs)
    if not any(d.differentiable for d in parsed):
        raise RuleTableError(f"{where}: no argument is differentiable")
    if "domain" not in raw:
        raise RuleTableError(f"{where}: missing 'domain' (a test range per argument)")
    domain = parse_domain(raw["domain"], args, table=path, entry=name)
    notes = raw.get("notes", "")
    if not isinstance(notes, str):
        raise RuleTableError(f"{where}: 'notes' must be a string")
    quiet_when = raw.get("quiet_when")
    if quiet_when is not None and quiet_when not in QUIET_CONDITIONS:
        raise RuleTableError(
            f"{where}: 'quiet_when' must be one of {list(QUIET_CONDITIONS)}, got {quiet_when!r}"
        )
    scalar_operator = raw.get("scalar_operator")
    allowed = SCALAR_OPERATORS + (QUIET_OPERATORS if quiet_when == "nonzero divisor" else ())
    if scalar_operator is not None and (scalar_operator not in allowed or len(args) != 2):
        raise RuleTableError(
            f"{where}: 'scalar_operator' must be one of {list(allowed)} on a "
            f"two-argument entry, got {scalar_operator!r} ('/' needs "
            f"quiet_when = \"nonzero divisor\")"
        )
    return RuleEntry(
        name=name,
        function=function,
        module=module,
        attribute=attribute,
        arg_names=tuple(args),
        derivatives=parsed,
        domain=domain,
        notes=" ".join(notes.split()),
        source=path,
        aliases=aliases,
        scalar_operator=scalar_operator,
        quiet_when=quiet_when,
    )


def load_table(path: str | Path) -> Table:
    """Read and check one table file; raises :class:`~dualad.core.errors.RuleTableError`."""
    path = Path(path)
    label = str(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise RuleTableError(f"{label}: cannot read the rules table ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleTableError(f"{label}: invalid TOML ({exc})") from None
    unknown = set(data) - {"table", "rule", "not_differentiable"}
    if unknown:
        raise RuleTableError(f"{label}: unknown top-level keys {sorted(unknown)}")
    module = data.get("table", {}).get("module", "")
    entries = tuple(_entry(raw, i, label) for i, raw in enumerate(data.get("rule", [])))
    seen: dict[Any, str] = {}
    for e in entries:
        if e.function in seen:
            raise RuleTableError(
                f"{label}, entry {e.name!r}: the same function as entry {seen[e.function]!r}"
            )
        seen[e.function] = e.name
    not_diff = data.get("not_differentiable", {})
    if not isinstance(not_diff, Mapping):
        raise RuleTableError(f"{label}: 'not_differentiable' must be a table name = reason")
    for name, reason in not_diff.items():
        where = f"{label}, not_differentiable entry {name!r}"
        if not isinstance(reason, str) or not reason:
            raise RuleTableError(f"{where}: give the reason as a string")
        if module and _resolve(module, name, where) in seen:
            raise RuleTableError(f"{where}: it also has a rule")
    return Table(path, module, entries, dict(not_diff))
