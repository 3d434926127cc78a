"""Detected Jacobian patterns and their column colourings, kept on disk by program.

A compiled sparse (or compressed dense) Jacobian needs its sparsity pattern and a colouring
of its columns before its kernel can be written; detecting the pattern (index sets through
the function) and colouring it cost a new process several milliseconds per function, more
than loading the compiled kernel itself. Both are functions of the recorded program: the
lowered program fixes every operation, constant and guard (the branches taken), so the
pattern detected at one call holds for every call the recording serves. They are kept in
the kernel cache directory under a digest of the lowered program and the differentiated
slots, with a checksum: a damaged or foreign file reads as absent and is detected again.

Example:
    >>> import numpy as np
    >>> from dualad.tape.pattern_cache import digest
    >>> digest([np.arange(3), "sin", (1, 2.5)]) == digest([np.arange(3), "sin", (1, 2.5)])
    True
    >>> digest([np.arange(3)]) == digest([np.arange(3.0)])  # the dtype counts
    False
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..derivatives.codegen import kernel_cache_directory
from ..derivatives.tables import rules_directory

__all__ = ["Pattern", "code_stamp", "digest", "load_pattern", "store_pattern"]

#: The stored layout's version: a file of another version reads as absent.
_FORMAT = 1


@dataclass(frozen=True)
class Pattern:
    """A boolean CSR pattern (sorted column indices per row) and its column colouring."""

    shape: tuple[int, int]
    indptr: np.ndarray
    indices: np.ndarray
    colors: np.ndarray


def digest(value: Any) -> str | None:
    """A digest of ``value`` (dataclasses, lists, tuples, dicts, numpy arrays and scalars,
    strings, numbers, None), or None if it holds anything else. Walked iteratively."""
    h = hashlib.sha256()
    stack = [value]
    while stack:
        v = stack.pop()
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            h.update(f"{type(v).__name__}:{v!r};".encode())
        elif isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            if a.dtype.hasobject:
                return None
            h.update(f"nd:{a.dtype.str}:{a.shape};".encode())
            h.update(a.tobytes())
        elif isinstance(v, np.generic):
            h.update(f"np:{v.dtype.str}:{v!r};".encode())
        elif isinstance(v, (list, tuple)):
            h.update(f"{type(v).__name__}[{len(v)}];".encode())
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            h.update(f"dict[{len(v)}];".encode())
            for k in sorted(v, key=repr):
                stack.extend((v[k], k))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = dataclasses.fields(v)
            h.update(f"{type(v).__qualname__}[{len(fields)}];".encode())
            stack.extend(getattr(v, f.name) for f in reversed(fields))
        else:
            return None
    return h.hexdigest()


@functools.cache
def code_stamp() -> str:
    """A digest of the names, sizes and modification times of dualad's sources and rules
    tables: a pattern kept by another version of the detection is not read."""
    package = Path(__file__).resolve().parents[1]
    found = []
    for root in (package, rules_directory()):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".toml")):
                    st = os.stat(os.path.join(folder, name))
                    found.append((os.path.relpath(os.path.join(folder, name), root),
                                  st.st_size, st.st_mtime_ns))
    return digest(found) or ""


def _path(key: str) -> Path:
    directory = kernel_cache_directory() / "patterns"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{key[:40]}.pattern"


def store_pattern(key: str, pattern: Pattern) -> None:
    """Keep ``pattern`` under ``key`` (written whole or not at all)."""
    m, n = pattern.shape
    payload = np.concatenate([
        np.array([_FORMAT, m, n, pattern.indices.size], dtype=np.int64),
        pattern.indptr.astype(np.int64), pattern.indices.astype(np.int64),
        pattern.colors.astype(np.int64)]).tobytes()
    data = key.encode() + b"\n" + payload + zlib.crc32(payload).to_bytes(4, "little")
    path = _path(key)
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def load_pattern(key: str) -> Pattern | None:
    """The pattern kept under ``key``; None when there is none or the file is damaged."""
    try:
        data = _path(key).read_bytes()
    except OSError:
        return None
    head, sep, rest = data.partition(b"\n")
    if not sep or head != key.encode() or len(rest) < 36 or (len(rest) - 4) % 8:
        return None
    payload, crc = rest[:-4], rest[-4:]
    if zlib.crc32(payload) != int.from_bytes(crc, "little"):
        return None
    a = np.frombuffer(payload, dtype=np.int64)
    version, m, n, nnz = (int(v) for v in a[:4])
    if version != _FORMAT or min(m, n, nnz) < 0 or a.size != 4 + (m + 1) + nnz + n:
        return None
    indptr = a[4:5 + m].astype(np.intp)
    indices = a[5 + m:5 + m + nnz].astype(np.intp)
    colors = a[5 + m + nnz:].astype(np.intp)
    if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0) or \
            (nnz and (indices.min() < 0 or indices.max() >= n)) or \
            (n and (colors.min() < 0 or colors.max() >= n)):
        return None
    return Pattern((m, n), indptr, indices, colors)
