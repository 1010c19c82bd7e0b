"""The report folder and its figures.

A small real run (one tiny case, three routes; the Triton routes under the interpreter on CPU)
is rendered into a folder, with one failing route result injected into its rows: the summary
must name the fastest rung, and the failed route must read FAIL everywhere and never as a time.
The figure functions are also drawn from synthetic rows shaped like an official GPU run (24
(case, layout) groups x 11 routes) and checked for size, failure markers and overlapping text.
"""

import math
import random
import struct
from types import SimpleNamespace

import pytest
import torch

from ascend_kvc import ASCEND_STAGES
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
from bench import figures, summary
from bench.report import write_report

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_PX = (1400, 900)


def png_size(path) -> tuple[int, int]:
    head = open(path, "rb").read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def synthetic_rows(failed_route: str | None = None, device: str = "cuda"):
    """Rows like an official GPU run: 12 cases x 2 layouts x (reference, every rung, gpgpu)."""
    import ascend_kvc

    rnd = random.Random(0)
    routes = ["reference", *(f"ascend:{s}" for s in ascend_kvc.ASCEND_STAGES), "gpgpu"]
    info = {"device": device, "name": "NVIDIA H200" if device == "cuda" else "x86_64", "commit": "0123456789ab",
            "date": "2026-12-02", "read_gbs": 4200.0, "torch": "2.11", "triton": "3.6"}
    rows = []
    for r, t, c in OFFICIAL_CASES:
        nbytes = (t // c) * r // r * (c * 4096 + 584)
        floor_ms = nbytes / info["read_gbs"] / 1e6
        for layout in ("contiguous", "shuffled"):
            for k, route in enumerate(routes):
                row = {"case": f"R{r}-T{t}-C{c}", "layout": layout, "route": route, "bytes": nbytes,
                       "floor_ms": floor_ms, "check": "ok"}
                if route == failed_route and (t, c) == (131072, 256):
                    row["check"] = "FAIL"
                else:
                    ms = floor_ms * (1.15 if route == "gpgpu" else 1.05 + 30 * rnd.random() / (1 + 0.2 * k))
                    row.update(ms=ms, x_floor=ms / floor_ms, kernels=float(2 + k), aten_ops=float(10 + 3 * k),
                               triton_launches=float(k % 3), host_us=50.0 * 10 ** (k / 2) * (1 + rnd.random()))
                    if device != "cpu":
                        row["device_ms"] = ms * (0.2 + 0.8 * rnd.random())
                    if route == "gpgpu":
                        row["graph_ms"] = floor_ms * 1.2
                rows.append(row)
    return rows, info


def text_overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of drawn, non-empty texts in ``fig`` (tick labels in view, axis labels, titles, in-plot
    labels, legends, the suptitle) whose boxes overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = list(fig.texts)  # the suptitle is one of them
    for legend in fig.legends:
        texts += legend.get_texts()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        texts += [t for t in ax.get_xticklabels(which="both") if x0 <= t.get_position()[0] <= x1]
        texts += [t for t in ax.get_yticklabels(which="both") if y0 <= t.get_position()[1] <= y1]
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.get_legend():
            texts += ax.get_legend().get_texts()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    hits = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if ba.overlaps(bb):
                hits.append((a, b))
    return hits


@pytest.fixture(params=["today", "with-more-rungs"])
def stages(request, monkeypatch):
    """The ladder as it is, and as it may grow (two more rungs with long names)."""
    import ascend_kvc

    if request.param == "with-more-rungs":
        monkeypatch.setattr(ascend_kvc, "ASCEND_STAGES", (*ascend_kvc.ASCEND_STAGES, "fused", "fused-persistent-d512"))
    return ascend_kvc.ASCEND_STAGES


@pytest.mark.parametrize("build", [figures.build_ladder, figures.build_floor, figures.build_launch])
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_figures_from_an_official_sized_run(build, device, stages, tmp_path):
    rows, info = synthetic_rows(failed_route=f"ascend:{stages[-1]}", device=device)
    fig = build(rows, info)
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= MAX_PX[0] and h <= MAX_PX[1]
    assert text_overlaps(fig) == []
    # the failed route is marked: a red X on the plots, FAIL text on the launch bars
    if build is figures.build_launch:
        assert any("FAIL" in t.get_text() for ax in fig.axes for t in ax.texts)
    else:
        xs = [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "X"
              and ln.get_markeredgecolor() == figures.FAIL_COLOR]
        assert xs, "no failure marker drawn"
    path = tmp_path / "f.png"
    figures._save(fig, str(path))
    assert png_size(path)[0] <= MAX_PX[0] and png_size(path)[1] <= MAX_PX[1]


def test_launch_figure_sets_wall_beside_device_time_where_a_profiler_timed_it():
    rows, info = synthetic_rows(device="cuda")
    fig = figures.build_launch(rows, info)
    assert len(fig.axes) == 4 and "wall and\ndevice" in fig.axes[3].get_title()
    routes = figures.route_order(rows)
    assert len(fig.axes[3].patches) == 2 * len(routes)  # a wall bar and a device bar per route
    for r in rows:  # a run saved before device time existed, and CPU (no profiler): no such panel
        r.pop("device_ms", None)
    assert len(figures.build_launch(rows, info).axes) == 3
    assert len(figures.build_launch(*synthetic_rows(device="cpu")).axes) == 3


def test_ladder_takes_its_order_from_the_stages_tuple():
    rows, info = synthetic_rows()
    rnd = random.Random(1)
    rnd.shuffle(rows)  # the rows' order must not matter
    fig = figures.build_ladder(rows, info)
    labels = [t.get_text().replace("\n", "") for t in fig.axes[-1].get_xticklabels()]
    assert labels == list(ASCEND_STAGES)
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes] == ["C = 128", "C = 256", "C = 512"]


