"""A generated entry as Numba functions chained by Python glue.

The code generator writes one function body as *segments*: lines for Numba, and lines
for plain Python (numpy calls where numpy's vectorised loops beat Numba's scalar ones).
:func:`assemble` turns them into a module: consecutive Numba lines become functions of
at most ``max_lines`` lines each (Numba's compile time grows faster than linearly with a
function's size; chained small functions compile in time proportional to the program),
cut between top-level statements; each takes the names it reads that earlier parts
defined, and returns the names that later parts read. One Numba part and no Python:
the entry is that Numba function itself (no glue).

Example:
    >>> src = assemble("f", [("numba", ["    a = x + 1.0", "    b = a * 2.0"]),
    ...                      ("python", ["    c = np.tanh(b)"]),
    ...                      ("numba", ["    return c - a"])], ["x"], max_lines=10)
    >>> print(src.split("def f(")[1].strip())
    x):
        a, b, = _part0(x)
        c = np.tanh(b)
        return _part2(a, c)
"""

from __future__ import annotations

import ast
import re
import textwrap

__all__ = ["assemble", "statements"]

DECORATOR = '@numba.njit(cache=True, error_model="numpy")'
#: A line that only names, reshapes or returns arrays: the same in Python as in Numba.
_PLAIN = re.compile(r"^    (?:return |_\w+ = )[\w ,.()]*$")
_METHODS = re.compile(r"\.(?:reshape|copy)\(")
_CALL = re.compile(r"\w\(")


def _plain(line: str) -> bool:
    """Whether a line only names, reshapes, copies or returns arrays (no arithmetic, no
    other call): it means the same in Python as in Numba."""
    return bool(_PLAIN.match(line)) and not _CALL.search(_METHODS.sub(".(", line))


def statements(lines: list[str]) -> list[list[str]]:
    """The top-level statements of a body (lines indented one level; deeper lines belong
    to the statement above them)."""
    found: list[list[str]] = []
    for line in lines:
        if line.startswith("    ") and not line.startswith("     ") or not found:
            found.append([line])
        else:
            found[-1].append(line)
    return found


class _Flow(ast.NodeVisitor):
    """Names a statement reads before it assigns them, and the names it assigns."""

    def __init__(self) -> None:
        self.assigned: set[str] = set()
        self.reads: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.assigned:
                self.reads.add(node.id)
        else:
            self.assigned.add(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            if node.target.id not in self.assigned:
                self.reads.add(node.target.id)
            self.assigned.add(node.target.id)
        else:
            self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for s in node.body + node.orelse:
            self.visit(s)


def _flow(lines: list[str]) -> tuple[set[str], set[str]]:
    flow = _Flow()
    flow.visit(ast.parse(textwrap.dedent("\n".join(lines))))
    return flow.reads, flow.assigned


def assemble(name: str, segments: list[tuple[str, list[str]]], params: list[str],
             max_lines: int) -> str:
    """The source of entry ``name(*params)`` (and its parts) from ``segments``."""
    parts: list[tuple[str, list[list[str]]]] = []
    for kind, lines in segments:
        if not lines:
            continue
        stmts = statements(lines)
        if kind == "python":
            parts.append(("python", stmts))
            continue
        current: list[list[str]] = []
        size = 0
        for s in stmts:
            if current and size + len(s) > max_lines:
                parts.append(("numba", current))
                current, size = [], 0
            current.append(s)
            size += len(s)
        if current:
            parts.append(("numba", current))
    if len(parts) > 1:  # a part that only names and reshapes arrays: no Numba call
        parts = [("python" if kind == "numba" and all(_plain(line) for st in stmts
                                                       for line in st) else kind, stmts)
                 for kind, stmts in parts]
    if len(parts) == 1 and parts[0][0] == "numba" and \
            not any(p.startswith("_call") for p in params):  # (a call object whose every
        body = [line for s in parts[0][1] for line in s]  # use was pruned: not Numba's)
        return "\n".join([DECORATOR, f"def {name}({', '.join(params)}):"] + body) + "\n"
    flows = []
    for _kind, stmts in parts:
        reads: set[str] = set()
        assigned: set[str] = set()
        for s in stmts:
            r, a = _flow(s)
            reads |= r - assigned
            assigned |= a
        flows.append((reads, assigned))
    later_reads: list[set[str]] = [set() for _ in parts]
    acc: set[str] = set()
    for i in range(len(parts) - 1, -1, -1):
        later_reads[i] = set(acc)
        acc |= flows[i][0]
    defined = set(params)
    functions: list[str] = []
    glue: list[str] = []
    for i, ((kind, stmts), (reads, assigned)) in enumerate(zip(parts, flows)):
        if kind == "python":
            glue += [line for s in stmts for line in s]
            defined |= assigned
            continue
        args = sorted(reads & defined)
        outs = sorted(assigned & later_reads[i])
        body = [line for s in stmts for line in s]
        returns = any(line.startswith("    return ") for line in body)
        if not returns:
            body.append(f"    return ({', '.join(outs)}{',' if outs else ''})")
        functions += ["", "", DECORATOR, f"def _part{i}({', '.join(args)}):"] + body
        call = f"_part{i}({', '.join(args)})"
        if returns:
            glue.append(f"    return {call}")
        elif outs:
            glue.append(f"    {', '.join(outs)}, = {call}")
        else:
            glue.append(f"    {call}")
        defined |= assigned
    return "\n".join(functions + ["", "", f"def {name}({', '.join(params)}):"] + glue) + "\n"
