"""Plain-float buffers inside differentiated code: ``out = np.zeros(n); out[i] = ...``.

Simulation code (and the packages it imports) allocates its result with ``np.zeros(n)`` /
``np.empty(n)`` / ``np.ones(n)`` / ``np.full(n, v)`` and fills it with values computed
from the arguments. Such a buffer is a plain numpy array, which cannot hold a derivative.

While a transform runs ``f``, dualad runs a *view* of ``f``: the same code object, with a
globals mapping (and closure cells) in which ``numpy`` is a view whose float allocators
return writable traced arrays, made like the differentiated argument
(``np.zeros_like(x, shape=n)``). The view reaches, lazily, the functions and modules ``f``
uses: helper functions it calls by name, closures, user modules (``pkg.model.rhs``) and
``import numpy`` inside a function body. numpy itself is never touched, so other code and
other threads see numpy as it is; the traced prototype lives in a ``contextvars`` variable,
set only for the duration of the transform's call.

What the view does not reach (methods looked up on objects, functions passed in data
structures, compiled code) keeps plain buffers, and a traced write into them stays the
clear error it was. Integer, boolean and complex allocations stay plain numpy.

``allocations="strict"`` on a transform turns the view off.

Example:
    >>> import numpy as np, dualad as ad
    >>> def rhs(y):
    ...     dydt = np.zeros(2)
    ...     dydt[0] = -y[0] * y[1]
    ...     dydt[1] = y[0]
    ...     return dydt
    >>> ad.jacobian(rhs)(np.array([1.0, 2.0]))
    array([[-2., -1.],
           [ 1.,  0.]])
"""

from __future__ import annotations

import builtins
import contextvars
import dis
import functools
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ConversionError
from .tracing import Traced, innermost
from .trees import tree_flatten

__all__ = ["POLICIES", "allocation_policy", "check_policy", "promoting", "active_prototype"]

POLICIES = ("promote", "strict")

_prototype: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "dualad_allocation_prototype", default=None)

# Packages whose functions are not rewritten: numpy's own allocations are its business,
# dualad's and the scientific stack's are not user simulation code, the standard library
# never writes traced values into fresh buffers.
_KEEP = frozenset({
    "numpy", "scipy", "dualad", "numba", "llvmlite", "jax", "jaxlib", "torch", "dask",
    "distributed", "plum", "pandas", "xarray", "autograd", "pytest", "_pytest",
    "hypothesis", "cloudpickle", "IPython",
}) | frozenset(getattr(sys, "stdlib_module_names", ()))

_STRICT_ATTRIBUTE = "__dualad_allocations__"


def active_prototype() -> Any:
    """The traced array that float allocations copy in the current context, or ``None``."""
    return _prototype.get()


def check_policy(allocations: str, fname: str) -> None:
    """Raise a ``ValueError`` naming ``fname`` unless ``allocations`` is a known policy."""
    if allocations not in POLICIES:
        raise ValueError(
            f"{fname}: allocations={allocations!r} is not one of {POLICIES}; 'promote' (the "
            f"default) lets np.zeros / np.empty / np.ones / np.full buffers inside the "
            f"function hold derivatives, 'strict' leaves them plain numpy."
        )


def allocation_policy(f: Callable[..., Any], allocations: str, fname: str) -> Callable[..., Any]:
    """``f`` marked with the policy a transform was given (``"promote"``: ``f`` itself).

    Example:
        >>> strict = allocation_policy(lambda x: 2 * x, "strict", "jacobian")
        >>> strict(3), promoting(strict) is strict
        (6, True)
    """
    check_policy(allocations, fname)
    if allocations == "promote" or not isinstance(f, (types.FunctionType, types.MethodType,
                                                        functools.partial)):
        return f  # compiled functions (numba.njit) and other callables are not rewritten

    @functools.wraps(f)
    def strict(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)

    setattr(strict, _STRICT_ATTRIBUTE, "strict")
    return strict