def test_ladder_never_plots_a_failed_rungs_time():
    rows, info = synthetic_rows(failed_route=f"ascend:{ASCEND_STAGES[2]}")
    for r in rows:  # a stale time left on a failed row must still not be drawn
        if r["check"] != "ok":
            r["ms"] = 1e-9
    fig = figures.build_ladder(rows, info)
    ys = [y for ax in fig.axes for ln in ax.lines if ln.get_marker() == "o" for y in ln.get_ydata()
          if not math.isnan(y)]
    assert min(ys) > 1.0  # every drawn time is above the floor; the failed 1e-9 ms is not among them


def test_no_ladder_without_rungs():
    rows, info = synthetic_rows()
    assert figures.build_ladder([r for r in rows if not r["route"].startswith("ascend")], info) is None


def _small_run(routes):
    """One tiny case through the CLI's own measuring code, as ``python -m bench`` runs it."""
    from bench.cli import Progress, count_case_kernels, make_timer, measure_case
    from bench.environment import library_environment
    from bench.machine import measure_bandwidth

    info = library_environment(DEVICE)
    time_fn = make_timer(DEVICE)
    info.update(measure_bandwidth(DEVICE, time_fn))
    w = make_workload(1, 256, 128, shuffle=True, nonzero_cache=True, device=DEVICE)
    args = SimpleNamespace(host_calls=20)
    rows = measure_case(w, "shuffled", routes, DEVICE, info, time_fn, args, Progress(len(routes), False))
    count_case_kernels(w, rows, DEVICE)
    return rows, info


