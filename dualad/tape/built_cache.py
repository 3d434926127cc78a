"""The disk cache of generated entries, keyed by the lowered program: a new process that
lowers a program compiled before imports the module written then (and Numba loads its
compiled code) without writing the source again.

The key is a digest of everything the source is written from: the entry and its
arguments, the lowered instructions, sizes, shapes, outputs and input guards, the
module-level settings
of the writer's modules (the compile caps, the scalar forms; a test or a user may change
them), the versions of numpy and Numba, and :func:`~dualad.tape.pattern_cache.code_stamp`
(dualad's sources and rules tables). Programs that call functions run as themselves
(``Call`` instructions) are not kept: a function is known here by its name only. A kept
entry names its module, which is read back and checked against its digest (the module's
name) before it is imported; anything missing or damaged reads as absent, and the entry is
written again.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import lower
    >>> from dualad.tape.built_cache import entry_key, program_digest
    >>> low = lower(record(lambda x: np.sin(x) * x, np.ones(3)).program, [np.ones(3)])
    >>> len(entry_key(program_digest(low), "gradient", ((0,), False, True)))
    64
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..derivatives.codegen import import_kernel_module, kernel_cache_directory
from .lowering import Call, Lowered
from .pattern_cache import code_stamp

__all__ = ["Built", "entry_key", "load_built", "program_digest", "settings_stamp",
           "store_built"]

#: The stored layout's version: a file of another version reads as absent.
_FORMAT = 1
#: The packages whose module-level settings (upper-case names) the writer reads.
_SETTINGS_OF = ("dualad.tape.", "dualad.derivatives.")


@dataclass(frozen=True)
class Built:
    """How an entry was made: ``function`` of the generated module ``module`` (in the
    cache's ``tapes`` folder), with the constant ``arrays`` bound first; ``zeroed`` (a
    Jacobian's ``(m, K)``) when the caller hands it a matrix of zeros before them. Or why
    it was not: ``refused``, the writer's reason (a program beyond the compile-cost cap
    goes to the interpreter without its source written again up to the cap)."""

    module: str = ""
    function: str = ""
    arrays: tuple[np.ndarray, ...] = ()
    zeroed: tuple[int, int] | None = None
    refused: str = ""


def settings_stamp() -> bytes:
    """The public module-level settings (upper-case names) of the writer's modules and
    the versions of numpy and Numba, pickled (the rules' expressions are in the lowered
    instructions themselves)."""
    values = [(name, attr, getattr(module, attr, None)) for name, module, attr in _settings()]
    values = [(n, a, sorted(v, key=repr) if isinstance(v, frozenset) else v)  # (a set's
              for n, a, v in values]  # order is its own per process)
    try:
        return pickle.dumps((np.__version__, _numba_version(), values), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):  # a function in a table
        return pickle.dumps((np.__version__, _numba_version(), [
            (n, a, v if isinstance(v, (bool, int, float, str)) else repr(v))
            for n, a, v in values]), protocol=5)


_names: dict[str, tuple[Any, list[str]]] = {}  # module name -> (module, its settings)


def _settings() -> list[tuple[str, Any, str]]:
    """``(module name, module, name)`` of each setting. The names a module defines are
    read once per module (a module imported since is read then); their values are read
    at each stamp."""
    found = []
    for name in sorted(n for n in list(sys.modules) if n.startswith(_SETTINGS_OF)):
        module = sys.modules.get(name)
        if module is None:
            continue
        known = _names.get(name)
        if known is None or known[0] is not module:
            known = _names[name] = (module, [
                attr for attr, value in list(vars(module).items())
                if attr.isupper() and not attr.startswith("_") and isinstance(
                    value, (bool, int, float, str, tuple, frozenset, dict))])
        found += [(name, module, attr) for attr in known[1]]
    return found


def _numba_version() -> str:
    import numba

    return numba.__version__


def program_digest(low: Lowered) -> Any:
    """A running digest (``hashlib``) of what entries of ``low`` are written from: the
    lowered instructions, sizes, shapes, outputs and input guards, the writer's settings
    and dualad's code; None when the program cannot be kept (it calls functions run as
    themselves, or holds what does not pickle). Computed once per program: each entry's
    key extends a copy (:func:`entry_key`)."""
    if any(isinstance(ins, Call) for ins in low.instructions):
        return None
    program = low.program
    try:
        data = pickle.dumps((_FORMAT, low.instructions, low.sizes, low.shapes,
                             program.outputs, program.n_inputs,
                             [list(g) for g in program.input_guards]), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    h = hashlib.sha256(data)
    h.update(settings_stamp())
    h.update(code_stamp().encode())
    return h


def entry_key(program: Any, entry: str, args: tuple) -> str | None:
    """The key of ``entry`` called with ``args`` of a program whose
    :func:`program_digest` is ``program`` (None: not kept)."""
    if program is None:
        return None
    try:
        data = pickle.dumps((entry, args), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    h = program.copy()
    h.update(data)
    return h.hexdigest()


def _path(key: str) -> Path:
    return kernel_cache_directory() / "tapes" / "built" / f"{key[:40]}.entry"


def store_built(key: str, built: Built) -> None:
    """Keep ``built`` under ``key`` (written whole or not at all; a read-only cache keeps
    nothing). The file: a line of JSON, the arrays' bytes, a CRC-32 of both."""
    arrays = [np.ascontiguousarray(a) for a in built.arrays]
    head = json.dumps({"format": _FORMAT, "key": key, "module": built.module,
                       "function": built.function, "zeroed": built.zeroed,
                       "refused": built.refused,
                       "arrays": [[a.dtype.str, list(a.shape)] for a in arrays]})
    data = head.encode() + b"\n" + b"".join(a.tobytes() for a in arrays)
    path = _path(key)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data + zlib.crc32(data).to_bytes(4, "little"))
        os.replace(tmp, path)