def promoting(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f``, run through the view when it writes traced values into plain buffers.

    A call runs ``f`` as it is first. When it fails with a :class:`ConversionError` (a traced
    value written into ``np.zeros(n)``, say), the call runs again through the view, with the
    innermost traced argument as the prototype of float allocations, and later calls of the
    same code go through the view directly. Functions that never write traced values into
    plain buffers keep their plain constants (``np.full(n, 1.5)`` stays a numpy array).
    """
    if getattr(f, _STRICT_ATTRIBUTE, None) is not None:
        return f
    return _Promoting(f)


class _Promoting:
    """The function :func:`promoting` returns (pickles as ``promoting(f)``). Its state is
    in slots, so wrappers made with ``functools.wraps`` copy only the marker and names."""

    __slots__ = ("f", "key", "view", "plain_since", "__dict__")

    def __init__(self, f: Callable[..., Any]) -> None:
        functools.update_wrapper(self, f)
        self.f = f
        self.key = _decision_key(f)
        self.view: Any = None
        # the count of promotions when this code was last seen unpromoted: while no code is
        # promoted, later calls skip the (weak) dictionary of decisions
        self.plain_since = -1
        setattr(self, _STRICT_ATTRIBUTE, "promote")

    def __reduce__(self) -> tuple:
        return promoting, (self.f,)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # as a method, like a function
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self.key
        if self.plain_since == _promotions[0]:
            promote = False
        else:
            promote = key is not None and _promoted.get(key, False)
            if not promote:
                self.plain_since = _promotions[0]
        if not promote:
            try:
                return self.f(*args, **kwargs)
            except (TypeError, ValueError) as e:
                if not _conversion_failure(e):
                    raise
        proto = innermost(args, kwargs)
        if proto is None:
            proto = _first_traced_leaf(args, kwargs)
        if self.view is None:
            self.view = _rewrite_callable(self.f)
        token = _prototype.set(proto)
        try:
            out = self.view(*args, **kwargs)
        finally:
            _prototype.reset(token)
        if not promote and key is not None:
            _promoted[key] = True
            _promotions[0] += 1
        return out


_promoted: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_promotions = [0]  # how many codes were promoted so far (see _Promoting.plain_since)


def _decision_key(f: Any) -> Any:
    """What a promotion decision is remembered for: the user's code (shared by every
    closure of it), found through dualad's own wrappers (``lambda y: f(t, y)``)."""
    for _ in range(16):
        if isinstance(f, types.MethodType):
            f = f.__func__
        elif isinstance(f, functools.partial):
            f = f.func
        elif getattr(f, "__wrapped__", None) is not None:
            f = f.__wrapped__
        elif isinstance(f, types.FunctionType) and not _user_code(f.__module__) \
                and f.__closure__:
            inner = [c.cell_contents for c in f.__closure__ if _bound_callable(c)]
            if not inner:
                break
            f = inner[0]
        else:
            break
    code = getattr(f, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def _bound_callable(cell: Any) -> bool:
    try:
        content = cell.cell_contents
    except ValueError:
        return False
    return isinstance(content, (types.FunctionType, types.MethodType, functools.partial))


def _conversion_failure(e: BaseException) -> bool:
    """Whether ``e`` is a traced value turned into plain numbers (a write into a buffer)."""
    return isinstance(e, ConversionError) or isinstance(e.__cause__, ConversionError)


def _first_traced_leaf(args: tuple, kwargs: dict) -> Any:
    best = None
    try:
        leaves, _ = tree_flatten((args, kwargs))
    except (TypeError, ValueError):
        return None
    for leaf in leaves:
        if isinstance(leaf, Traced) and (best is None or leaf.level > best.level):
            best = leaf
    return best


# -- the allocators --------------------------------------------------------------------------


def _is_float(dtype: Any) -> bool:
    try:
        return np.dtype(dtype).kind == "f"
    except TypeError:
        return False


def zeros(shape: Any, dtype: Any = float, order: Any = "C", *, like: Any = None) -> Any:
    """``np.zeros``; inside a transform, a float buffer that can hold derivatives."""
    proto = _prototype.get()
    if proto is None or like is not None or not _is_float(dtype):
        return np.zeros(shape, dtype, order, like=like)
    return np.zeros_like(proto, dtype=dtype, order=order, shape=shape)


def empty(shape: Any, dtype: Any = float, order: Any = "C", *, like: Any = None) -> Any:
    """``np.empty``; inside a transform, a (zero-filled) float buffer for derivatives."""
    proto = _prototype.get()
    if proto is None or like is not None or not _is_float(dtype):
        return np.empty(shape, dtype, order, like=like)
    return np.zeros_like(proto, dtype=dtype, order=order, shape=shape)


def ones(shape: Any, dtype: Any = None, order: Any = "C", *, like: Any = None) -> Any:
    """``np.ones``; inside a transform, a float buffer that can hold derivatives."""
    proto = _prototype.get()
    if proto is None or like is not None or not _is_float(float if dtype is None else dtype):
        return np.ones(shape, dtype, order, like=like)
    return np.ones_like(proto, dtype=float if dtype is None else dtype, order=order,
                        shape=shape)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: Any = "C", *,
         like: Any = None) -> Any:
    """``np.full``; inside a transform, a float buffer that can hold derivatives."""
    proto = _prototype.get()
    if proto is None or like is not None:
        return np.full(shape, fill_value, dtype, order, like=like)
    traced_fill = isinstance(fill_value, Traced)
    if dtype is None:
        dtype = float if traced_fill else np.result_type(fill_value)
    if not _is_float(dtype):
        return np.full(shape, fill_value, dtype, order)
    if traced_fill and proto.level < fill_value.level:
        proto = fill_value
    return np.full_like(proto, fill_value, dtype=dtype, order=order, shape=shape)


