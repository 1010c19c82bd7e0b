"""The report's three figures, each answering one question, sized for a laptop screen (<= 1400x900 px).

* ``ladder_figure`` (``build_ladder``): where does the Ascend ladder stop paying? Time over the read floor per rung.
* ``floor_figure`` (``build_floor``): how far is each route from the memory floor? Time against bytes that must move.
* ``launch_figure`` (``build_launch``): what do launches cost? Device kernels, framework ops and host time per
  call, and (with a device profiler) wall time against the kernels' own device time.

Each takes the benchmark's rows (dicts as ``bench.cli`` builds them) and the machine info. A row
whose ``check`` is not ``"ok"`` failed the byte oracle and was never timed: it is drawn as a red X,
never as a time.
"""

from __future__ import annotations

import math
import re
import statistics

DPI = 100
MAX_WIDTH_IN = 14.0  # 1400 px at DPI
FONT = 10
LAYOUT_STYLE = {"contiguous": "-", "shuffled": "--"}
FAIL_COLOR = "#d62728"
_CASE_RE = re.compile(r"R(\d+)-T(\d+)-C(\d+)")


def parse_case(name: str) -> tuple[int, int, int]:
    """``"R8-T131072-C512"`` -> ``(8, 131072, 512)``."""
    m = _CASE_RE.fullmatch(name)
    if not m:
        raise ValueError(f"case name {name!r} is not R<reqs>-T<tokens>-C<ratio>")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def failed(row: dict) -> bool:
    return row.get("check") != "ok"


def route_order(rows: list[dict]) -> list[str]:
    """Routes in ladder order: reference, the Ascend rungs bottom first, then the rest as they came."""
    from ascend_kvc import ASCEND_STAGES

    present = list(dict.fromkeys(r["route"] for r in rows))
    ladder = [f"ascend:{s}" for s in ASCEND_STAGES]
    head = [r for r in ["reference", *ladder] if r in present]
    return head + [r for r in present if r not in head]


def short_route(route: str) -> str:
    return route.removeprefix("ascend:")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": FONT, "axes.titlesize": FONT + 1, "legend.fontsize": FONT - 1,
                         "xtick.labelsize": FONT - 1, "ytick.labelsize": FONT - 1})
    return plt


def _device_title(info: dict) -> str:
    name = info.get("name", info.get("device", "?"))
    title = f"{name} ({info.get('device', '?')}), commit {info.get('commit', '?')}, {info.get('date', '')}".rstrip(", ")
    if info.get("device") == "cpu":
        title += "  [CPU: Triton interpreter, times say nothing about a GPU or NPU]"
    return title


def _sizes(rows: list[dict]) -> list[tuple[int, int]]:
    return sorted({parse_case(r["case"])[:2] for r in rows}, key=lambda rt: (rt[1], rt[0]))


def _size_label(rt: tuple[int, int]) -> str:
    r, t = rt
    return f"{r} req, {t // 1024}K tokens" if t >= 1024 and t % 1024 == 0 else f"{r} req, {t} tokens"


def _x_floor(row: dict) -> float | None:
    if failed(row) or not row.get("ms") or not row.get("floor_ms"):
        return None
    return row["ms"] / row["floor_ms"]


