"""Simplification of generated kernel source before it is compiled.

The code generator writes every value, partial and stored entry of a recorded program as
its own local; a transform that needs only part of them (a Jacobian reads the partials,
not the outputs' values) leaves assignments nothing reads, and partials that are plain
numbers. Numba's compile time grows with the number of statements it types and lowers
(LLVM removes dead code only after Numba has paid for it), so :func:`prune` drops
assignments to locals nothing reads and writes literal constants into their readers.

Example:
    >>> body = ["    _d0 = 0.35", "    _l1 = _x0 * 2.0", "    _u1 = _s * _d0",
    ...         "    for _i in range(3):", "        _n2 = _l1", "    return _u1"]
    >>> print("\\n".join(prune([("numba", body)])[0][1]))
        _u1 = _s * 0.35
        return _u1
"""

from __future__ import annotations

import re

__all__ = ["prune"]

_ASSIGN = re.compile(r"^(\s+)(_\w+) = (.+)$")
_UPDATE = re.compile(r"^\s+(_\w+)\s*(?:[-+*/]=|\[)")
_NAME = re.compile(r"\b_\w+\b")
_LITERAL = re.compile(r"^-?(?:\d+\.\d*|\d+)(?:e[-+]?\d+)?$")
_BINDER = re.compile(r"^\s+(?:for\s+([\w, ]+?)\s+in\b|([\w, ]+,[\w, ]*)=[^=])")
_COPY = re.compile(r"^_\w+$")
_HEADER = re.compile(r"^\s+(?:for|if|elif|else|while)\b.*:$")


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def prune(segments: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """``segments`` (``(kind, lines)`` of one function body, see :mod:`.glue`) without
    assignments to locals that no line reads, and with locals assigned a number once
    replaced by that number. Source it does not understand is returned as it is."""
    lines = [line for _, part in segments for line in part]
    if any(line.rstrip().endswith(("\\", ",", "(", "[")) for line in lines):
        return segments
    # each line matched once: (the local it assigns, its value's source) or None
    assigns = []
    assigned: dict[str, int] = {}
    first: dict[str, int] = {}  # the line a local is first assigned at
    updated: set[str] = set()
    for i, line in enumerate(lines):
        m = _ASSIGN.match(line)
        assigns.append((m.group(2), m.group(3).strip()) if m else None)
        if m:
            assigned[m.group(2)] = assigned.get(m.group(2), 0) + 1
            first.setdefault(m.group(2), i)
        m = _UPDATE.match(line)
        if m:
            updated.add(m.group(1))
        m = _BINDER.match(line)  # loop variables and unpacked names: left alone
        if m:
            updated.update(_NAME.findall(m.group(1) or m.group(2)))
    constants: dict[str, str] = {}
    for i, found in enumerate(assigns):
        if found is None or assigned[found[0]] != 1 or found[0] in updated:
            continue
        target, value = found
        if _LITERAL.match(value):
            constants[target] = f"({value})" if value.startswith("-") else value
        elif _COPY.match(value) and value not in updated and \
                (value not in assigned or assigned[value] == 1 and first[value] < i):
            # a copy of another local assigned once before it: its readers read that one
            constants[target] = constants.get(value, value)
    drop = set(constants)
    # the names each line mentions (a copy's readers read its source); a dropped line's
    # names are counted off, which can leave the locals it read unread in turn
    mentions = [[constants.get(name, name) for name in _NAME.findall(line)] for line in lines]
    counts: dict[str, int] = {}
    assigning: dict[str, list[int]] = {}
    for i, found in enumerate(assigns):
        if found is not None:
            assigning.setdefault(found[0], []).append(i)
            if found[0] in drop:
                continue
        for name in mentions[i]:
            counts[name] = counts.get(name, 0) + 1
    todo = [name for name in assigned if name not in updated and name not in drop]
    while todo:
        name = todo.pop()
        if name in drop or counts.get(name, 0) != assigned[name]:
            continue
        drop.add(name)
        for i in assigning[name]:
            for read in mentions[i]:
                counts[read] -= 1
                if read in assigned and read not in updated and read not in drop:
                    todo.append(read)

    def substitute(match: re.Match[str]) -> str:
        return constants.get(match.group(0), match.group(0))

    pruned: list[tuple[str, list[str]]] = []
    i = 0
    for kind, part in segments:
        kept: list[str] = []
        for line in part:
            found = assigns[i]
            i += 1
            if found is not None and found[0] in drop:
                continue
            kept.append(_NAME.sub(substitute, line) if constants else line)
        pruned.append((kind, _without_empty_blocks(kept)))
    return pruned


def _without_empty_blocks(lines: list[str]) -> list[str]:
    """``lines`` without loops whose body was pruned away, and with ``pass`` as the body
    of any other block header left empty."""
    while True:
        empty = [i for i, line in enumerate(lines) if _HEADER.match(line) and
                 (i + 1 == len(lines) or _depth(lines[i + 1]) <= _depth(line))]
        loops = [i for i in empty if lines[i].lstrip().startswith(("for ", "while "))]
        if loops:
            lines = [line for i, line in enumerate(lines) if i not in set(loops)]
            continue
        for i in reversed(empty):
            lines = lines[:i + 1] + [" " * (_depth(lines[i]) + 4) + "pass"] + lines[i + 1:]
        return lines
