"""report.md: a short summary a first user reads (device, versions, floor, best route per case,
what each rung buys, what launches cost), then the figures and the full table."""

from __future__ import annotations

import math
import statistics

from ascend_kvc.layout import SLOT_BYTES
from bench.figures import failed, route_order, short_route

FIGURES = (("ladder.png", "Where the Ascend ladder stops paying: time over the read floor per rung"),
           ("floor.png", "Every route against the memory floor"),
           ("launches.png", "What launches cost per call, and wall against device time"))


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def x_floor(row: dict) -> float | None:
    if failed(row) or not row.get("ms") or not row.get("floor_ms"):
        return None
    return row["ms"] / row["floor_ms"]


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if v < 1 else f"{v:.3f}" if v < 100 else f"{v:.0f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x" if v < 100 else f"{v:.0f}x"


def _pct(xf: float | None) -> str:
    return "-" if not xf else f"{100 / xf:.1f}%" if 100 / xf >= 0.1 else f"{100 / xf:.2g}%"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(cells) + " |" for cells in body)]


def _pairs(rows: list[dict]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["case"], r["layout"]) for r in rows))


def device_lines(info: dict, command: str | None) -> list[str]:
    device = info.get("device", "?")
    name = info.get("name", device)
    extra = f", {info['sms']} SMs" if info.get("sms") else ""
    versions = [f"{k} {info[k]}" for k in ("torch", "torch_npu", "triton", "triton_ascend", "ascend_kvc", "python",
                                           "driver", "cuda", "cann") if info.get(k)]
    lines = [f"- **Device:** {name} ({device}{extra})",
             f"- **Versions:** {', '.join(versions)} (from {info.get('versions_from', 'bench.machine')})"]
    if info.get("triton_conflict"):
        lines.append(f"- **Triton install conflict:** {info['triton_conflict']}")
    lines.append(f"- **Commit:** `{info.get('commit', 'unknown')}`, run on {info.get('date', '?')}")
    if info.get("read_gbs"):
        how = info.get("bandwidth_how", "a float32 sum")
        lines.append(f"- **Memory floor:** bytes that must move (each window row read once, {SLOT_BYTES} bytes "
                     f"written per output) / the read bandwidth **{info['read_gbs']:.1f} GB/s**, measured on this "
                     f"device in this run ({how}).")
    if command:
        lines.append(f"- **Command:** `{command}`")
    return lines


def correctness_lines(rows: list[dict]) -> list[str]:
    bad = [r for r in rows if failed(r)]
    line = (f"- **Correctness:** {len(rows) - len(bad)} of {len(rows)} (case, layout, route) passed the byte oracle "
            "before anything was timed")
    if not bad:
        return [line + "."]
    lines = [line + f"; **{len(bad)} FAILED** and were not timed:"]
    by_route: dict[str, list[str]] = {}
    for r in bad:
        by_route.setdefault(r["route"], []).append(f"{r['case']} {r['layout']}")
    lines += [f"  - `{route}` ({rows_[0] if len(rows_) == 1 else f'{len(rows_)} runs, e.g. {rows_[0]}'})"
              for route, rows_ in by_route.items()]
    return lines


def headline_lines(rows: list[dict]) -> list[str]:
    """Which route and which Ascend rung win, over how many (case, layout) pairs, how far from the floor."""
    lines = []
    for label, pick in (("Fastest route", lambda r: True),
                        ("Fastest Ascend rung", lambda r: r["route"].startswith("ascend:"))):
        wins: dict[str, list[dict]] = {}
        pairs = _pairs(rows)
        for case, layout in pairs:
            mine = [r for r in rows if r["case"] == case and r["layout"] == layout and pick(r)
                    and not failed(r) and r.get("ms")]
            if mine:
                best = min(mine, key=lambda r: r["ms"])
                wins.setdefault(best["route"], []).append(best)
        if not wins:
            continue
        ranked = sorted(wins.items(), key=lambda kv: -len(kv[1]))
        parts = [f"**{short_route(route) if label != 'Fastest route' else route}** in {len(won)} of {len(pairs)} "
                 f"(case, layout), at {_x(_geomean([x_floor(r) for r in won]))} the floor (geomean)"
                 for route, won in ranked]
        lines.append(f"- **{label}:** " + "; ".join(parts) + ".")
    return lines