def _panels(plt, n: int, height: float):
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(MAX_WIDTH_IN, min(9.0, height * nrows)), dpi=DPI,
                             squeeze=False, sharey=True)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def build_ladder(rows: list[dict], info: dict):
    """Time as a multiple of the read floor per Ascend rung (ladder order), a panel per C.

    One colour per workload size, solid contiguous / dashed shuffled. Returns False (and writes
    nothing) when the rows hold no Ascend rung.
    """
    from ascend_kvc import ASCEND_STAGES

    present = {r["route"] for r in rows}
    stages = [s for s in ASCEND_STAGES if f"ascend:{s}" in present]
    ladder_rows = [r for r in rows if r["route"] in {f"ascend:{s}" for s in stages}]
    if not stages:
        return None
    plt = _plt()
    ratios = sorted({parse_case(r["case"])[2] for r in ladder_rows})
    sizes = _sizes(ladder_rows)
    colors = plt.get_cmap("viridis")([0.05 + 0.85 * i / max(len(sizes) - 1, 1) for i in range(len(sizes))])
    layouts = [lo for lo in LAYOUT_STYLE if any(r["layout"] == lo for r in ladder_rows)]
    # One row per C with the rungs along a shared x: the rung names fit horizontally.
    fig, axes = plt.subplots(len(ratios), 1, figsize=(MAX_WIDTH_IN, min(9.0, 1.7 + 2.4 * len(ratios))), dpi=DPI,
                             squeeze=False, sharex=True)
    axes = [row[0] for row in axes]
    any_fail = False
    for ax, c in zip(axes, ratios):
        for size, color in zip(sizes, colors):
            for layout in layouts:
                by_stage = {r["route"]: r for r in ladder_rows
                            if parse_case(r["case"]) == (*size, c) and r["layout"] == layout}
                if not by_stage:
                    continue
                ys = [_x_floor(by_stage[f"ascend:{s}"]) if f"ascend:{s}" in by_stage else None for s in stages]
                ax.plot(range(len(stages)), [math.nan if y is None else y for y in ys], LAYOUT_STYLE[layout],
                        color=color, marker="o", markersize=4, linewidth=1.6)
                fails = [i for i, s in enumerate(stages)
                         if f"ascend:{s}" in by_stage and failed(by_stage[f"ascend:{s}"])]
                if fails:
                    any_fail = True
                    ax.plot(fails, [0.96] * len(fails), "X", markerfacecolor=color, markeredgecolor=FAIL_COLOR,
                            markersize=12, markeredgewidth=1.5, linestyle="",
                            transform=ax.get_xaxis_transform(), clip_on=False)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
        ax.set_ylabel(f"C = {c}\nx floor (log)")
        _plain_log(ax.yaxis, "x")
    axes[-1].set_xticks(range(len(stages)))
    axes[-1].set_xticklabels([_two_lines(s) for s in stages])
    axes[-1].set_xlim(-0.4, len(stages) - 0.6)
    axes[-1].set_xlabel("Ascend rung, bottom first (each builds on the one to its left)")
    _ladder_legend(fig, plt, sizes, colors, layouts, any_fail)
    fig.suptitle(f"Ascend ladder: time over the read floor (1 = floor) per rung. Where does it stop paying?\n"
                 f"{_device_title(info)}")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    return fig


def _two_lines(name: str, width: int = 13) -> str:
    """A long rung name broken after its last hyphen, so that neighbouring labels never touch."""
    if len(name) <= width or "-" not in name:
        return name
    head, tail = name.rsplit("-", 1)
    return f"{head}-\n{tail}"


def _ladder_legend(fig, plt, sizes, colors, layouts, any_fail: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=col, marker="o", markersize=4, label=_size_label(s))
               for s, col in zip(sizes, colors)]
    handles += [Line2D([], [], color="gray", linestyle=LAYOUT_STYLE[lo], label=lo) for lo in layouts]
    if any_fail:
        handles.append(Line2D([], [], marker="X", linestyle="", markersize=11, markerfacecolor="white",
                              markeredgecolor=FAIL_COLOR, markeredgewidth=1.5,
                              label="failed the oracle,\nnot timed (fill: size)"))
    fig.legend(handles=handles, loc="center right", frameon=False)


_MARKERS = "osD^v<>phP*XH8d"


