"""The multiple-dispatch functions every rule extends: ``forward``, ``gradient``, ``backward``.

Each is a :class:`RuleFunction`: plum functions of dualad's own (one per
operator class, so rules never merge with same-named functions of other libraries and
plum resolves only the methods a program uses), reached through plum's public API only,
plus a cache of the method resolved for each tuple of argument types. The cache is emptied whenever a method is added, so a
rule registered at any time takes effect at once; listeners (forward mode's fast paths)
hear of every rule a user adds. Extend the functions with ``@gradient.dispatch`` and
``@forward.dispatch``; dispatch happens on the operator type (``Method[f]`` /
``Broadcasted[f]``) and on the argument types.

Example:
    >>> import numpy as np, dualad as ad
    >>> def cube(x):
    ...     return x ** 3
    >>> cube = ad.primitive(cube)
    >>> @ad.gradient.dispatch
    ... def gradient(op: ad.Method[cube], grad, output, x):
    ...     return (grad * 3 * x ** 2,)
    >>> float(ad.grad(cube)(2.0))
    12.0
"""

from __future__ import annotations

import inspect
import sys
import threading
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
import plum

from .errors import MissingRuleError
from .operators import Broadcasted, Operator

__all__ = [
    "RuleFunction",
    "backward",
    "forward",
    "gradient",
    "missing_rule_message",
    "register_rule_loader",
]

# Called when a call finds only a catch-all method: each loader may register more rules
# (e.g. the scipy.special table, once scipy.special has been imported) and returns
# whether it did.
_RULE_LOADERS: list[Callable[[], bool]] = []


def register_rule_loader(loader: Callable[[], bool]) -> None:
    """Let ``loader()`` register rules on demand, before a call is refused for lack of one."""
    _RULE_LOADERS.append(loader)


def _load_more_rules() -> bool:
    return any([loader() for loader in list(_RULE_LOADERS)])