def best_table(rows: list[dict]) -> list[str]:
    """Fastest route and fastest Ascend rung per (case, layout), against the floor."""
    has_graph = any(r.get("graph_ms") for r in rows)
    header = ["case", "layout", "fastest route", "ms", "x floor", "% of floor", "fastest Ascend rung", "ms",
              "x floor", "% of floor"]
    if has_graph:
        header += ["best CUDA graph", "x floor"]
    body = []
    for case, layout in _pairs(rows):
        mine = [r for r in rows if r["case"] == case and r["layout"] == layout and not failed(r) and r.get("ms")]
        best = min(mine, key=lambda r: r["ms"], default=None)
        rungs = [r for r in mine if r["route"].startswith("ascend:")]
        rung = min(rungs, key=lambda r: r["ms"], default=None)
        cells = [case, layout]
        rung_ran = any(r["case"] == case and r["layout"] == layout and r["route"].startswith("ascend:") for r in rows)
        for r, strip in ((best, False), (rung, True)):
            if r is None:  # every (case, layout) here ran some route; a rung maybe not
                cells += ["none passed" if rung_ran or not strip else "not run", "-", "-", "-"]
            else:
                xf = x_floor(r)
                cells += [f"**{short_route(r['route']) if strip else r['route']}**", _ms(r["ms"]), _x(xf), _pct(xf)]
        if has_graph:
            graphs = [r for r in mine if r.get("graph_ms")]
            g = min(graphs, key=lambda r: r["graph_ms"], default=None)
            cells += [f"{g['route']} {_ms(g['graph_ms'])} ms", _x(g["graph_ms"] / g["floor_ms"])] if g else ["-", "-"]
        body.append(cells)
    return _table(header, body)


def _device_x_floor(row: dict) -> float | None:
    if failed(row) or not row.get("device_ms") or not row.get("floor_ms"):
        return None
    return row["device_ms"] / row["floor_ms"]


def _failed_cell(mine: list[dict]) -> str:
    nfail = sum(failed(r) for r in mine)
    return f"**FAIL {nfail}/{len(mine)}**" if nfail else "0"


def ladder_table(rows: list[dict], device: str | None = None) -> list[str]:
    """Each rung against the one below it, in wall time and in device time: geometric means over
    the (case, layout) pairs. ``device`` "cpu": only what each rung is and whether it passed."""
    from ascend_kvc import ASCEND_STAGES, ROUTES

    present = {r["route"] for r in rows}
    stages = [s for s in ASCEND_STAGES if f"ascend:{s}" in present]
    if not stages:
        return []
    ms = {(r["case"], r["layout"], r["route"]): r for r in rows}
    pairs = _pairs(rows)
    if device == "cpu":  # interpreter times and no profiler: what each rung is, and whether it passed
        body = [[f"`{stage}`", ROUTES[f"ascend:{stage}"].description,
                 _failed_cell([ms[(c, lo, f"ascend:{stage}")] for c, lo in pairs if (c, lo, f"ascend:{stage}") in ms])]
                for stage in stages]
        return _table(["rung", "what it changes", "failed"], body) + [
            "", "On CPU the rungs ran under Triton's interpreter, whose times say nothing about a device: "
                "a GPU or NPU run compares them."]
    header = ["rung", "what it changes", "wall x floor (geomean)", "device x floor", "device / wall",
              "vs rung below: wall", "vs rung below: device", "vs bottom rung: wall", "failed"]
    body, steps, device_steps = [], [], []
    for i, stage in enumerate(stages):
        route = f"ascend:{stage}"
        mine = [ms[(c, lo, route)] for c, lo in pairs if (c, lo, route) in ms]
        xf = _geomean([x_floor(r) for r in mine if x_floor(r)])
        dxf = _geomean([_device_x_floor(r) for r in mine if _device_x_floor(r)])
        share = _geomean([r["device_ms"] / r["ms"] for r in mine if _device_x_floor(r) and x_floor(r)])

        def ratio(other: str, key: str = "ms") -> float | None:
            vals = [ms[(c, lo, other)][key] / ms[(c, lo, route)][key] for c, lo in pairs
                    if (c, lo, other) in ms and (c, lo, route) in ms
                    and not failed(ms[(c, lo, other)]) and not failed(ms[(c, lo, route)])
                    and ms[(c, lo, other)].get(key) and ms[(c, lo, route)].get(key)]
            return _geomean(vals)

        below = f"ascend:{stages[i - 1]}" if i else None
        prev = ratio(below) if i else None
        prev_device = ratio(below, "device_ms") if i else None
        first = ratio(f"ascend:{stages[0]}") if i else None
        if prev is not None:
            steps.append((stage, prev))
        if prev_device is not None:
            device_steps.append((stage, prev_device))
        desc = ROUTES[route].description if route in ROUTES else ""
        body.append([f"`{stage}`", desc, _x(xf), _x(dxf), "-" if share is None else f"{share:.2f}",
                     _x(prev) if i else "(bottom)", _x(prev_device) if i else "(bottom)",
                     _x(first) if i else "-", _failed_cell(mine)])
    lines = _table(header, body)
    lines.append("")
    lines.append("*Wall*: the median time of a call on the device's clock (`do_bench`), which includes the time "
                 "the device waits for the host to launch the next kernel. *Device*: the call's own kernels and "
                 "copies summed from the profiler (L2 flushed before the call), without those waits. A step that "
                 "gains in device time moves the bytes better (a gather strategy); one that gains only in wall time "
                 "saves launches and host work. *device / wall* near 1: the device is busy for the whole call; far "
                 "below 1: launch gaps dominate.")
    for label, found in (("wall", steps), ("device", device_steps)):
        if found:
            gains = [s for s, v in found if v >= 1.05]
            losses = [s for s, v in found if v < 0.95]
            lines.append("")
            lines.append(f"\"vs rung below: {label}\" > 1 means this rung is faster than the one before it. "
                         f"Steps that gain 5% or more in {label} time: {', '.join(f'`{s}`' for s in gains) or 'none'}; "
                         f"steps that lose 5% or more: {', '.join(f'`{s}`' for s in losses) or 'none'}.")
    return lines