def build_floor(rows: list[dict], info: dict):
    """Time against the bytes that must move (log-log), a panel per C, with the floor line.

    One marker and colour per route, solid contiguous / dashed shuffled; the CUDA-graph replay of
    a route, where measured, is its own series.
    """
    read_gbs = info.get("read_gbs")
    if not rows or not read_gbs:
        return None
    plt = _plt()
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    routes = route_order(rows)
    series = [(rt, "ms", short_route(rt)) for rt in routes]
    series += [(rt, "graph_ms", f"{short_route(rt)} (CUDA graph)") for rt in routes
               if any(r["route"] == rt and r.get("graph_ms") for r in rows)]
    style = _route_styles(plt, series)
    ratios = sorted({parse_case(r["case"])[2] for r in rows})
    layouts = [lo for lo in LAYOUT_STYLE if any(r["layout"] == lo for r in rows)]
    fig, axes = _panels(plt, len(ratios), 6.0)
    any_fail = False
    for ax, c in zip(axes, ratios):
        crow = [r for r in rows if parse_case(r["case"])[2] == c]
        xs = sorted({r["bytes"] for r in crow})
        lo_x, hi_x = xs[0] / 1.6, xs[-1] * 1.6
        ax.plot([lo_x, hi_x], [lo_x / read_gbs / 1e6, hi_x / read_gbs / 1e6], color="black", linewidth=2.2,
                zorder=5)
        for route, key, label in series:
            color, marker = style[label]
            for layout in layouts:
                pts = sorted((r["bytes"], r.get(key)) for r in crow
                             if r["route"] == route and r["layout"] == layout and not failed(r) and r.get(key))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], LAYOUT_STYLE[layout], color=color,
                            marker=marker, markersize=5, linewidth=1.0, alpha=0.9,
                            markerfacecolor=color if layout == "contiguous" else "white")
            if key == "ms":
                fails = sorted({r["bytes"] for r in crow if r["route"] == route and failed(r)})
                if fails:
                    any_fail = True
                    ax.plot(fails, [0.96] * len(fails), "X", markerfacecolor=color, markeredgecolor=FAIL_COLOR,
                            markersize=12, markeredgewidth=1.5, linestyle="",
                            transform=ax.get_xaxis_transform(), clip_on=False)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo_x, hi_x)
        ticks = _spaced(xs, min_decades=0.25)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FixedFormatter([_mib(x) for x in ticks]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(f"C = {c}")
        ax.set_xlabel("bytes that must move per call")
    for ax in axes:  # after every panel is drawn: the y axis is shared
        _plain_log(ax.yaxis)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("median time per call, ms (log)")
    _floor_legend(fig, style, layouts, read_gbs, any_fail)
    fig.suptitle(f"Routes against the memory floor (bytes / measured read bandwidth {_gbs(read_gbs)} GB/s)\n"
                 f"{_device_title(info)}")
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    return fig


def compact(v: float, suffix: str = "") -> str:
    """1234567 -> "1.23M", 72800 -> "72.8k", 0.5 -> "0.5": short labels for log axes and bars."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}{suffix}"
    return f"{v:.3g}{suffix}"


def _plain_log(axis, suffix: str = "") -> None:
    """Log axis labelled in plain numbers (1, 2, 5, 10... or, over many decades, powers of ten
    only), minor ticks unlabelled: no crowded or overlapping labels. Call after the data is drawn."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    decades = math.log10(hi / lo) if lo > 0 else 10.0
    subs = (1.0, 2.0, 5.0) if decades <= 3.2 else (1.0,) if decades <= 6 else None
    axis.set_major_locator(LogLocator(base=10, subs=subs) if subs else LogLocator(base=100))
    # multiples of the floor read as plain numbers (1000x, not 1kx); times and counts in k/M
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}" if suffix else compact(v)))
    axis.set_minor_formatter(NullFormatter())


