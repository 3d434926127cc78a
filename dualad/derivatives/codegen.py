"""The one writer of generated modules: rule kernels (forward mode), njit drivers and
compiled tapes write their Python source here and import it back.

A module is written once to the kernel cache directory, named by a digest of its source
(or a given name), so Numba's ``cache=True`` finds its compiled code beside the file in
later processes; a source that changed rewrites the file. Cached files that are corrupt
or truncated (a crash mid-write, a full disk) are detected, removed and rebuilt, with a
:class:`KernelCacheWarning` once per process.

Example:
    >>> from dualad.derivatives.codegen import import_kernel_module
    >>> import_kernel_module("ANSWER = 42").ANSWER
    42
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.util
import io
import json
import os
import pickle
import pickletools
import py_compile
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

__all__ = [
    "KernelCacheWarning",
    "forget_compiled",
    "import_kernel_module",
    "kernel_cache_directory",
]

_kernel_lock = threading.Lock()


def kernel_cache_directory() -> Path:
    """Where kernel modules (and Numba's caches beside them) are written.

    ``$DUALAD_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/dualad/kernels`` (default
    ``~/.cache/dualad/kernels``), else a directory in the system's temporary directory.
    """
    candidates = []
    if os.environ.get("DUALAD_KERNEL_CACHE"):
        candidates.append(Path(os.environ["DUALAD_KERNEL_CACHE"]))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append(Path(xdg) / "dualad" / "kernels")
    user = getattr(os, "getuid", lambda: "user")()
    candidates.append(Path(tempfile.gettempdir()) / f"dualad-kernels-{user}")
    for path in candidates:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise OSError("dualad: no writable directory for kernel modules")


class KernelCacheWarning(UserWarning):
    """A file of the kernel cache was corrupt (removed and rebuilt)."""


_cache_warned = [False]


def _pickle_intact(data: bytes) -> bool:
    """Whether ``data`` is one whole pickle (walked, not loaded: nothing is run)."""
    try:
        for _ in pickletools.genops(io.BytesIO(data)):
            pass
    except Exception:  # noqa: BLE001 - any failure to parse is a corrupt file
        return False
    return True


def _numba_index_intact(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            pickle.load(f)  # numba's version string
            rest = f.read()
    except Exception:  # noqa: BLE001
        return False
    return _pickle_intact(rest)


def _numba_cache_files(cache: Path, modname: str) -> dict[str, os.stat_result]:
    """Numba's cache files of ``modname`` in ``cache`` (its ``__pycache__``), by name."""
    prefix = f"{modname}."
    try:
        with os.scandir(cache) as entries:
            return {e.name: e.stat() for e in entries if e.name.startswith(prefix)
                    and e.name.endswith((".nbi", ".nbc"))}
    except OSError:
        return {}


def _stamps(files: dict[str, os.stat_result]) -> str:
    return json.dumps(sorted([name, st.st_size, st.st_mtime_ns] for name, st in files.items()))


def _corrupt_cache_files(directory: Path, modname: str) -> list[Path]:
    """Numba's cache files (index ``.nbi``, data ``.nbc``) of ``modname`` that are corrupt
    or truncated, with the files of the same function (an index and its data go together);
    Python's ``.pyc`` when it is unreadable.

    Files found intact are recorded with their sizes and modification times (a
    ``.intact`` file beside them); files unchanged since are not read again."""
    cache = directory / "__pycache__"
    files = _numba_cache_files(cache, modname)
    if not files:
        return []
    marker = cache / f"{modname}.intact"
    stamps = _stamps(files)
    try:
        if marker.read_text() == stamps:
            return []
    except (OSError, UnicodeDecodeError):
        pass
    bad: list[Path] = []
    for name in files:
        if not name.endswith(".nbi"):
            continue
        index = cache / name
        base = name[: -len(".nbi")]
        data = [cache / d for d in files if d.startswith(f"{base}.") and d.endswith(".nbc")]
        if not _numba_index_intact(index) or not all(_pickle_intact(d.read_bytes())
                                                       for d in data):
            bad += [index] + data
    if not bad:
        with contextlib.suppress(OSError):
            tmp = marker.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(stamps)
            os.replace(tmp, marker)
    return bad


def _write_bytecode(path: Path) -> None:
    """Python's cached bytecode of the generated module at ``path``, written even where
    ``PYTHONDONTWRITEBYTECODE`` is set (that setting keeps ``.pyc`` files out of source
    trees; this is dualad's own cache directory, where Numba's files lie too)."""
    if not sys.dont_write_bytecode:
        return  # the import writes it
    pyc = importlib.util.cache_from_source(str(path))
    try:
        if os.stat(pyc).st_mtime_ns >= os.stat(path).st_mtime_ns:
            return
    except OSError:
        pass
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        py_compile.compile(str(path), cfile=pyc, doraise=True)


def _warn_corrupt(paths: list[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()
    if paths and not _cache_warned[0]:
        _cache_warned[0] = True
        warnings.warn(
            f"dualad: corrupt or truncated kernel cache file(s) {', '.join(p.name for p in paths)}"
            f" in {paths[0].parent} (a crash while writing, a full disk?) were removed and are "
            f"rebuilt; further repairs in this process are not reported.",
            KernelCacheWarning, stacklevel=3)


def import_kernel_module(source: str, modname: str | None = None,
                         subdirectory: str = "") -> Any:
    """Write generated ``source`` to the kernel cache directory (once) and import it.

    ``modname`` defaults to a digest of the source; modules are kept by name, so Numba's
    ``cache=True`` finds its compiled code beside the file in later processes. Cached
    files that are corrupt or truncated (Numba's index and data files, the module, its
    ``.pyc``) are detected, removed and rebuilt, with a :class:`KernelCacheWarning` (once
    per process).
    """
    digest_named = modname is None
    if modname is None:
        modname = f"dualad_kernel_{hashlib.sha256(source.encode()).hexdigest()[:20]}"
    with _kernel_lock:
        if modname in sys.modules:
            return sys.modules[modname]
        directory = kernel_cache_directory()
        if subdirectory:
            directory = directory / subdirectory
            directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{modname}.py"
        try:
            current = path.read_text() if path.exists() else None
        except (OSError, UnicodeDecodeError):
            current = ""
        if current != source:
            if current is not None and digest_named:  # named by its digest: damaged
                _warn_corrupt([path] + list((directory / "__pycache__").glob(
                    f"{glob.escape(modname)}.*")))
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        _warn_corrupt(_corrupt_cache_files(directory, modname))
        _write_bytecode(path)
        for attempt in (0, 1):
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[modname] = module
            try:
                spec.loader.exec_module(module)  # type: ignore[union-attr]
            except (EOFError, ValueError, ImportError) as e:
                del sys.modules[modname]
                pyc = Path(importlib.util.cache_from_source(str(path)))
                if attempt or not pyc.exists() or isinstance(e, ModuleNotFoundError):
                    raise
                _warn_corrupt([pyc])  # unreadable bytecode: compiled again from the source
                continue
            except BaseException:
                del sys.modules[modname]
                raise
            return module
        raise AssertionError("unreachable")


def forget_compiled(function: Any) -> None:
    """Delete Numba's on-disk cache of the generated module that defines ``function`` (a
    Numba dispatcher), e.g. after loading it failed because the files are corrupt; the next
    call compiles again and writes them anew."""
    function = getattr(function, "func", function)  # a functools.partial of it
    py_func = getattr(function, "py_func", function)
    module = sys.modules.get(getattr(py_func, "__module__", ""), None)
    path = getattr(module, "__file__", None)
    if path is None:
        return
    source = Path(path)
    cache = source.parent / "__pycache__"
    if not cache.is_dir():
        return
    for entry in cache.iterdir():
        if entry.name.startswith(source.stem + ".") and entry.suffix in (".nbi", ".nbc"):
            try:
                entry.unlink()
            except OSError:
                pass