def launch_table(rows: list[dict], device: str) -> list[str]:
    first = "Triton launches / call (interpreter)" if device == "cpu" else "device kernels / call (of which copies)"
    host = "host µs / call (interpreter wall time)" if device == "cpu" else "host µs / call (median)"
    header = ["route", first, "aten ops / call", host, "device ms / call (median)", "wall ms / call (median)",
              "failed"]
    body = []
    for route in route_order(rows):
        mine = [r for r in rows if r["route"] == route]
        ok = [r for r in mine if not failed(r)]

        def med(key: str) -> float | None:
            vals = [r[key] for r in ok if r.get(key) is not None]
            return statistics.median(vals) if vals else None

        def num(v: float | None, fmt: str = "{:.3g}") -> str:
            return "-" if v is None else fmt.format(v)

        if device == "cpu":
            first_cell = num(med("triton_launches"))
        else:
            k, c = med("kernels"), med("copies")
            first_cell = num(k) + (f" ({num(c)})" if c else "")
        nfail = sum(failed(r) for r in mine)
        if not ok:
            body.append([f"`{route}`", *["FAIL"] * (len(header) - 2), f"**FAIL {nfail}/{len(mine)}**"])
            continue
        body.append([f"`{route}`", first_cell, num(med("aten_ops")), num(med("host_us"), "{:.0f}"),
                     "n/a" if device == "cpu" else _ms(med("device_ms")), _ms(med("ms")),
                     f"**FAIL {nfail}/{len(mine)}**" if nfail else "0"])
    lines = _table(header, body)
    hows = sorted({r["kernels_how"] for r in rows if r.get("kernels_how")})
    counted = sum(r.get("kernels") is not None for r in rows)
    timed = sum(r.get("device_ms") is not None for r in rows)
    lines.append("")
    if device == "cpu":
        lines.append("On CPU there is no device: the first column counts the Triton kernels the interpreter runs, "
                     "the aten column the PyTorch operators a call dispatches (the interpreter's own copies left "
                     "out), and host time is the interpreter's wall time of a call, not a launch cost. Device "
                     "time needs a device profiler: n/a.")
    else:
        lines.append("Device kernels: " + ("; ".join(hows) or "not measured") +
                     f", counted on {counted} of {len(rows)} runs. aten ops: PyTorch operators a "
                     "call dispatches (a dispatch counter). Host µs: median over many calls queued without a "
                     "device sync, `validate=False`, `out` given; a route that syncs inside pays for the wait here. "
                     f"Device ms: the call's kernels' own durations summed (profiler), timed on {timed} of "
                     f"{len(rows)} runs; wall ms: `do_bench`'s median, which adds the waits for launches.")
    lines.append("Medians over every (case, layout) that passed.")
    return lines