def _gbs(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def _spaced(values: list[float], min_decades: float) -> list[float]:
    """The sorted values, dropping any closer than ``min_decades`` (log10) to the last one kept."""
    kept: list[float] = []
    for v in sorted(values):
        if not kept or math.log10(v / kept[-1]) >= min_decades:
            kept.append(v)
    return kept


def _mib(nbytes: int) -> str:
    mib = nbytes / 2**20
    return f"{mib:.0f} MiB" if mib >= 10 else f"{mib:.2g} MiB"


def _route_styles(plt, series) -> dict:
    """Colour and marker per series: the Ascend rungs on a sequential map in ladder order (dark =
    bottom rung), the reference gray, other routes (gpgpu, its graph replay) in distinct colours."""
    rungs = [label for route, key, label in series if route.startswith("ascend:") and key == "ms"]
    ramp = plt.get_cmap("plasma")
    others = iter(["#1f77b4", "#17becf", "#2ca02c", "#8c564b", "#e377c2", "#7f7f7f"])
    style = {}
    for i, (route, key, label) in enumerate(series):
        if route == "reference" and key == "ms":
            color = "#555555"
        elif label in rungs:
            color = ramp(0.85 * rungs.index(label) / max(len(rungs) - 1, 1))
        else:
            color = next(others, "#000000")
        style[label] = (color, _MARKERS[i % len(_MARKERS)])
    return style


def _floor_legend(fig, style, layouts, read_gbs, any_fail: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color="black", linewidth=2.2, label=f"floor ({_gbs(read_gbs)} GB/s read)")]
    handles += [Line2D([], [], color=col, marker=m, linestyle="-", markersize=5, label=label)
                for label, (col, m) in style.items()]
    handles += [Line2D([], [], color="gray", linestyle=LAYOUT_STYLE[lo], marker="o",
                       markerfacecolor="gray" if lo == "contiguous" else "white", label=lo) for lo in layouts]
    if any_fail:
        handles.append(Line2D([], [], marker="X", linestyle="", markersize=11, markerfacecolor="white",
                              markeredgecolor=FAIL_COLOR, markeredgewidth=1.5,
                              label="failed the oracle\n(fill: route)"))
    fig.legend(handles=handles, loc="center right", frameon=False)


# The launch figure's paired panel: wall time and device time of a call, one bar each.
TIME_PAIR = ("ms", "device_ms")
PAIR_STYLE = {"ms": ("#4c72b0", "wall (do_bench)"), "device_ms": ("#dd8452", "device (profiler)")}


def launch_metrics(device: str) -> list[tuple]:
    """(row key, panel title, log scale) of the launch figure's panels for ``device``; the key
    ``TIME_PAIR`` draws wall and device time per call side by side (not on CPU: no profiler)."""
    if device == "cpu":
        first = ("triton_launches", "Triton launches per call\n(CPU interpreter; no device kernels)", False)
        host = ("host_us", "host µs per call, log\n(CPU: the interpreter's wall time)", True)
        return [first, ("aten_ops", "PyTorch (aten) ops per call\n(dispatch counter)", False), host]
    first = ("kernels", "device kernels per call\n(profiler: kernels + memcpy/memset)", False)
    host = ("host_us", "host µs per call, log\n(median, no sync, validate=False)", True)
    return [first, ("aten_ops", "PyTorch (aten) ops per call\n(dispatch counter)", False), host,
            (TIME_PAIR, "ms per call, log: wall and\ndevice (kernels' own time)", True)]


def _values(rows: list[dict], key: str) -> list[float]:
    return [r[key] for r in rows if not failed(r) and r.get(key) is not None]


