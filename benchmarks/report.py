"""Markdown tables, the summary line and plots from benchmark rows."""

from __future__ import annotations

import datetime
import sys
from collections import defaultdict
from pathlib import Path

from .common import BASELINE, DUALAD, PEER, Row, notes
from .timing import format_us


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def by_benchmark(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows grouped by benchmark, in run order."""
    out: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        out[row.benchmark].append(row)
    return out


def baselines(rows: list[Row]) -> dict[tuple[str, str], Row]:
    """The timed baseline row of each (benchmark, case)."""
    out = {}
    for row in rows:
        if row.kind == BASELINE and row.times is not None:
            out.setdefault((row.benchmark, row.case), row)
    return out


def ratio(row: Row, base: dict) -> str:
    """``median / baseline median`` of the same case, as text."""
    ref = base.get((row.benchmark, row.case))
    if row.times is None or ref is None or ref.times.median <= 0:
        return "—"
    return f"{row.times.median / ref.times.median:.3g}×"


def faster_peers(rows: list[Row]) -> list[str]:
    """Cases where a peer's median beats the best dualad median."""
    best: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row.kind == DUALAD and row.times is not None:
            key = (row.benchmark, row.case)
            if key not in best or row.times.median < best[key].times.median:
                best[key] = row
    out = []
    for row in rows:
        key = (row.benchmark, row.case)
        if row.kind == PEER and row.times is not None and key in best:
            ours = best[key].times.median
            if row.times.median < ours:
                out.append(
                    f"{row.benchmark} {row.case}: {row.method} {format_us(row.times.median)} "
                    f"vs {best[key].method} {format_us(ours)} ({ours / row.times.median:.3g}× faster)"
                )
    return out


def summary(rows: list[Row]) -> str:
    """Summary lines: where a peer is faster than dualad, and which dualad rows failed."""
    lines = []
    faster = faster_peers(rows)
    if faster:
        lines.append(f"**Peers faster than dualad ({len(faster)}):** " + "; ".join(faster) + ".")
    else:
        lines.append("**Peers faster than dualad:** none (among cases where dualad ran).")
    failed = [r for r in rows if r.kind == DUALAD and r.times is None]
    ran = [r for r in rows if r.kind == DUALAD and r.times is not None]
    lines.append(
        f"**dualad rows:** {len(ran)} measured, {len(failed)} errored or skipped"
        + (
            " ("
            + "; ".join(sorted({f"{r.benchmark}/{r.method}: {r.error}" for r in failed})[:12])
            + ")"
            if failed
            else ""
        )
        + "."
    )
    return "\n\n".join(lines)


def table(rows: list[Row], base: dict) -> list[str]:
    """One markdown table for the rows of one benchmark."""
    extras: list[str] = []
    for row in rows:
        for key in row.extra:
            if key not in extras:
                extras.append(key)
    head = ["size", "method", "kind", "median", "min–max", "ratio", *extras]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        if row.times is not None:
            med = format_us(row.times.median)
            rng = f"{format_us(row.times.min)} – {format_us(row.times.max)}"
        else:
            med, rng = row.error or "—", "—"
        cells = [row.case, row.method, row.kind, med, rng, ratio(row, base)]
        cells += [row.extra.get(k, "") for k in extras]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def markdown(rows, modules, machine, *, quick, elapsed, argv=None) -> str:
    """The whole BENCHMARKS.md text."""
    base = baselines(rows)
    args = " ".join(sys.argv[1:] if argv is None else argv)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Benchmarks",
        "",
        f"Made by `python -m benchmarks{(' ' + args) if args else ''}` on {now}"
        f" ({'quick smoke run' if quick else 'full run'}, {elapsed:.0f} s).",
        "Times are per call (median of repeats, each of several loops), min–max over the repeats;",
        "ratio is median / the baseline's median for the same size in the same run.",
        "Kinds: `baseline` (the ratio's reference), `dualad`, `peer` (other AD libraries),",
        "`reference` (other non-AD ways: finite differences, numba). See benchmarks/README.md.",
        "",
        "## Machine",
        "",
        *machine,
        "",
        "## Summary",
        "",
        summary(rows),
        "",
    ]
    if notes():
        out += ["Notes:", "", *[f"- {n}" for n in notes()], ""]
    for name, group in by_benchmark(rows).items():
        mod = modules.get(name)
        title = getattr(mod, "TITLE", name)
        out += [f"## {name}: {title}", ""]
        desc = getattr(mod, "DESCRIPTION", "")
        if desc:
            out += [" ".join(desc.split()), ""]
        out += table(group, base)
        out.append("")
    return "\n".join(out)


def plots(rows: list[Row], directory: Path, modules=None) -> list[Path]:
    """One PNG per benchmark (time vs size, one line per method, log axes)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib not installed; no plots")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, group in by_benchmark(rows).items():
        pts = [r for r in group if r.times is not None and r.size is not None]
        if not pts:
            continue
        panels: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
        for r in pts:
            panels[r.panel or ""][r.series or r.method].append(r)
        n = len(panels)
        cols = min(n, 3)
        nrows = (n + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.6 * nrows), squeeze=False)
        for ax, (panel, series) in zip(axes.flat, panels.items()):
            for label, srows in series.items():
                srows = sorted(srows, key=lambda r: r.size)
                xs = [r.size for r in srows]
                ys = [r.times.median for r in srows]
                lo = [r.times.median - r.times.min for r in srows]
                hi = [r.times.max - r.times.median for r in srows]
                style = "--" if srows[0].kind in (BASELINE,) else "-"
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o" + style, ms=4, capsize=2, label=label)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(getattr((modules or {}).get(name), "XLABEL", "problem size"))
            ax.set_ylabel("time per call (µs)")
            ax.set_title(f"{name} {panel}".strip())
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.tight_layout()
        path = directory / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