_ALLOCATORS: dict[Any, Any] = {np.zeros: zeros, np.empty: empty, np.ones: ones, np.full: full}
_ALLOCATOR_NAMES = {f.__name__: view for f, view in _ALLOCATORS.items()}


# -- views of numpy, of user modules and of user functions -----------------------------------


class _NumpyView:
    """``numpy`` with the float allocators above; every other name is numpy's own."""

    __slots__ = ("__dict__",)

    def __getattr__(self, name: str) -> Any:
        value = _ALLOCATOR_NAMES.get(name)
        if value is None:
            value = getattr(np, name)
        self.__dict__[name] = value  # numpy's names do not change: look each up once
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(np, name, value)

    def __repr__(self) -> str:
        return "<numpy, with dualad's promotable float allocations>"

    __name__ = "numpy"


_NUMPY = _NumpyView()


class _ModuleView:
    """A user module whose functions and submodules are seen through the view."""

    __slots__ = ("_module",)

    def __init__(self, module: types.ModuleType) -> None:
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> Any:
        return _translate(getattr(self._module, name))

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._module, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._module, name)

    def __dir__(self) -> list[str]:
        return dir(self._module)

    def __repr__(self) -> str:
        return f"<view of {self._module!r}>"


def _user_code(module_name: Any) -> bool:
    if not isinstance(module_name, str):
        return True
    return module_name.split(".", 1)[0] not in _KEEP


_module_view_refs: dict[str, _ModuleView] = {}


def _module_view(module: types.ModuleType) -> Any:
    if module is np:
        return _NUMPY
    if not _user_code(module.__name__):
        return module
    view = _module_view_refs.get(module.__name__)
    if view is None or view._module is not module:
        view = _module_view_refs[module.__name__] = _ModuleView(module)
    return view


def _translate(value: Any) -> Any:
    """``value`` as rewritten code sees it."""
    if isinstance(value, types.FunctionType):
        return _rewrite_function(value)
    if isinstance(value, types.ModuleType):
        return _module_view(value)
    if isinstance(value, types.BuiltinFunctionType) or callable(value):
        try:
            return _ALLOCATORS.get(value, value)
        except TypeError:  # unhashable callables
            return value
    return value


# Types of globals the view hands over unchanged (read on every global access of a model).
_SEEN_AS_IS = frozenset((float, int, bool, complex, str, bytes, type(None), tuple, list, dict,
                         np.ndarray, np.float64, np.int64))


class _GlobalsView(dict):
    """A module's globals as rewritten code reads them (Python's ``LOAD_GLOBAL`` calls
    ``__getitem__`` of a dict subclass); the dict itself holds only the builtins."""

    def __init__(self, source: dict) -> None:
        super().__init__(__builtins__=_builtins_view(source.get("__builtins__", builtins)))
        self.source = source
        self.seen: dict[str, tuple[Any, Any]] = {}

    def __getitem__(self, name: str) -> Any:
        value = self.source[name]
        if type(value) in _SEEN_AS_IS:  # constants of the model (rates, sizes, arrays)
            return value
        hit = self.seen.get(name)
        if hit is not None and hit[0] is value:
            return hit[1]
        seen = _translate(value)
        self.seen[name] = (value, seen)
        return seen

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return name in self.source