def test_report_from_a_small_run_names_the_best_rung_and_marks_a_failure(tmp_path):
    rows, info = _small_run(["reference", "ascend:pre-gather", f"ascend:{ASCEND_STAGES[-1]}"])
    assert all(r["check"] == "ok" for r in rows), [r["check_detail"] for r in rows]
    for r in rows:
        assert r["ms"] > 0 and r["host_us"] > 0 and r["aten_ops"] >= 0  # fused: one launch, no framework op
        assert r["aten_ops"] > 0 or r["route"] == "ascend:fused"
        if DEVICE == "cuda":
            assert r["kernels"] >= 1
    # inject a route that failed the oracle, carrying a stale time faster than anything measured
    broken = dict(rows[-1], route=f"ascend:{ASCEND_STAGES[2]}", check="FAIL",
                  check_detail="MISMATCH (3 bytes): planted", ms=1e-9)
    rows.append(broken)

    report = write_report(str(tmp_path / "rep"), info, rows, "python -m bench (test)")
    folder = report.parent
    for name in ("report.md", "bench.csv", "bench.json", "ladder.png", "floor.png", "launches.png"):
        assert (folder / name).is_file(), name
    for name in ("ladder.png", "floor.png", "launches.png"):
        w, h = png_size(folder / name)
        assert w <= MAX_PX[0] and h <= MAX_PX[1], name
    text = report.read_text()
    head = text.split("## Full table")[0]

    if DEVICE == "cpu":  # the interpreter's times rank nothing and there is no floor
        ladder_section = head.split("## The Ascend ladder")[1].split("\n## ")[0]
        assert "## Fastest per case" not in head and "**Fastest" not in head and "floor" not in ladder_section
    else:
        rungs = [r for r in rows if r["route"].startswith("ascend:") and r["check"] == "ok"]
        best = min(rungs, key=lambda r: r["ms"])["route"].removeprefix("ascend:")
        rung_line = next(line for line in head.splitlines() if line.startswith("- **Fastest Ascend rung:**"))
        assert f"**{best}** in 1 of 1" in rung_line
        assert ASCEND_STAGES[2] not in rung_line and ASCEND_STAGES[2] not in next(
            line for line in head.splitlines() if line.startswith("- **Fastest route:**"))
        best_rows = head.split("## Fastest per case")[1].split("##")[0]
        assert f"**{best}**" in best_rows and f"**{ASCEND_STAGES[2]}**" not in best_rows
    assert f"({DEVICE}" in head
    assert "read bandwidth" in head and f"{info['read_gbs']:.1f} GB/s" in head
    assert "**1 FAILED**" in head and f"`ascend:{ASCEND_STAGES[2]}`" in head
    assert ("CPU functional run" in head) == (DEVICE == "cpu")
    # the failed route's row reads FAIL in every timed cell of the full table, never a time
    table_row = next(line for line in text.splitlines() if f"| ascend:{ASCEND_STAGES[2]} " in line)
    cells = [c.strip() for c in table_row.strip("|").split("|")]
    assert cells[3] == "FAIL" and cells[4] == "FAIL" and "1e-09" not in table_row and "0.0000" not in table_row
    ladder_row = next(line for line in head.splitlines() if line.startswith(f"| `{ASCEND_STAGES[2]}`"))
    assert "FAIL 1/1" in ladder_row
    launch_row = next(line for line in head.splitlines() if line.startswith(f"| `ascend:{ASCEND_STAGES[2]}`"))
    assert launch_row.count("FAIL") >= 4
    # device time sits next to wall time where a profiler measured it; on CPU the full table and the
    # ladder summary leave out the columns that mean nothing there
    header = [c.strip() for c in next(line for line in text.splitlines()
                                      if line.startswith("| case ") and "median ms" in line).strip("|").split("|")]
    if DEVICE == "cpu":
        assert all(r["device_ms"] is None for r in rows)
        assert header == ["case", "layout", "route", "check", "median ms", "triton launches", "aten ops"]
        ladder_ok = next(line for line in head.splitlines() if line.startswith(f"| `{ASCEND_STAGES[-1]}`"))
        assert [c.strip() for c in ladder_ok.strip("|").split("|")][2:] == ["0"]  # rung, what, failed
    else:
        assert header[header.index("median ms") + 1] == "device ms"
        ok_row = next(line for line in text.splitlines() if f"| {rows[1]['route']} " in line and "| ok " in line)
        device_cell = [c.strip() for c in ok_row.strip("|").split("|")][header.index("device ms")]
        assert all(r["device_ms"] > 0 for r in rows if r["check"] == "ok")
        assert float(device_cell) > 0
    # the occupancy model is in the report, in words that say it is one
    assert "## How the Ascend grids share the vector cores (a model)" in text
    assert "A model, not a measurement" in text


