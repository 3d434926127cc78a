"""The one writer of generated modules: rule kernels (forward mode), njit drivers and
compiled tapes write their Python source here and import it back.

A module is written once to the kernel cache directory, named by a digest of its source
(or a given name), so Numba's ``cache=True`` finds its compiled code beside the file in
later processes; a source that changed rewrites the file.

Example:
    >>> from dualad.derivatives.codegen import import_kernel_module
    >>> import_kernel_module("ANSWER = 42").ANSWER
    42
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["forget_compiled", "import_kernel_module", "kernel_cache_directory"]

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


def import_kernel_module(source: str, modname: str | None = None,
                         subdirectory: str = "") -> Any:
    """Write generated ``source`` to the kernel cache directory (once) and import it.

    ``modname`` defaults to a digest of the source; modules are kept by name, so Numba's
    ``cache=True`` finds its compiled code beside the file in later processes.
    """
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
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException:
            del sys.modules[modname]
            raise
        return module


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