def _import_through_view(name: str, globals: Any = None, locals: Any = None,  # noqa: A002
                         fromlist: Any = (), level: int = 0) -> Any:
    if isinstance(globals, _GlobalsView):
        globals = globals.source  # noqa: A001  (relative imports resolve in the real module)
    return _translate(builtins.__import__(name, globals, locals, fromlist, level))


_BUILTINS_VIEW = dict(vars(builtins), __import__=_import_through_view)


def _builtins_view(source: Any) -> dict:
    if source is builtins or source is vars(builtins):
        return _BUILTINS_VIEW
    plain = vars(source) if isinstance(source, types.ModuleType) else source
    return dict(plain, __import__=_import_through_view)


_globals_views: dict[int, _GlobalsView] = {}
_rewritten: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_WRITES_GLOBALS = frozenset(dis.opmap[name] for name in ("STORE_GLOBAL", "DELETE_GLOBAL"))


def _globals_view(source: dict) -> _GlobalsView:
    view = _globals_views.get(id(source))
    if view is None or view.source is not source:
        view = _globals_views[id(source)] = _GlobalsView(source)
    return view


@functools.lru_cache(maxsize=4096)
def _writes_globals(code: types.CodeType) -> bool:
    """Whether ``code`` (or code nested in it) assigns a global, which the view cannot do.
    Read from the opcodes (every other byte of the word code; measured: 1 ms for POLLU's
    right-hand side by ``dis.get_instructions``, 2 µs so)."""
    if not _WRITES_GLOBALS.isdisjoint(code.co_code[::2]):
        return True
    return any(isinstance(c, types.CodeType) and _writes_globals(c) for c in code.co_consts)


def _rewrite_function(fn: types.FunctionType) -> Any:
    """``fn`` with the same code, seeing globals and closure cells through the view."""
    done = _rewritten.get(fn)
    if done is not None:
        return done
    user = _user_code(fn.__module__) or fn.__code__.co_filename.startswith("<")
    # dualad's own wrappers (``lambda y: f(t, y)``) keep their globals; the user functions
    # in their closures are seen through the view
    wrapper = not user and fn.__closure__ is not None and \
        str(fn.__module__).split(".", 1)[0] == "dualad"
    if getattr(fn, _STRICT_ATTRIBUTE, None) == "strict" or not (user or wrapper) \
            or not isinstance(fn.__globals__, dict) or isinstance(fn.__globals__, _GlobalsView) \
            or (user and _writes_globals(fn.__code__)):
        _rewritten[fn] = fn
        return fn
    cells = fn.__closure__
    translated: list[tuple[Any, Any]] = []
    if cells:
        new_cells = []
        for cell in cells:
            try:
                content = cell.cell_contents
            except ValueError:  # not yet bound: keep sharing it
                new_cells.append(cell)
                continue
            if isinstance(content, (types.FunctionType, types.ModuleType)) or \
                    _translatable_builtin(content):
                fresh = types.CellType()
                new_cells.append(fresh)
                translated.append((fresh, content))
            else:
                new_cells.append(cell)
        cells = tuple(new_cells)
    if wrapper and not translated:
        _rewritten[fn] = fn
        return fn
    scope = _globals_view(fn.__globals__) if user else fn.__globals__
    defaults = fn.__defaults__
    if user and defaults and any(isinstance(d, types.FunctionType) for d in defaults):
        defaults = tuple(_translate(d) if isinstance(d, types.FunctionType) else d
                         for d in defaults)
    new = types.FunctionType(fn.__code__, scope, fn.__name__, defaults, cells)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    _rewritten[fn] = new
    for fresh, content in translated:  # after caching: recursive closures find ``new``
        fresh.cell_contents = _translate(content)
    return new


def _translatable_builtin(value: Any) -> bool:
    try:
        return value in _ALLOCATORS
    except TypeError:
        return False


def _rewrite_callable(f: Any) -> Callable[..., Any]:
    if isinstance(f, types.FunctionType):
        return _rewrite_function(f)
    if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        return types.MethodType(_rewrite_function(f.__func__), f.__self__)
    if isinstance(f, functools.partial) and isinstance(f.func, types.FunctionType):
        return functools.partial(_rewrite_function(f.func), *f.args, **f.keywords)
    return f