def occupancy_lines(rows: list[dict], info: dict) -> list[str]:
    """The occupancy model (``bench.occupancy``) for the cases and Ascend rungs of this run, at
    ``bench.occupancy.CORE_COUNTS`` vector cores and at the grid this run had; [] without a rung."""
    from ascend_kvc import ASCEND_STAGES
    from ascend_kvc.routes import ASCEND_DEFAULT_STAGE
    from bench.figures import parse_case
    from bench.occupancy import CORE_COUNTS, format_table, occupancy_rows

    present = {r["route"] for r in rows}
    if "ascend" in present:  # the default rung under its short name
        present.add(f"ascend:{ASCEND_DEFAULT_STAGE}")
    stages = [s for s in ASCEND_STAGES if f"ascend:{s}" in present]
    cases = []
    for name in dict.fromkeys(r["case"] for r in rows):
        try:
            cases.append(parse_case(name))
        except ValueError:
            continue
    if not stages or not cases:
        return []
    cores = set(CORE_COUNTS)
    ran = info.get("ascend_programs")
    if isinstance(ran, int) and ran >= 1:
        cores.add(ran)
    lines = ["**A model, not a measurement**: the bytes of compressor state each program of a rung's "
             "persistent grid reads, dealt out as the kernels deal out their work items (`python -m "
             "bench.occupancy`; `ascend_kvc.stages.work_split` for the split of `triton-quant` and `fused`). "
             "*busy*: the share of cores x the busiest program's bytes that holds work (1.00 = no core waits "
             "for the busiest); *max/mean*: the busiest program's bytes over the mean of the programs "
             "launched. It assumes time proportional to bytes and leaves out merges, quantise and scatter "
             "kernels, index reads and framework ops; the measured times are in the tables above."]
    if isinstance(ran, int) and ran >= 1:
        lines.append(f"This run's Ascend grids had at most {ran} programs "
                     f"(`ascend_kvc.device.ascend_programs` on {info.get('device', '?')}).")
    return lines + [""] + format_table(occupancy_rows(cases, tuple(sorted(cores)), stages)).splitlines()


def render(rows: list[dict], info: dict, full_table: str, command: str | None = None,
           figures: tuple[str, ...] = ()) -> str:
    device = info.get("device", "?")
    name = info.get("name", device)
    out = [f"# ascend_kvc benchmark: {name} ({device}), {info.get('date', '')}", ""]
    if device == "cpu":
        out += ["> **CPU functional run.** The Triton routes ran under Triton's CPU interpreter: every time below "
                "is the interpreter's, and says nothing about a GPU or an NPU. The correctness column holds.", ""]
    # On CPU the interpreter's times rank nothing and there is no floor: no winners, no floor table.
    out += device_lines(info, command) + correctness_lines(rows) + ([] if device == "cpu" else headline_lines(rows))
    out += [""]
    if device != "cpu":
        out += ["## Fastest per case", "",
                "x floor: median time over the memory floor (1.00x = at the floor). % of floor: the floor over the "
                "time, i.e. the share of the measured read bandwidth reached.", ""]
        out += best_table(rows) + [""]
    ladder = ladder_table(rows, device)
    if ladder:
        out += ["## The Ascend ladder, step by step", "",
                "Bottom rung first. Geometric means over every (case, layout) where both rungs passed.", ""]
        out += ladder + [""]
    out += ["## What launches cost", ""] + launch_table(rows, device) + [""]
    occupancy = occupancy_lines(rows, info)
    if occupancy:
        out += ["## How the Ascend grids share the vector cores (a model)", ""] + occupancy + [""]
    if figures:
        out += ["## Figures", ""]
        out += [f"![{title}]({fname})" for fname, title in FIGURES if fname in figures]
        out.append("")
    out += ["## Full table", "", full_table, ""]
    if info.get("library_env_text"):
        out += ["## Environment (`python -m ascend_kvc.env`)", "", "```", info["library_env_text"], "```", ""]
    bad = [r for r in rows if failed(r)]
    if bad:
        out += ["## Failures", ""]
        out += [f"- `{r['route']}` {r['case']} {r['layout']}: {r['check']}: {r.get('check_detail', '')}" for r in bad]
        out.append("")
    return "\n".join(out)
