"""The benchmark's outputs: the text table, CSV, JSON, and the report folder (report.md + figures)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

# (row key, table header); the CSV keeps every key, the printed table these.
TABLE = [("case", "case"), ("layout", "layout"), ("route", "route"), ("check", "check"), ("ms", "median ms"),
         ("device_ms", "device ms"), ("p20", "p20"), ("p80", "p80"), ("x_floor", "x floor"), ("gbs", "GB/s"), ("pct_read_bw", "% read BW"),
         ("x_ref", "vs ref"), ("graph_ms", "graph ms"), ("graph_x_floor", "graph / floor"),
         ("kernels", "kernels"), ("triton_launches", "triton launches"), ("aten_ops", "aten ops"),
         ("host_us", "host us")]
COLUMNS = [key for key, _ in TABLE]
TIMED = {"ms", "device_ms", "p20", "p80", "x_floor", "gbs", "pct_read_bw", "x_ref", "graph_ms", "graph_x_floor", "kernels",
         "triton_launches", "aten_ops", "host_us"}


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


# Measured only with a device profiler: "n/a" on CPU, where there is none (not "-", not measured).
DEVICE_ONLY = {"device_ms"}


def _cell(row: dict, key: str, device: str) -> str:
    if key in TIMED and row.get("check") != "ok":
        return "FAIL"
    if key in DEVICE_ONLY and device == "cpu":
        return "n/a"
    return _fmt(row.get(key), key)


def format_table(rows: list[dict], device: str) -> str:
    """Every row, one line each; a row that failed the oracle shows FAIL where its times would be.

    device ms: the call's kernels' own durations summed (profiler), next to the median wall time;
    "n/a" on CPU, "-" where this row was not profiled."""
    keys = [k for k, _ in TABLE if k in ("case", "layout", "route", "check")
            or (k in DEVICE_ONLY and device == "cpu") or any(r.get(k) is not None for r in rows)]
    header = [dict(TABLE)[k] for k in keys]
    body = [[_cell(r, k, device) for k in keys] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths)) + " |" for b in body]
    if device == "cpu":
        lines.append("")
        lines.append("(CPU functional run: Triton routes under the interpreter; times say nothing about a GPU or NPU)")
    return "\n".join(lines)


def write_csv(path: str, rows: list[dict]) -> None:
    keys = COLUMNS + ["x_pregather", "floor_ms", "num_outputs", "bytes", "copies", "kernels_how", "device_how",
                      "ambiguous_differences", "check_detail"]
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


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report RESULTS.json DIR``: redraw the report of a saved run into DIR."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.report", description="Redraw the report of a saved run.")
    p.add_argument("results_json", help="bench.json of a run (python -m bench --json or --report)")
    p.add_argument("dir", help="folder to write report.md, the CSV/JSON and the figures into")
    a = p.parse_args(argv)
    src, dst = a.results_json, a.dir
    with open(src) as f:
        data = json.load(f)
    print(write_report(dst, data["machine"], data["results"], data["machine"].get("command")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
