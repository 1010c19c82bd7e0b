"""The benchmark's outputs: a text table, CSV, JSON and a PNG of the ladder."""

from __future__ import annotations

import csv
import json

COLUMNS = ["case", "layout", "route", "check", "ms", "p20", "p80", "gbs", "pct_read_bw", "x_ref", "x_pregather",
           "graph_ms", "graph_x_floor"]


def _fmt(v, col: str) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if col in ("ms", "p20", "p80", "graph_ms"):
            return f"{v:.4f}" if v < 10 else f"{v:.1f}"
        if col in ("x_ref", "x_pregather", "graph_x_floor"):
            return f"{v:.2f}x"
        return f"{v:.1f}"
    return str(v)


def format_table(rows: list[dict], device: str) -> str:
    header = ["case", "layout", "route", "check", "median ms", "p20", "p80", "GB/s", "% read BW", "vs ref", "vs pre-gather",
              "graph ms", "graph / floor"]
    body = [[_fmt(r.get(c), c) for c in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths)) + " |" for b in body]
    if device == "cpu":
        lines.append("(CPU functional run: Triton routes under the interpreter; times say nothing about a GPU or NPU)")
    return "\n".join(lines)


def write_csv(path: str, rows: list[dict]) -> None:
    keys = COLUMNS + ["floor_ms", "num_outputs", "bytes", "ambiguous_differences", "check_detail"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def write_json(path: str, info: dict, rows: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump({"machine": info, "results": rows}, f, indent=1)


def write_plot(path: str, info: dict, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = []
    for r in rows:
        key = f"{r['case']}\n{r['layout']}"
        if key not in groups:
            groups.append(key)
    routes = [rt for rt in dict.fromkeys(r["route"] for r in rows) if rt != "reference"]
    fig, ax = plt.subplots(figsize=(min(24, 4 + 0.8 * len(groups)), 6))
    width = 0.8 / max(len(routes), 1)
    for k, route in enumerate(routes):
        ys = []
        for g in groups:
            match = [r for r in rows if f"{r['case']}\n{r['layout']}" == g and r["route"] == route]
            ys.append(match[0].get("x_ref") or 0.0 if match else 0.0)
        ax.bar([i + k * width for i in range(len(groups))], ys, width, label=route)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(routes) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=7)
    ax.set_ylabel("speed-up over the reference route")
    ax.set_yscale("log")
    ax.set_title(f"ascend_kvc ladder on {info.get('name', info['device'])} ({info['device']}, {info['commit']})", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report RESULTS.json OUT.png``: redraw the plot of a saved run."""
    import sys

    src, dst = (argv or sys.argv[1:])[:2]
    data = json.load(open(src))
    write_plot(dst, data["machine"], data["results"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