def build_launch(rows: list[dict], info: dict):
    """Per route: device kernels (or Triton launches on CPU), aten ops and host µs per call, and
    where a profiler timed them, wall and device ms per call side by side.

    Bars are the median over every (case, layout) that passed; whiskers the min and max.
    A route that failed everywhere shows ``FAIL``; one that failed somewhere says in how many.
    """
    metrics = launch_metrics(info.get("device", "cpu"))
    if not any(r.get(key) is not None for r in rows for key, _, _ in metrics if key != TIME_PAIR):
        return None  # a run saved before launch costs were measured
    if not any(r.get("device_ms") is not None for r in rows):
        metrics = [m for m in metrics if m[0] != TIME_PAIR]  # a run saved before device time was measured
    plt = _plt()
    routes = route_order(rows)
    height = min(9.0, 2.0 + 0.42 * len(routes))
    fig, axes = plt.subplots(1, len(metrics), figsize=(MAX_WIDTH_IN, height), dpi=DPI, sharey=True)
    ys = list(range(len(routes)))
    for ax, (key, title, log) in zip(axes, metrics):
        if key == TIME_PAIR:
            _time_pair_panel(ax, rows, routes, ys)
            ax.set_title(title)
            continue
        for y, route in zip(ys, routes):
            mine = [r for r in rows if r["route"] == route]
            vals = _values(mine, key)
            nfail = sum(failed(r) for r in mine)
            if vals:
                mid = statistics.median(vals)
                ax.barh(y, mid, color="#4c72b0", height=0.65)
                if max(vals) > min(vals):
                    ax.errorbar(mid, y, xerr=[[mid - min(vals)], [max(vals) - mid]], color="black", capsize=3,
                                linewidth=1)
                label = f" {compact(mid)}" + (f"  FAIL in {nfail}/{len(mine)}" if nfail else "")
                ax.text(max(vals), y, label, va="center", fontsize=FONT - 1,
                        color=FAIL_COLOR if nfail else "black", fontweight="bold" if nfail else "normal")
            elif nfail:
                ax.text(0.02, y, "FAIL", color=FAIL_COLOR, fontweight="bold", va="center",
                        transform=ax.get_yaxis_transform())
            else:
                ax.text(0.02, y, "not measured", color="gray", va="center", transform=ax.get_yaxis_transform())
        ax.set_title(title)
        ax.grid(True, axis="x", alpha=0.3)
        ax.margins(x=0.35)
        if log:
            ax.set_xscale("log")
            _plain_log(ax.xaxis)
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels([short_route(r) for r in routes])
    axes[0].invert_yaxis()
    fig.suptitle("What launches cost, per call (median over cases and layouts; whiskers min-max)\n"
                 f"{_device_title(info)}")
    fig.tight_layout(w_pad=3.0)
    return fig


def _time_pair_panel(ax, rows: list[dict], routes: list[str], ys: list[int]) -> None:
    """Per route a wall-time bar and, below it, a device-time bar (medians, ms, log axis): the gap
    between them is what launches and host work add to a call."""
    from matplotlib.patches import Patch

    for y, route in zip(ys, routes):
        mine = [r for r in rows if r["route"] == route]
        nfail = sum(failed(r) for r in mine)
        drawn = False
        for offset, key in ((-0.2, "ms"), (0.2, "device_ms")):
            vals = _values(mine, key)
            if vals:
                drawn = True
                ax.barh(y + offset, statistics.median(vals), color=PAIR_STYLE[key][0], height=0.38)
        if not drawn:
            ax.text(0.02, y, "FAIL" if nfail else "not measured", color=FAIL_COLOR if nfail else "gray",
                    fontweight="bold" if nfail else "normal", va="center", transform=ax.get_yaxis_transform())
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xscale("log")
    if ax.has_data():
        _plain_log(ax.xaxis)
    ax.legend(handles=[Patch(color=color, label=label) for color, label in PAIR_STYLE.values()],
              loc="lower right", frameon=False, fontsize=FONT - 2)


def _save(fig, path: str) -> bool:
    if fig is None:
        return False
    import matplotlib.pyplot as plt

    fig.savefig(path)
    plt.close(fig)
    return True


def ladder_figure(rows: list[dict], info: dict, path: str) -> bool:
    """Write ``build_ladder``'s figure to ``path``; False (nothing written) without Ascend rungs."""
    return _save(build_ladder(rows, info), path)


def floor_figure(rows: list[dict], info: dict, path: str) -> bool:
    """Write ``build_floor``'s figure to ``path``; False without rows or a measured bandwidth."""
    return _save(build_floor(rows, info), path)


def launch_figure(rows: list[dict], info: dict, path: str) -> bool:
    """Write ``build_launch``'s figure to ``path``; False when no row has a launch measurement."""
    return _save(build_launch(rows, info), path)