def catch_all(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``method`` as a catch-all: finding it means no rule matched (loaders run first)."""
    method.__dualad_catch_all__ = True  # type: ignore[attr-defined]
    return method


_GENERIC = "generic"  # the bucket of methods not written for one operator class


def _bucket_of(first: Any) -> Any:
    """The operator class a method's first annotation names (``Method[f]``), or generic.

    Operator classes made by ``Method[f]`` / ``Broadcasted[f]`` are exact types (one per
    function), so their methods only ever match calls of that class.
    """
    if isinstance(first, type) and issubclass(first, Operator) and "f" in first.__dict__:
        return first
    return _GENERIC


def _first_annotation(method: Callable[..., Any]) -> Any:
    """The (evaluated) annotation of ``method``'s first parameter, or ``None``."""
    try:
        params = list(inspect.signature(method).parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY,
                                                params[0].POSITIONAL_OR_KEYWORD):
            return None
        annotation = params[0].annotation
        if isinstance(annotation, str):
            annotation = typing.get_type_hints(method).get(params[0].name)
        return None if annotation is inspect.Parameter.empty else annotation
    except Exception:  # noqa: BLE001 - unresolvable: treat as generic (always correct)
        return None


class RuleFunction:
    """A rule function: plum multiple dispatch with a per-type-tuple method cache.

    ``.dispatch`` registers a method from its annotations (a user's rule);
    ``.register(method, signature)`` registers one with an explicit
    :class:`plum.Signature` (``builtin=True`` for dualad's own rules).

    Methods are kept per operator class: each ``Method[f]`` / ``Broadcasted[f]`` gets its
    own :class:`plum.Function` (its methods plus the generic ones), built when a call of
    that class first needs it. plum then resolves only the few methods of the functions a
    program uses, not hundreds at its first call.
    """

    def __init__(self, default: Callable[..., Any]) -> None:
        self._default = catch_all(default)
        self.__name__ = default.__name__
        self.__qualname__ = default.__name__
        self.__doc__ = default.__doc__
        self._resolved: dict[tuple[type, ...], Callable[..., Any]] = {}
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.RLock()
        self._builtin: set[int] = {id(self._default)}  # the catch-all is dualad's own too
        self._keep: list[Callable[..., Any]] = []  # builtin methods stay alive: ids stay unique
        # bucket -> [(method, signature or None (from annotations), precedence)]
        self._entries: dict[Any, list[tuple[Callable[..., Any], Any, int]]] = {
            _GENERIC: [(self._default, None, 0)]}
        self._functions: dict[Any, plum.Function] = {}  # bucket -> its plum function
        self._user_buckets: set[Any] = set()

    def __repr__(self) -> str:
        count = sum(len(entries) for entries in self._entries.values())
        return f"<dualad rule function {self.__name__} with {count} method(s)>"

    # -- registering ------------------------------------------------------------------------
    def dispatch(self, method: Callable[..., Any] | None = None, *,
                 precedence: int = 0, builtin: bool = False) -> Any:
        """Decorator: add ``method`` for the types its annotations give.

        Returns this rule function (as plum does), so the decorated name stays usable.
        ``builtin`` marks dualad's own methods (the engine's, never a rule's: rules use
        the decorators of :mod:`dualad.extend`).
        """
        if method is None:
            return lambda m: self.dispatch(m, precedence=precedence, builtin=builtin)
        self._add(_bucket_of(_first_annotation(method)), (method, None, precedence), builtin)
        return self

    def register(self, method: Callable[..., Any], signature: plum.Signature, *,
                 precedence: int = 0, builtin: bool = False) -> None:
        """Add ``method`` for ``signature``; ``builtin`` marks dualad's own rules."""
        types = signature.types
        bucket = _bucket_of(types[0]) if types else _GENERIC
        self._add(bucket, (method, signature, precedence), builtin)

    def _add(self, bucket: Any, entry: tuple[Callable[..., Any], Any, int],
             builtin: bool) -> None:
        with self._lock:
            if builtin:
                self._builtin.add(id(entry[0]))
                self._keep.append(entry[0])
            else:
                self._user_buckets.add(bucket)
            self._entries.setdefault(bucket, []).append(entry)
            if not builtin and bucket is not _GENERIC:
                _travel_with_function(self.__name__, bucket, entry)
            targets = self._functions.values() if bucket is _GENERIC else \
                [f for f in (self._functions.get(bucket),) if f is not None]
            for function in targets:
                _register(function, entry)
            self._changed()

    def _function_for(self, bucket: Any) -> plum.Function:
        function = self._functions.get(bucket)
        if function is None:
            with self._lock:
                function = self._functions.get(bucket)
                if function is None:
                    function = plum.Function(self._default)
                    entries = self._entries[_GENERIC]  # the catch-all first
                    if bucket is not _GENERIC:
                        entries = entries + self._entries.get(bucket, [])
                    for entry in entries:
                        _register(function, entry)
                    self._functions[bucket] = function
        return function

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every registration (it re-derives what it cached)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        self._resolved = {}
        for listener in list(self._listeners):
            listener()

    def is_builtin_implementation(self, impl: Any) -> bool:
        """Whether ``impl`` (as :meth:`resolve` returns it) is one of dualad's own rules."""
        return id(impl) in self._builtin

    def is_builtin(self, method: Any) -> bool:
        """Whether ``method`` (a :class:`plum.Method`) is one of dualad's own rules."""
        return id(method.implementation) in self._builtin

    def _methods_of(self, buckets: Any) -> list[Any]:
        methods = []
        for bucket in buckets:
            for m in self._function_for(bucket).methods:
                types = m.signature.types
                if bucket is _GENERIC or (types and types[0] is bucket):
                    methods.append(m)
        return methods

    @property
    def methods(self) -> list[Any]:
        """Every registered method (:class:`plum.Method`: ``.signature``, ``.implementation``)."""
        return self._methods_of(list(self._entries))

    @property
    def user_methods(self) -> list[Any]:
        """The methods users added (not dualad's own), without resolving all the others."""
        buckets = [_GENERIC, *(b for b in self._user_buckets if b is not _GENERIC)]
        return [m for m in self._methods_of(buckets) if not self.is_builtin(m)]

    # -- calling ------------------------------------------------------------------------------
    def resolve(self, types: tuple[type, ...]) -> Callable[..., Any]:
        """The implementation that a call with arguments of ``types`` runs (cached)."""
        try:
            return self._resolved[types]
        except KeyError:
            pass
        impl = self._lookup(types)
        self._resolved[types] = impl
        return impl

    def _lookup(self, types: tuple[type, ...]) -> Callable[..., Any]:
        bucket = types[0] if types and types[0] in self._entries else _GENERIC
        method, _ = self._function_for(bucket).resolve_method(plum.Signature(*types))
        return method

    def has_rule(self, types: tuple[type, ...]) -> bool:
        """Whether a call with arguments of ``types`` finds a rule (not a catch-all).

        Rule loaders run first when only a catch-all matches.
        """
        try:
            impl = self.resolve(types)
            if getattr(impl, "__dualad_catch_all__", False) and _load_more_rules():
                impl = self.resolve(types)
        except plum.AmbiguousLookupError:
            return True  # the call itself will say so
        except plum.NotFoundLookupError:
            return False
        return not getattr(impl, "__dualad_catch_all__", False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        types = tuple(map(type, args))
        try:
            impl = self._resolved[types]
        except KeyError:
            impl = self.resolve(types)
        return impl(*args, **kwargs)


class PortableRules:
    """The rules users wrote for a primitive, kept on it so they travel when it is pickled.

    ``cloudpickle`` sends a function defined in ``__main__`` (a script, a notebook) by
    value, with its attributes; unpickling this attribute registers the rules again, for
    the operator of the unpickled function, in the receiving process (a ``dask``
    worker, a ``multiprocessing`` child).
    """

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f
        self.entries: list[tuple[str, Any, tuple[Callable[..., Any], Any, int]]] = []

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        portable = []
        for name, bucket, (method, signature, precedence) in self.entries:
            if signature is None:
                signature = plum.Signature.from_callable(method)
            varargs = signature.varargs if signature.has_varargs else None
            portable.append((name, bucket.__mro__[1], method, tuple(signature.types[1:]),
                             varargs, precedence))
        return (_restore_rules, (self.f, portable))


def _travel_with_function(name: str, bucket: Any, entry: tuple) -> None:
    f = bucket.f
    if not isinstance(f, types.FunctionType) or not hasattr(f, "__dualad_operator__"):
        return  # only primitives: numpy's functions exist in every process anyway
    rules = f.__dict__.get("__dualad_rules__")
    if rules is None:
        rules = f.__dict__["__dualad_rules__"] = PortableRules(f)
    rules.entries.append((name, bucket, entry))


def _restore_rules(f: Callable[..., Any], portable: list[tuple]) -> PortableRules:
    # Runs while ``f`` is being unpickled (before its attributes are set): the rules are
    # registered for the operator of the new ``f`` and kept for its next trip.
    rules = PortableRules(f)
    for name, family, method, rest, varargs, precedence in portable:
        signature = plum.Signature(family[f], *rest, varargs=varargs) if varargs is not None \
            else plum.Signature(family[f], *rest)
        _RULE_FUNCTIONS[name].register(method, signature, precedence=precedence)
        rules.entries.append((name, family[f], (method, signature, precedence)))
    return rules


def _register(function: plum.Function, entry: tuple[Callable[..., Any], Any, int]) -> None:
    method, signature, precedence = entry
    if signature is None:
        function.dispatch(method, precedence=precedence)
    else:
        function.register(method, signature, precedence=precedence)


def _type_names(args: tuple[Any, ...]) -> str:
    return ", ".join(type(a).__name__ for a in args)


def _function_label(op: Operator) -> str:
    """How the user spells the function: ``np.sin``, ``scipy.special.gammainc``, ``f``."""
    f = getattr(op, "f", None)
    if f is None:
        return type(op).__name__
    owner = getattr(f, "__self__", None)
    name = getattr(f, "__name__", repr(f))
    if owner is not None and hasattr(owner, "nin"):
        return f"{_ufunc_namespace(owner)}.{owner.__name__}.{name}"
    module = getattr(f, "__module__", None)
    if hasattr(f, "nin"):
        return f"{_ufunc_namespace(f)}.{name}"
    if module is None or module == "numpy" or module.startswith("numpy."):
        if getattr(np, name, None) is f or module is None:
            return f"np.{name}"
        public = module.split("._")[0].removeprefix("numpy")  # numpy.linalg._linalg
        return f"np{public}.{name}"  # np.linalg.tensorinv, np.fft.rfft
    if module.startswith("scipy."):
        public = module.split("._")[0]  # scipy.special._basic -> scipy.special
        return f"{public}.{name}"
    return name


def _ufunc_namespace(ufunc: Any) -> str:
    """``np`` for numpy's ufuncs; the public module of another library's (scipy.special)."""
    name = getattr(ufunc, "__name__", "")
    if getattr(np, name, None) is ufunc:
        return "np"
    for module_name in ("scipy.special",):  # only when the user has imported it
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, name, None) is ufunc:
            return module_name
    return "np"


def missing_rule_message(op: Operator, args: tuple[Any, ...], mode: str) -> str:
    """The error text for a call with no rule, including the one method that would add it."""
    kind = "Broadcasted" if isinstance(op, Broadcasted) else "Method"
    label = _function_label(op)
    names = [f"x{i}" if len(args) > 1 else "x" for i in range(len(args))]
    params = ", ".join(names)
    if mode == "reverse":
        short = label.removeprefix("np.").removeprefix("scipy.special.")
        grads = ", ".join(f"grad * <d {short}/d {n}>" for n in names)
        method = (
            f"    @ad.gradient.dispatch\n"
            f"    def gradient(op: ad.{kind}[{label}], grad, output, {params}):\n"
            f"        return ({grads},)"
        )
        what = "reverse-mode (gradient)"
    elif len(args) > 1:
        # several arguments: a method with untyped parameters would also catch the plain
        # calls reverse mode makes; tangent_rule registers only the Dual combinations
        parts = ", ".join(f"(v{i}, p{i})" for i in range(len(args)))
        duals = ", ".join(str(i) for i in range(len(args)))
        method = (
            f"    from dualad import extend\n\n"
            f"    @extend.tangent_rule({label}, duals=({duals}))  # positions that may be Duals\n"
            f"    def _({params}):\n"
            f"        tag, [{parts}] = extend.tangent_parts(({params}))  # p is None for "
            f"a constant\n"
            f"        return extend.Dual(value, partials, tag)  # partials: value.shape + (k,)"
        )
        what = "forward-mode (tangent)"
    else:
        method = (
            f"    @ad.forward.dispatch\n"
            f"    def forward(op: ad.{kind}[{label}], {params}: ad.Dual):\n"
            f"        return ad.Dual(value, partials, {params}.tag)"
        )
        what = "forward-mode (tangent)"
    message = (
        f"dualad has no {what} rule for {label} called with ({_type_names(args)}). "
        f"Add one with a dispatch method, e.g.\n\n{method}\n"
    )
    if kind == "Broadcasted":
        message += (
            f"\nor, for an elementwise function, one line: ad.define_rule({label}, "
            f"args=({', '.join(repr(n) for n in names)},), derivatives=(...))."
        )
    return message


# Per type: does every operation on it need a tangent rule (a class attribute
# ``_needs_tangent_rule``, set by forward mode's ``Dual``)? The default ``forward`` refuses
# such values instead of calling the function on them, which would recurse.
_NEEDS_TANGENT_RULE: dict[type, bool] = {}


def _gradient(op: Operator, grad: Any, output: Any, *args: Any, **kwargs: Any):
    """Reverse-mode rules: ``gradient(op, grad, output, *args, **kwargs)``.

    A backward pass calls it once per recorded call ``output = op(*args, **kwargs)``, with
    ``grad`` the gradient arriving at ``output``; a rule returns a tuple with one gradient
    per positional argument (``None`` for an argument that is not differentiable). Each
    rule is a method for one function, chosen by the type of ``op``: ``ad.Method[f]`` for a
    call of ``f``, ``ad.Broadcasted[f]`` for an elementwise (broadcasting) call.
    ``ad.gradient.methods`` lists the rules.

    Add one with ``@ad.gradient.dispatch`` (a user's rule wins over dualad's own):

        >>> import numpy as np, dualad as ad
        >>> @ad.primitive
        ... def softplus(x):
        ...     return np.log1p(np.exp(x))
        >>> @ad.gradient.dispatch
        ... def gradient(op: ad.Method[softplus], grad, output, x):
        ...     return (grad / (1.0 + np.exp(-x)),)
        >>> float(ad.grad(softplus)(0.0))
        0.5

    Forward mode has its own rules (methods of ``ad.forward`` for ``ad.Dual`` arguments);
    for an elementwise function ``ad.define_rule(f, args=("x",), derivatives=("...",))``
    adds both in one line.
    """
    if _load_more_rules():
        return gradient(op, grad, output, *args, **kwargs)
    raise MissingRuleError(missing_rule_message(op, args, "reverse"))


def _forward(op: Operator, *args: Any, **kwargs: Any):
    """Evaluation and forward-mode rules: ``forward(op, *args, **kwargs)``.

    ``forward(op, *args)`` evaluates a recorded call; its methods for ``ad.Dual`` arguments
    are the forward-mode (tangent) rules: a rule returns the ``ad.Dual`` result, whose
    ``partials`` (shape ``value.shape + (k,)``) carry ``k`` directions at once. Each rule is
    a method for one function, chosen by the type of ``op`` (``ad.Method[f]`` or
    ``ad.Broadcasted[f]``). ``ad.forward(node)`` re-evaluates a ``CachedNode``'s graph.

    Add a rule with ``@ad.forward.dispatch``:

        >>> import numpy as np, dualad as ad
        >>> @ad.primitive
        ... def cube(x):
        ...     return x ** 3
        >>> @ad.forward.dispatch
        ... def forward(op: ad.Method[cube], x: ad.Dual):
        ...     d = 3 * x.value ** 2
        ...     return ad.Dual(x.value ** 3, d[..., None] * x.partials, x.tag)
        >>> float(ad.derivative(cube)(2.0))
        12.0

    Reverse mode has its own rules (``ad.gradient``); for an elementwise function
    ``ad.define_rule`` adds both.
    """
    for a in args + tuple(kwargs.values()) if kwargs else args:  # Duals by keyword too
        t = type(a)
        needs = _NEEDS_TANGENT_RULE.get(t)
        if needs is None:
            needs = _NEEDS_TANGENT_RULE[t] = bool(getattr(t, "_needs_tangent_rule", False))
        if needs:
            if _load_more_rules():
                return forward(op, *args, **kwargs)
            # the Dual decides: a result without derivative (np.shape, np.argmax) is fine
            return type(a)._without_tangent_rule(op, args, kwargs)
    # Method[f] / Broadcasted[f] call f directly; a custom Operator subclass is called.
    return getattr(op, "f", op)(*args, **kwargs)


def _backward(node: Any, seed: Any = None):
    """Run the reverse pass from ``node``; leaves' ``.grad`` accumulate."""
    raise TypeError(
        f"dualad.backward expects a graph node (ad.Variable or ad.CachedNode), got "
        f"{type(node).__name__}; differentiate functions with ad.grad(f) instead."
    )


_gradient.__name__ = "gradient"
_forward.__name__ = "forward"
_backward.__name__ = "backward"

#: ``gradient(op, grad, output, *args, **kwargs)``: reverse-mode rules.
gradient = RuleFunction(_gradient)
#: ``forward(op, *args, **kwargs)``: evaluation, and forward-mode rules for ``Dual`` arguments.
forward = RuleFunction(_forward)
#: ``backward(node, seed=None)``: the reverse pass from a graph node.
backward = RuleFunction(_backward)

_RULE_FUNCTIONS = {"gradient": gradient, "forward": forward, "backward": backward}
