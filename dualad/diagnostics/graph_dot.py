"""Graphviz pictures of reverse-mode graphs and tapes: ``ad.to_dot(graph_or_tape)``.

Each operation is a box labelled with its function and its output's shape; inputs
(``Variable`` leaves, or a tape's arguments) are green ellipses, outputs have a double
border, constants are folded into the label of the operation that uses them. Value-only
operations of a tape (comparisons, indices: see :mod:`dualad.tape`) are dashed.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.ones(3))
    >>> from dualad.diagnostics.graph_dot import to_dot
    >>> text = to_dot(np.sum(np.sin(x)))
    >>> text.splitlines()[0], "sin" in text
    ('digraph dualad {', True)
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..core.array_protocol import shape_of
from ..core.operators import Operator, function_name
from ..reverse_mode.backward import topological_order
from ..reverse_mode.graph import AbstractNode, CachedNode, LeafNode
from ..tape import Program, ValueNode
from ..tape.recorded_tape import RecordedTape

__all__ = ["to_dot"]


def _op_name(op: Operator) -> str:
    f = getattr(op, "f", None)
    if f is None:
        return type(op).__name__
    return function_name(f).split(".<locals>.")[-1]


def _shape_text(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_shape_text(o) for o in x) + ")"
    try:
        shape = shape_of(x)
    except Exception:  # an object without a shape
        return type(x).__name__
    return str(tuple(shape)) if shape else "scalar"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _constant_text(a: Any) -> str:
    if isinstance(a, (int, float, bool)) or a is None:
        return repr(a)
    shape = getattr(a, "shape", None)
    if shape == ():
        return repr(a.item()) if hasattr(a, "item") else repr(a)
    if shape is not None:
        return f"const {_shape_text(a)}"
    text = repr(a)
    return text if len(text) <= 24 else type(a).__name__


_HEADER = ["digraph dualad {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']


def _graph_dot(root: AbstractNode) -> str:
    order = topological_order([root])
    ids = {id(n): f"n{i}" for i, n in enumerate(order)}
    lines = list(_HEADER)
    inputs = 0
    for n in order:
        name = ids[id(n)]
        peripheries = ", peripheries=2" if n is root else ""
        if isinstance(n, LeafNode) or not isinstance(n, CachedNode):
            label = f"input {inputs}\n{_shape_text(n._primal())}"
            inputs += 1
            lines.append(f"  {name} [label={_quote(label)}, shape=ellipse, style=filled, "
                         f"fillcolor=palegreen{peripheries}];")
            continue
        consts = [_constant_text(a) for a in n.args
                  if not (isinstance(a, AbstractNode) and id(a) in ids)
                  and not (type(a) in (list, tuple)
                           and any(isinstance(b, AbstractNode) for b in a))]
        label = _op_name(n.op) + (f"(…, {', '.join(consts)})" if consts else "")
        label += f"\n{_shape_text(n.output)}"
        style = ", style=dashed" if isinstance(n, ValueNode) else ""
        lines.append(f"  {name} [label={_quote(label)}, shape=box{style}{peripheries}];")
        for pos, a in enumerate(n.args):
            for b in (a if type(a) in (list, tuple) else (a,)):
                if isinstance(b, AbstractNode) and id(b) in ids:
                    lines.append(f"  {ids[id(b)]} -> {name} [label=\"{pos}\"];")
        for k, a in n.kwargs.items():
            if isinstance(a, AbstractNode) and id(a) in ids:
                lines.append(f"  {ids[id(a)]} -> {name} [label={_quote(k)}];")
    if root is not None and id(root) in ids:
        lines.append(f"  output [label=\"output\", shape=plaintext];\n  {ids[id(root)]} -> "
                     f"output;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _tape_dot(program: Program, title: str) -> str:
    lines = list(_HEADER)
    lines.insert(1, f"  label={_quote('tape of ' + title)};")
    out_slots = {s for is_slot, s in program.outputs if is_slot}
    for s in range(program.n_inputs):
        peripheries = ", peripheries=2" if s in out_slots else ""
        label = f"input {s}\n{_shape_text_of_shape(program.input_shapes[s])}"
        lines.append(f"  s{s} [label={_quote(label)}, shape=ellipse, style=filled, "
                     f"fillcolor=palegreen{peripheries}];")
    for e in program.ops:
        slot_positions = {pos for pos, _ in e.refs} | {pos for pos, _, _ in e.seqs}
        consts = [_constant_text(a) for pos, a in enumerate(e.template)
                  if pos not in slot_positions]
        label = _op_name(e.op) + (f"(…, {', '.join(consts)})" if consts else "")
        label += "\n" + ("tuple" if e.shape is None else _shape_text_of_shape(e.shape))
        if e.guards:
            label += "\nguard: " + ", ".join(f"{k} = {_short(v)}" for k, v in e.guards)
        style = "" if e.differentiable else ", style=dashed"
        peripheries = ", peripheries=2" if e.out in out_slots else ""
        lines.append(f"  s{e.out} [label={_quote(label)}, shape=box{style}{peripheries}];")
        for pos, s in e.refs:
            lines.append(f"  s{s} -> s{e.out} [label=\"{pos}\"];")
        for pos, _kind, items in e.seqs:
            for _j, s in items:
                lines.append(f"  s{s} -> s{e.out} [label=\"{pos}\"];")
        for k, s in e.kw_refs:
            lines.append(f"  s{s} -> s{e.out} [label={_quote(k)}];")
    for i, (is_slot, s) in enumerate(program.outputs):
        lines.append(f"  out{i} [label=\"output {i}\", shape=plaintext];")
        if is_slot:
            lines.append(f"  s{s} -> out{i};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _shape_text_of_shape(shape: tuple[int, ...]) -> str:
    return str(tuple(shape)) if shape else "scalar"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 16 else type(v).__name__


def to_dot(graph_or_tape: AbstractNode | RecordedTape, file: str | None = None) -> str:
    """Graphviz DOT text of a reverse-mode graph (from its output node) or of a tape.

    With ``file="g.svg"`` (or .png, .pdf), the picture is also drawn with Graphviz's
    ``dot`` program, which must be installed (a RuntimeError says so otherwise).
    """
    if isinstance(graph_or_tape, RecordedTape):
        if graph_or_tape.program is None:
            raise ValueError("to_dot: the tape has not recorded anything yet.")
        text = _tape_dot(graph_or_tape.program, graph_or_tape.__name__)
    elif isinstance(graph_or_tape, AbstractNode):
        text = _graph_dot(graph_or_tape)
    else:
        raise TypeError(
            f"to_dot expects a graph node (ad.Variable / ad.CachedNode, e.g. the output of "
            f"numpy calls on ad.Variable) or a tape from ad.record; got "
            f"{type(graph_or_tape).__name__}.")
    if file is not None:
        dot = shutil.which("dot")
        if dot is None:
            raise RuntimeError(
                f"to_dot(..., file={file!r}) needs Graphviz's dot program, which is not "
                f"installed; install graphviz, or write the returned text to a .dot file.")
        fmt = str(file).rsplit(".", 1)[-1] if "." in str(file) else "svg"
        subprocess.run([dot, f"-T{fmt}", "-o", str(file)], input=text.encode(), check=True)
    return text
