"""Markdown tables, the summary, the who-wins table and ratio plots from benchmark rows.

BENCHMARKS.md opens with one table, a line per case: dualad's best time, the best peer's,
their ratio and who wins (wins and losses alike); the details and the plots (time over the
baseline's, log scale, a line at 1x) follow. ``python -m benchmarks.report --from
BENCHMARKS.md`` rebuilds the table and the plots from an existing report's tables, without
running anything.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections import defaultdict
from pathlib import Path

from .common import BASELINE, DUALAD, FALLS_BACK, PEER, Row, falls_back, notes
from .timing import Timing, format_us

#: Within this factor of each other, a case is a tie.
TIE = 1.05


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
    fallback = [r for r in rows if r.kind == DUALAD and falls_back(r)]
    failed = [r for r in rows if r.kind == DUALAD and r.times is None and not falls_back(r)]
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
    if fallback:
        lines.append(
            f"**ad.jit rows not compiled ({len(fallback)}),** each timed once its call "
            "compiles: "
            + "; ".join(f"{r.benchmark} {r.case}/{r.method}: "
                        f"{r.error[len(FALLS_BACK) + 2:].rstrip('.')}" for r in fallback)
            + "."
        )
    return "\n\n".join(lines)


def _best(rows: list[Row], kind: str) -> dict[tuple[str, str], Row]:
    best: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row.kind == kind and row.times is not None:
            key = (row.benchmark, row.case)
            if key not in best or row.times.median < best[key].times.median:
                best[key] = row
    return best


def who_wins(rows: list[Row]) -> list[str]:
    """The opening table: per case, dualad's best, the best peer, the ratio and the winner.

    ``ratio`` is dualad's median over the best peer's (below 1: dualad is faster); within
    :data:`TIE` either way the case is a tie. Cases without a peer say so.
    """
    ours, theirs = _best(rows, DUALAD), _best(rows, PEER)
    lines = ["| case | dualad | best peer | ratio (dualad / peer) | who wins |",
             "|---|---|---|---|---|"]
    wins = losses = ties = 0
    alone: dict[str, int] = defaultdict(int)  # benchmark -> cases without a peer
    for key, mine in ours.items():
        peer_row = theirs.get(key)
        case = f"{key[0]} {key[1]}"
        dualad_cell = f"{format_us(mine.times.median)} ({mine.method})"
        if peer_row is None:
            alone[key[0]] += 1
            continue
        r = mine.times.median / peer_row.times.median
        if r < 1 / TIE:
            verdict, wins = "**dualad**", wins + 1
        elif r > TIE:
            verdict, losses = f"{peer_row.method}", losses + 1
        else:
            verdict, ties = "tie", ties + 1
        peer_cell = f"{format_us(peer_row.times.median)} ({peer_row.method})"
        lines.append(f"| {_cell(case)} | {_cell(dualad_cell)} | {_cell(peer_cell)} | "
                     f"{r:.3g}× | {_cell(verdict)} |")
    lines += ["", f"dualad is faster in {wins} case(s), a peer in {losses}, "
              f"{ties} within {TIE:.2f}× (a tie); times are medians of the same run."]
    if alone:
        listed = ", ".join(f"{name} ({n})" for name, n in alone.items())
        lines.append(f"Cases no other AD library ran (dualad against its baseline, finite "
                     f"differences or numba only; see the details): {listed}.")
    return lines


_UNITS = {"µs": 1.0, "ms": 1e3, "s": 1e6}


def _parse_us(text: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(µs|ms|s)\s*", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else None


def parse_markdown(text: str) -> list[Row]:
    """Rows back from a BENCHMARKS.md written by :func:`markdown` (medians, min and max)."""
    rows: list[Row] = []
    name = None
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            m = re.match(r"## (\w+): ", line)
            name, header = (m.group(1) if m else None), None
            continue
        if name is None or not line.startswith("|"):
            header = None if not line.startswith("|") else header
            continue
        cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-"):
            continue
        data = dict(zip(header, cells))
        if "method" not in data or "kind" not in data:
            continue
        row = Row(name, data.get("size", ""), data["method"], data["kind"])
        median = _parse_us(data.get("median", ""))
        if median is None:
            row.error = data.get("median") or "—"
        else:
            lo, _, hi = data.get("min–max", "").partition(" – ")
            lo_us, hi_us = _parse_us(lo), _parse_us(hi)
            row.times = Timing(median, lo_us if lo_us is not None else median,
                               hi_us if hi_us is not None else median, 1, 1)
        row.size = 1.0
        rows.append(row)
    return rows


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


def markdown(rows, modules, machine, *, quick, elapsed, argv=None,
             plots_dir: str | None = "benchmarks/plots") -> str:
    """The whole BENCHMARKS.md text: who wins where first, then machine, summary, details.

    Each benchmark's section embeds its ratio plot from ``plots_dir`` (relative to the
    report; ``None``: no plots).
    """
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
        "## Who wins where",
        "",
        *who_wins(rows),
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
    opened = False
    for name, group in _simulation_first(by_benchmark(rows)).items():
        if name in _SIMULATION and not opened:
            opened = True
            out += ["## Simulation", "",
                    "Stiff and PDE right-hand sides: the public stiff test set first, then "
                    "dualad's own models.", ""]
        mod = modules.get(name)
        title = getattr(mod, "TITLE", name)
        out += [f"## {name}: {title}", ""]
        desc = getattr(mod, "DESCRIPTION", "")
        if desc:
            out += [" ".join(desc.split()), ""]
        out += table(group, base)
        out.append("")
        if plots_dir is not None and _plottable(group):
            out += [f"![{name}: time over the baseline's, per method]({plots_dir}/{name}.png)", ""]
    return "\n".join(out)


_SIMULATION = ("stiff_set", "lorenz96", "njit_lorenz96", "brusselator1d", "brusselator2d",
               "stiff_ode", "sparse_brusselator", "ensemble")


def _simulation_first(groups: dict[str, list[Row]]) -> dict[str, list[Row]]:
    """The benchmarks in run order, the simulation ones together where the first of them
    ran, the stiff test set opening them."""
    names = list(groups)
    sim = [n for n in _SIMULATION if n in groups]
    if not sim:
        return groups
    at = min(names.index(n) for n in sim)
    rest = [n for n in names if n not in sim]
    order = rest[:at] + sim + rest[at:]
    return {n: groups[n] for n in order}


def _plottable(group: list[Row]) -> bool:
    return any(r.kind == BASELINE and r.times is not None for r in group) and \
        any(r.kind != BASELINE and r.times is not None for r in group)


def plots(rows: list[Row], directory: Path, modules=None) -> list[Path]:
    """One PNG per benchmark: each method's time over the baseline's, case by case.

    The y axis is the ratio on a log scale with a line at 1x (the baseline): below it is
    faster than the baseline, above slower; the x axis lists the cases in run order.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib not installed; no plots")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    base = baselines(rows)
    written = []
    for name, group in by_benchmark(rows).items():
        pts = [r for r in group if r.times is not None and r.kind != BASELINE
               and (r.benchmark, r.case) in base]
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
            cases: list[str] = []
            for r in group:
                if (r.panel or "") == panel and r.case not in cases:
                    cases.append(r.case)
            for label, srows in series.items():
                xs, ys, lo, hi = [], [], [], []
                for r in srows:
                    ref = base[(r.benchmark, r.case)].times.median
                    xs.append(cases.index(r.case))
                    ys.append(r.times.median / ref)
                    lo.append((r.times.median - r.times.min) / ref)
                    hi.append((r.times.max - r.times.median) / ref)
                kind = srows[0].kind
                style = "-" if kind == DUALAD else (":" if kind == PEER else "--")
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o" + style, ms=4, capsize=2,
                            label=f"{label} ({kind})", lw=2 if kind == DUALAD else 1)
            ax.axhline(1.0, color="black", lw=1)
            ax.text(0.0, 1.0, " 1× (baseline)", va="bottom", fontsize=7,
                    transform=ax.get_yaxis_transform())
            ax.set_yscale("log")
            ax.set_xticks(range(len(cases)), cases, rotation=20, fontsize=7)
            ax.set_xlabel(getattr((modules or {}).get(name), "XLABEL", "case"))
            ax.set_ylabel("time / baseline time (log)")
            ax.set_title(f"{name} {panel}".strip())
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.tight_layout()
        path = directory / f"{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.report --from BENCHMARKS.md``: the who-wins table (and plots)
    of an existing report, without running the benchmarks."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--from", dest="source", required=True, help="a BENCHMARKS.md to read")
    p.add_argument("--plots", default=None, help="also redraw the ratio plots into DIR")
    args = p.parse_args(argv)
    rows = parse_markdown(Path(args.source).read_text(encoding="utf-8"))
    print("\n".join(who_wins(rows)))
    if args.plots:
        for path in plots(rows, Path(args.plots)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