def test_cpu_launch_counts_are_labelled_and_count_triton_launches():
    if DEVICE != "cpu":
        pytest.skip("the interpreter's launch counter is a CPU-only measurement")
    from bench.launches import count_device_kernels, count_framework_ops

    w = make_workload(1, 256, 128, device="cpu")
    from ascend_kvc import c128_256_512_compress

    out = w.kv_cache.clone()

    def call(route):
        return lambda: c128_256_512_compress(*w.args(), out=out, route=route, validate=False)

    call("gpgpu")()
    assert count_device_kernels(call("gpgpu"), "cpu")["kernels"] is None
    gpgpu = count_framework_ops(call("gpgpu"), "cpu")
    ref = count_framework_ops(call("reference"), "cpu")
    assert gpgpu["triton_launches"] == 1 and ref["triton_launches"] == 0
    # gpgpu runs no framework op of its own: any count here would be the interpreter's copies.
    assert ref["aten_ops"] > 0 and gpgpu["aten_ops"] == 0
    rows = [{"case": "R1-T256-C128", "layout": "shuffled", "route": "gpgpu", "check": "ok", "ms": 1.0, **gpgpu}]
    text = "\n".join(summary.launch_table(rows, "cpu"))
    assert "Triton launches / call (interpreter)" in text and "interpreter's wall time" in text


def test_ladder_table_tells_gather_work_from_launch_overhead():
    """Two rungs whose kernels take the same device time, one with 2x the wall time (launch waits):
    the wall step shows the gain, the device step shows none."""
    from bench.summary import ladder_table

    low, high = ASCEND_STAGES[1], ASCEND_STAGES[2]

    def row(stage, ms, device_ms):
        return dict(case="R1-T8192-C128", layout="shuffled", route=f"ascend:{stage}", check="ok", ms=ms,
                    device_ms=device_ms, floor_ms=0.01)

    lines = ladder_table([row(low, 0.2, 0.05), row(high, 0.1, 0.05)], "cuda")
    top = next(line for line in lines if line.startswith(f"| `{high}`"))
    cells = [c.strip() for c in top.strip("|").split("|")]
    assert cells[2:7] == ["10.00x", "5.00x", "0.50", "2.00x", "1.00x"]
    wall_steps = next(line for line in lines if "or more in wall time" in line)
    device_steps = next(line for line in lines if "or more in device time" in line)
    assert f"`{high}`" in wall_steps.split("steps that lose")[0]
    assert f"`{high}`" not in device_steps
    # on CPU (interpreter times, no profiler): what the rung is and whether it passed, no ratio
    cpu = ladder_table([row(low, 0.2, None), row(high, 0.1, None)], "cpu")
    assert cpu[0] == "| rung | what it changes | failed |"
    assert not any("x" in c for line in cpu if line.startswith("| `") for c in line.split("|")[3:])


def test_best_table_tells_a_rung_not_run_from_one_that_failed():
    """A run without Ascend rungs (``--routes reference,gpgpu``) must not say they all failed."""
    from bench.summary import best_table

    def row(route, check="ok"):
        return dict(case="R1-T8192-C128", layout="shuffled", route=route, check=check, ms=0.02, floor_ms=0.01)

    without = "\n".join(best_table([row("reference"), row("gpgpu")]))
    assert "not run" in without and "none passed" not in without
    failed = "\n".join(best_table([row("reference"), row("gpgpu"), row("ascend:fused", check="FAIL")]))
    assert "none passed" in failed and "not run" not in failed