def _read(path: Path, key: str) -> tuple[dict, tuple[np.ndarray, ...]] | None:
    """The header and arrays kept in ``path`` for ``key``; None if absent or damaged."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    data, crc = raw[:-4], raw[-4:]
    if len(raw) < 5 or zlib.crc32(data).to_bytes(4, "little") != crc:
        return None
    head, sep, rest = data.partition(b"\n")
    meta = json.loads(head)
    if not sep or meta.get("format") != _FORMAT or meta.get("key") != key:
        return None
    arrays, at = [], 0
    for dtype, shape in meta["arrays"]:
        kind = np.dtype(dtype)
        if kind.kind not in "biuf":
            return None
        size = int(np.prod(shape, dtype=np.int64)) * kind.itemsize
        arrays.append(np.frombuffer(rest, dtype=kind, count=size // kind.itemsize,
                                    offset=at).reshape(shape).copy())  # writable: the
        at += size  # array type the kept code was compiled for
    return (meta, tuple(arrays)) if at == len(rest) else None


def load_built(key: str) -> tuple[Built, Any] | None:
    """``(the entry kept under key, its module imported)`` (a refusal: no module); None
    when there is none, or its file or module is missing or damaged."""
    path = _path(key)
    if not path.exists():
        return None
    try:
        found = _read(path, key)
        if found is None:
            raise ValueError("damaged")
        meta, arrays = found
        refused = str(meta.get("refused") or "")
        if refused:
            return Built(refused=refused), None
        module_name, function = str(meta["module"]), str(meta["function"])
        zeroed = meta.get("zeroed")
        zeroed = None if zeroed is None else (int(zeroed[0]), int(zeroed[1]))
        module = sys.modules.get(module_name)
        if module is None:
            source = (kernel_cache_directory() / "tapes" / f"{module_name}.py").read_text()
            digest = hashlib.sha256(source.encode()).hexdigest()[:20]
            if module_name != f"dualad_kernel_{digest}":  # not the module kept
                return None
            module = import_kernel_module(source, subdirectory="tapes")
        if not callable(getattr(module, function, None)):
            return None
    except Exception:  # noqa: BLE001 -- a damaged file reads as absent
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return Built(module_name, function, arrays, zeroed), module
