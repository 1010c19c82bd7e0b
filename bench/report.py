"""The benchmark's outputs: the text table, CSV, JSON, and the report folder (report.md + figures)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

# (row key, table header); the CSV keeps every key, the printed table these.
TABLE = [("case", "case"), ("layout", "layout"), ("route", "route"), ("check", "check"), ("ms", "median ms"),
         ("device_ms", "device ms"), ("p20", "p20"), ("p80", "p80"), ("x_floor", "x floor"), ("gbs", "GB/s"),
         ("pct_read_bw", "% read BW"),
         ("x_ref", "vs ref"), ("graph_ms", "graph ms"), ("graph_x_floor", "graph / floor"),
         ("kernels", "kernels"), ("triton_launches", "triton launches"), ("aten_ops", "aten ops"),
         ("host_us", "host us")]
COLUMNS = [key for key, _ in TABLE]
TIMED = {"ms", "device_ms", "p20", "p80", "x_floor", "gbs", "pct_read_bw", "x_ref", "graph_ms", "graph_x_floor",
         "kernels", "triton_launches", "aten_ops", "host_us"}


def _fmt(v, col: str) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if col in ("ms", "device_ms", "p20", "p80", "graph_ms"):
            return f"{v:.4f}" if v < 10 else f"{v:.1f}"
        if col in ("x_ref", "x_pregather", "graph_x_floor", "x_floor"):
            return f"{v:.2f}x"
        if col in ("kernels", "triton_launches", "aten_ops"):
            return f"{v:.3g}"
        return f"{v:.1f}"
    return str(v)


# Columns the printed table and report.md leave out on CPU, where a route's Triton kernels run under
# the interpreter and one call is timed:
# - p20, p80: quantiles of one sample (the CPU timer's min and max): the median again, no spread.
# - x floor, GB/s, % read BW: the floor is bytes over a torch CPU sum's bandwidth; an interpreted
#   kernel spends its time in Python per program, not moving those bytes: no ratio to the memory.
# - vs ref: interpreter time against the reference's compiled aten ops: says nothing of a device.
# - graph ms, graph / floor: CUDA graphs only (never measured on CPU).
# - device ms, kernels: need a device profiler (there is none on CPU).
# - host us: on CPU the timed call itself (no asynchrony), a copy of median ms.
# Kept: the check, median ms (what the functional run took), Triton launches and aten ops per call
# (counted, not timed: the same on any device). The CSV and JSON keep every key.
CPU_MEANINGLESS = {"p20", "p80", "x_floor", "gbs", "pct_read_bw", "x_ref", "graph_ms", "graph_x_floor", "device_ms",
                   "kernels", "host_us"}


def _cell(row: dict, key: str) -> str:
    if key in TIMED and row.get("check") != "ok":
        return "FAIL"
    return _fmt(row.get(key), key)


def table_columns(rows: list[dict], device: str) -> list[str]:
    """The row keys the printed table shows: the identity and check, then every measured column
    some row has, less ``CPU_MEANINGLESS`` on CPU."""
    return [k for k, _ in TABLE if k in ("case", "layout", "route", "check")
            or (any(r.get(k) is not None for r in rows) and not (device == "cpu" and k in CPU_MEANINGLESS))]


def format_table(rows: list[dict], device: str) -> str:
    """Every row, one line each; a row that failed the oracle shows FAIL where its times would be.

    device ms: the call's kernels' own durations summed (profiler), next to the median wall time,
    "-" where this row was not profiled. On CPU only the columns that mean something there."""
    keys = table_columns(rows, device)
    header = [dict(TABLE)[k] for k in keys]
    body = [[_cell(r, k) for k in keys] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths)) + " |" for b in body]
    if device == "cpu":
        lines.append("")
        lines.append("(CPU functional run: Triton routes under the interpreter; times say nothing about a GPU or NPU. "
                     "Columns that need a device or more than one timed call are left out; "
                     "the CSV and JSON keep them.)")
    return "\n".join(lines)


def write_csv(path: str, rows: list[dict]) -> None:
    keys = COLUMNS + ["x_pregather", "floor_ms", "num_outputs", "kv_format", "bytes", "copies", "kernels_how",
                      "device_how", "ambiguous_differences", "check_detail"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def write_json(path: str, info: dict, rows: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump({"machine": info, "results": rows}, f, indent=1)


def write_plot(path: str, info: dict, rows: list[dict]) -> None:
    """``--plot``: the ladder figure, or the floor figure when the run has no Ascend rung."""
    from bench.figures import floor_figure, ladder_figure

    if not ladder_figure(rows, info, path):
        floor_figure(rows, info, path)


def write_report(folder: str, info: dict, rows: list[dict], command: str | None = None) -> Path:
    """Write report.md, bench.csv, bench.json and the figures into ``folder``; return report.md's path."""
    from bench import figures, summary

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(str(out / "bench.csv"), rows)
    write_json(str(out / "bench.json"), info, rows)
    drawn = []
    for fname, draw in (("ladder.png", figures.ladder_figure), ("floor.png", figures.floor_figure),
                        ("launches.png", figures.launch_figure)):
        if draw(rows, info, str(out / fname)):
            drawn.append(fname)
    text = summary.render(rows, info, format_table(rows, info.get("device", "?")), command, tuple(drawn))
    (out / "report.md").write_text(text)
    return out / "report.md"


def build_parser():
    import argparse

    from bench.cli import HelpFormatter

    p = argparse.ArgumentParser(prog="python -m bench.report", formatter_class=HelpFormatter,
                                description="Redraw the report of a saved run (python -m bench --json or --report).",
                                epilog="example:\n"
                                       "  python -m bench.report bench/out/h200-2026-12-02/bench.json redrawn/\n")
    p.add_argument("results_json", help="bench.json of a run (python -m bench --json or --report)")
    p.add_argument("dir", help="folder to write report.md, the CSV/JSON and the figures into")
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report RESULTS.json DIR``: redraw the report of a saved run into DIR."""
    a = build_parser().parse_args(argv)
    src, dst = a.results_json, a.dir
    with open(src) as f:
        data = json.load(f)
    print(write_report(dst, data["machine"], data["results"], data["machine"].get("command")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
