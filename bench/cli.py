"""python -m bench: correctness first, then timings of every route and Ascend stage.

Every (case, layout, route) is first checked against the float64 byte oracle; a route that fails
is reported and never timed. Then each passing one is timed on the device (wall time of a call),
its PyTorch ops are counted with a dispatch counter, and its host time per call is measured.
Last, once every case's host time is taken (a profiler session slows later calls' host time on
a GPU), each case is built again from its seed, and its device kernels are counted and their own
durations summed with the vendor profiler (device time: the wall time less the gaps that
launches leave). The report folder holds report.md (summary first), bench.csv, bench.json and
three figures. On a CPU-only machine the default is the small cases, with the Triton routes
run through the interpreter: a functional run whose times say nothing about a GPU or NPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time


AUTO_REPORT = "auto"
# Default report folders go here (ignored by git); bench/results/ holds the runs kept on purpose.
OUT_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

EXAMPLES = """\
examples:
  python -m bench
      defaults for the device found (npu -> cuda -> cpu); report into bench/out/<device>-<date>/
  python -m bench --report out/
      the same report into out/
  python -m bench --cases official --routes reference,gpgpu --csv out.csv --json out.json
      two routes on the 12 official cases, table plus CSV and JSON (no report folder)
  python -m bench --cases 8,131072,512 --stages block-d512,byte-scatter --shuffle --plot ladder.png
      one case, two Ascend rungs, shuffled block tables only, the ladder figure
  python -m bench --cases C4 --routes reference,gpgpu,ascend,ascend:fused
      the overlapping ratio-4 prefill chunk (not an official case) on the routes that compute it
  python -m bench --cases official C4 --shuffle --kv-format bf16 --routes gpgpu,ascend,ascend:fused
      every case writing vLLM-Ascend's bf16 rows instead of the challenge's int8 slots
  make bench BENCH_ARGS="--cases small --routes reference,gpgpu --no-progress"
      the Makefile's target, flags passed through
"""


def report_folder(requested: str, info: dict) -> str:
    """``requested``, or for ``auto`` bench/out/<device>-<YYYY-MM-DD>, with -HHMM if that exists."""
    if requested != AUTO_REPORT:
        return requested
    from pathlib import Path

    name = info.get("name", info["device"]) if info["device"] != "cpu" else "cpu"
    slug = "".join(ch for ch in name.lower().removeprefix("nvidia ").replace(" ", "-") if ch.isalnum() or ch == "-")
    base = Path(OUT_ROOT) / f"{slug or info['device']}-{time.strftime('%Y-%m-%d')}"
    for candidate in (base, Path(f"{base}-{time.strftime('%H%M')}"), Path(f"{base}-{time.strftime('%H%M%S')}")):
        if not candidate.exists():
            return str(candidate)
    return str(candidate)


CASE_FORM = "R,T,C: R requests, T tokens in all, compress ratio C, e.g. 8,131072,512"


def _parse_case(item: str) -> tuple[int, int, int]:
    """One ``R,T,C`` triple, or ``ValueError`` saying what is wrong with it."""
    from ascend_kvc.layout import COMPRESS_RATIOS

    try:
        r, t, c = (int(x) for x in item.split(","))
    except ValueError:
        raise ValueError(f"expected 'official', 'small', 'C4' or {CASE_FORM}; got {item!r}") from None
    if r < 1 or t < 1:
        raise ValueError(f"{item!r}: R and T must be >= 1 ({CASE_FORM})")
    if c not in COMPRESS_RATIOS:
        raise ValueError(f"{item!r}: C must be one of {', '.join(map(str, COMPRESS_RATIOS))}, got {c}")
    if t % r:
        raise ValueError(f"{item!r}: T={t} must be a multiple of R={r} (every request holds T/R tokens)")
    if t // r < c:
        raise ValueError(f"{item!r}: each request's T/R={t // r} tokens must hold at least one window of C={c} "
                         "(else there is nothing to compress)")
    return r, t, c


def _parse_cases(items: list[str]) -> list[tuple[int, int, int]]:
    """``official``, ``small``, ``C4`` and R,T,C triples, in order; ``ValueError`` for a bad one."""
    from ascend_kvc.workloads import C4_CASE, OFFICIAL_CASES, SMALL_CASES

    cases: list[tuple[int, int, int]] = []
    for item in items:
        if item == "official":
            cases += OFFICIAL_CASES
        elif item == "small":
            cases += SMALL_CASES
        elif item == "C4":
            cases.append(C4_CASE)
        else:
            cases.append(_parse_case(item))
    return cases


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description and examples as written; each option's default shown, or said in its help
    where it depends on the device (default None), the option is a flag (False) or repeatable ([])."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == [] \
                or action.default == argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def parse_cases_or_exit(parser: argparse.ArgumentParser, items: list[str] | None,
                        flag: str = "--cases") -> list[tuple[int, int, int]] | None:
    """``_parse_cases(items)`` (None for no items), or ``parser.error`` naming what is wrong."""
    try:
        return _parse_cases(items) if items else None
    except ValueError as exc:
        parser.error(f"{flag}: {exc}")


def check_route_or_exit(parser: argparse.ArgumentParser, flag: str, value: str) -> list[str]:
    """The comma-separated routes of ``value``, or ``parser.error`` naming the unknown ones."""
    from ascend_kvc.routes import route_names

    routes = value.split(",")
    unknown = [r for r in routes if r not in route_names()]
    if unknown:
        parser.error(f"{flag}: unknown {', '.join(map(repr, unknown))}; known: {', '.join(route_names())}")
    return routes


def require_cuda_or_exit(parser: argparse.ArgumentParser) -> None:
    """``parser.error`` unless a CUDA GPU is there (for the tools that time CUDA graphs and events)."""
    import torch

    if not torch.cuda.is_available():
        parser.error(f"{parser.prog} needs a CUDA GPU (none is available here); python -m bench runs on any device")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.strip(), epilog=EXAMPLES,
                                formatter_class=HelpFormatter)
    p.add_argument("--device", choices=["auto", "npu", "cuda", "cpu"], default="auto",
                   help="where to run; auto: an Ascend NPU, else a CUDA GPU, else the CPU (Triton interpreter)")
    p.add_argument("--cases", nargs="+", default=None, metavar="CASE",
                   help="'official' (the 12 cases of docs/CONTRACT.md), 'small' (3 interpreter-sized cases), "
                        "'C4' (not official: 8192 tokens, 2048 outputs, compress ratio 4 with overlap, shuffled "
                        f"blocks, on the routes that compute it), or {CASE_FORM} (default: official on a GPU/NPU, "
                        "small on CPU)")
    p.add_argument("--routes", default=None,
                   help="comma-separated routes: reference, ascend, ascend:<stage>, gpgpu, auto; reference is "
                        "always added, every speed-up is measured against it (default: reference, every Ascend "
                        "stage of --stages, and gpgpu off an NPU)")
    p.add_argument("--stages", default=None,
                   help="comma-separated Ascend stages to run when --routes is not given (default: every stage)")
    layout = p.add_mutually_exclusive_group()
    layout.add_argument("--shuffle", action="store_true",
                        help="only the shuffled block-table layout (without either flag: both on a GPU/NPU, "
                             "shuffled on CPU)")
    layout.add_argument("--contiguous", action="store_true", help="only the contiguous block-table layout")
    p.add_argument("--inplace", action="store_true",
                   help="write in place into a non-zero cache for every layout (shuffled always does)")
    p.add_argument("--block-size", type=int, default=8, help="state rows per block (>= 1)")
    p.add_argument("--kv-format", choices=["int8", "fp8_e4m3", "bf16"], default="int8",
                   help="the cache every case writes: the challenge's int8 slots, vLLM's fp8_e4m3 slots or "
                        "vLLM-Ascend's bf16 rows of 512 (routes that do not write it are left out)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random workloads")
    report = p.add_mutually_exclusive_group()
    report.add_argument("--report", nargs="?", const=AUTO_REPORT, metavar="DIR",
                        help="write report.md, bench.csv, bench.json and the figures into DIR (no DIR: "
                             "bench/out/<device>-<YYYY-MM-DD>[-HHMM]/); the default unless --csv, --json, --plot "
                             "or --no-report is given")
    report.add_argument("--no-report", action="store_true", help="print the table only")
    p.add_argument("--csv", metavar="PATH", help="write every row to this CSV file (rewritten after each case)")
    p.add_argument("--json", metavar="PATH", help="write the machine facts and every row to this JSON file")
    p.add_argument("--plot", metavar="PNG", help="the ladder figure alone (the floor figure when no Ascend rung runs)")
    p.add_argument("--host-calls", type=int, default=100,
                   help="calls queued per host-time measurement on a GPU/NPU (>= 1; on CPU the timed calls are "
                        "used); 100 calls of a few kernels stay inside the launch queue")
    p.add_argument("--kernels", choices=["auto", "every", "per-ratio"], default="auto",
                   help="which rows get a profiler kernel count and device time: every row, or the first case "
                        "of each C per route and layout (auto: every row on CUDA, per-ratio on an NPU, whose "
                        "profiler parses its trace from disk for seconds each time)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress on stderr (a bar on a terminal, one line per measured route otherwise)")
    return p


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject nonsense before any work: ``parser.error`` prints one line and exits with status 2.

    Sets ``args.case_list`` (the parsed cases, or None for the device's default).
    """
    from ascend_kvc import ASCEND_STAGES

    args.case_list = parse_cases_or_exit(parser, args.cases)
    if args.stages is not None:
        unknown = [s for s in args.stages.split(",") if s not in ASCEND_STAGES]
        if unknown:
            parser.error(f"--stages: unknown {', '.join(map(repr, unknown))}; the ladder is {', '.join(ASCEND_STAGES)}")
    if args.routes is not None:
        check_route_or_exit(parser, "--routes", args.routes)
    if args.block_size < 1:
        parser.error(f"--block-size: must be >= 1, got {args.block_size}")
    if args.host_calls < 1:
        parser.error(f"--host-calls: must be >= 1, got {args.host_calls}")
    for flag in ("csv", "json", "plot"):
        path = getattr(args, flag)
        if path is not None:
            folder = os.path.dirname(os.path.abspath(path))
            if os.path.isdir(path) or not os.path.isdir(folder):
                parser.error(f"--{flag}: {path!r} is not a file in an existing folder")
    if args.report not in (None, AUTO_REPORT) and os.path.exists(args.report) and not os.path.isdir(args.report):
        parser.error(f"--report: {args.report!r} exists and is not a folder")


def _resolve_device(parser: argparse.ArgumentParser, requested: str) -> str:
    """The device to run on; an explicitly requested one that is absent is an argument error."""
    from bench.machine import detect_device

    if requested == "cpu":
        return "cpu"
    found = detect_device()  # imports torch_npu where installed, so that torch.npu exists
    if requested == "auto":
        return found
    if requested == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA GPU is available (try --device auto)")
    elif found != "npu":
        parser.error("--device npu: no Ascend NPU is available (torch_npu missing or no device; try --device auto)")
    return requested


def _routes(args, device: str) -> list[str]:
    """The routes to run (``args`` passed ``check_args``)."""
    from ascend_kvc import ASCEND_STAGES

    stages = args.stages.split(",") if args.stages else list(ASCEND_STAGES)
    if args.routes:
        routes = list(dict.fromkeys(args.routes.split(",")))
    else:
        routes = ["reference", *(f"ascend:{s}" for s in stages)]
        if device != "npu":
            routes.append("gpgpu")
    if "reference" not in routes:
        routes.insert(0, "reference")  # every speed-up is measured against it
    return routes


# Routes that promise no host sync and no data-dependent allocation with validate=False: their
# CUDA-graph replay is timed too (what an engine that captures graphs sees: no launch gaps).
GRAPH_ROUTES = ("gpgpu",)


def time_graph(call, time_fn) -> float:
    import torch

    call()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return time_fn(graph.replay)["ms"]


def make_timer(device: str):
    """Return ``time_fn(fn) -> {ms, p20, p80}`` for the device: events on GPU/NPU, a clock on CPU.

    ``time_fn.how`` names the method, for the report.
    """
    if device == "cpu":
        def time_cpu(fn, reps: int = 1):
            # The interpreter is slow: the correctness run already compiled everything, so one
            # timed call; the numbers only say the route runs.
            samples = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t) * 1e3)
            return {"ms": statistics.median(samples), "p20": min(samples), "p80": max(samples)}
        time_cpu.how = "wall clock of one call"
        return time_cpu

    import triton.testing

    def time_device(fn):
        # On an NPU this is triton-ascend's do_bench (its driver hands it torch.npu's events and
        # an L2-sized buffer to flush); elsewhere community Triton's, on CUDA events.
        ms, p20, p80 = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        return {"ms": ms, "p20": p20, "p80": p80}
    time_device.how = "triton.testing.do_bench median (L2 flushed between calls)"
    return time_device


def _ascend_programs(device: str) -> int | None:
    """The most programs an Ascend grid had in this run (``ascend_kvc.device.ascend_programs``:
    the vector cores of an NPU, ``ASCEND_KVC_VECTOR_CORES`` where set), for the occupancy model."""
    import torch

    from ascend_kvc.device import ascend_programs

    try:
        return ascend_programs(torch.device(device))
    except Exception:  # a device query that fails must not sink the benchmark
        return None


class Progress:
    """Progress on ``stream`` (default stderr): a bar redrawn with ``\\r`` on a terminal, else one
    plain line per step, so that a log holds no ``\\r``; nothing when not ``enabled``."""

    def __init__(self, total: int, enabled: bool, stream=None):
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.time()
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.redraw = bool(isatty and isatty())

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.time() - self.t0
        if self.redraw:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                              f"{elapsed:5.0f}s {label[:60]:<60}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total}] {elapsed:.0f}s {label}\n")
        self.stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    device = _resolve_device(parser, args.device)
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel is defined

    import torch

    from ascend_kvc.layout import OVERLAP_RATIO
    from ascend_kvc.workloads import make_workload
    from bench.environment import library_environment
    from bench.machine import machine_line, measure_bandwidth
    from bench.report import format_table, write_csv, write_json, write_plot, write_report

    cases = args.case_list or _parse_cases(["official"] if device != "cpu" else ["small"])
    routes = _routes(args, device)
    if args.shuffle or (device == "cpu" and not args.contiguous):
        layouts = ["shuffled"]  # on CPU one layout by default: the interpreter is slow
    elif args.contiguous:
        layouts = ["contiguous"]
    else:
        layouts = ["contiguous", "shuffled"]
    wants_report = args.report is not None or not (args.no_report or args.csv or args.json or args.plot)

    info = library_environment(device)
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    info["ascend_programs"] = _ascend_programs(device)
    time_fn = make_timer(device)
    info.update(measure_bandwidth(device, time_fn))
    print(machine_line(info))
    if args.kv_format != "int8":
        print(f"cache format: {args.kv_format} (every case)")
    print(f"measured read bandwidth {info['read_gbs']:.1f} GB/s ({info['bandwidth_how']}), "
          f"copy {info['copy_gbs']:.1f} GB/s (read + written)")
    if "note" in info:
        print(info["note"])
    sys.stdout.flush()

    progress = Progress(len(cases) * len(layouts) * len(routes), not args.no_progress)
    kernels_every = args.kernels == "every" or (args.kernels == "auto" and device != "npu")
    profiled: set[tuple[int, str]] = set()
    rows = []
    to_profile = []  # (workload arguments, the rows of its routes) whose kernels the profiler counts
    for r, t, c in cases:
        overlap = c == OVERLAP_RATIO  # the C4 case: DeepSeek-V4's overlapping compressor, shuffled blocks
        for layout in ["shuffled"] if overlap else layouts:
            build = dict(num_reqs=r, total_tokens=t, compress_ratio=c, block_size=args.block_size,
                         shuffle=layout == "shuffled", nonzero_cache=layout == "shuffled" or args.inplace,
                         seed=args.seed, device=device, overlap=overlap, kv_format=args.kv_format)
            w = make_workload(**build)
            case_rows = measure_case(w, layout, _routes_for(w, routes), device, info, time_fn, args, progress)
            rows += case_rows
            if kernels_every or (c, layout) not in profiled:
                to_profile.append((build, case_rows))
            profiled.add((c, layout))
            if args.csv:  # after every case, so an interrupted run keeps what it measured
                write_csv(args.csv, rows)
            del w
            if device == "cuda":
                torch.cuda.empty_cache()
    # The profiler last: on a GPU every call after a profiler session took 1.5-3 µs more host time
    # (bench/RESULTS.md, "What the bench's own harness does"), so no host time follows a count.
    for build, case_rows in to_profile:
        w = make_workload(**build)  # seeded: the same workload again
        count_case_kernels(w, case_rows, device)
        del w
        if device == "cuda":
            torch.cuda.empty_cache()

    _add_speedups(rows)
    print(format_table(rows, device))
    failures = [r for r in rows if r["check"] != "ok"]
    for r in failures:
        print(f"{r['check']}: {r['case']} {r['layout']} {r['route']}: {r['check_detail']}")
    if args.csv:
        write_csv(args.csv, rows)
    if args.json:
        write_json(args.json, info, rows)
    if args.plot:
        write_plot(args.plot, info, rows)
    if wants_report:
        path = write_report(report_folder(args.report or AUTO_REPORT, info), info, rows, info["command"])
        print(f"report: {path}")
    return 1 if failures else 0


def _routes_for(w, routes: list[str]) -> list[str]:
    """``routes`` less those that cannot compute ``w``'s arguments (``routes.unsupported``: the
    C4 case's overlap on the study rungs and gpgpu), said once per case on stdout."""
    from ascend_kvc import routes as registry

    checked = w.checked_args()
    kept = [r for r in routes if not registry.unsupported(registry.resolve(r, checked.device), checked)]
    if len(kept) < len(routes):
        print(f"{w.name}: not run on {', '.join(r for r in routes if r not in kept)} (they do not compute it)")
    return kept


def measure_case(w, layout: str, routes: list[str], device: str, info: dict, time_fn, args, progress) -> list[dict]:
    """Oracle check, then (only if it passed) time, host time and framework ops, per route.

    The device-kernel count and the device time stay None: ``count_case_kernels`` fills them, with
    the profiler, once every case's host time is taken (``main``).
    """
    import torch

    from ascend_kvc import c128_256_512_compress
    from bench.launches import count_framework_ops, host_us_per_call
    from bench.machine import synchronize

    inplace = w.tags["nonzero_cache"]
    # out=None writes a fresh zeroed cache; in place, ``out`` is a copy of kv_cache, which stays as it is
    before = w.kv_cache if inplace else torch.zeros(w.kv_cache.shape, dtype=w.kv_cache.dtype)
    oracle = _CpuOracle(w.checked_args(), before)
    rows = []
    for route in routes:
        row = {"case": w.name, "layout": layout, "route": route, "num_outputs": w.num_outputs,
               "kv_format": w.kv_format, "bytes": w.bytes_to_move(), "kernels": None, "copies": None,
               "kernels_how": None, "device_ms": None, "device_how": None}
        row["floor_ms"] = row["bytes"] / info["read_gbs"] / 1e6
        out = w.kv_cache.clone() if inplace else None
        try:  # the truth too: a failure to build it marks these rows, never the whole run
            got = c128_256_512_compress(*w.args(), out=out, route=route, **w.format_kwargs())
            synchronize(device)
            report = oracle.check(got)
            row["check"] = "ok" if report.ok else "FAIL"
            row["check_detail"] = str(report)
            row["ambiguous_differences"] = report.ambiguous_differences
        except Exception as exc:  # reported in the table, never timed
            row["check"] = "ERROR"
            row["check_detail"] = f"{type(exc).__name__}: {exc}"
        if row["check"] == "ok":
            def call(out=out, route=route):
                return c128_256_512_compress(*w.args(), out=out, route=route, validate=False, **w.format_kwargs())

            row.update(time_fn(call))
            row["x_floor"] = row["ms"] / row["floor_ms"]
            row["gbs"] = row["bytes"] / row["ms"] / 1e6
            row["pct_read_bw"] = 100 * row["gbs"] / info["read_gbs"]
            if device == "cuda" and route in GRAPH_ROUTES:
                row["graph_ms"] = time_graph(call, time_fn)
                row["graph_x_floor"] = row["graph_ms"] / row["floor_ms"]
            host_call = _host_call(w, route)
            if device == "cpu":  # no asynchrony: the timed calls are the host time
                row["host_us"] = row["ms"] * 1e3
            else:
                row["host_us"] = host_us_per_call(host_call, lambda: synchronize(device), args.host_calls)
            row.update(count_framework_ops(host_call, device))
        rows.append(row)
        progress.step(f"{w.name} {layout} {route}")
    return rows


def _host_call(w, route: str):
    """A call as an engine writing into its own cache makes it: ``out`` given (a copy of the
    workload's cache), ``validate=False``; what host time, framework ops and kernels are taken of."""
    from ascend_kvc import c128_256_512_compress

    host_out = w.kv_cache.clone()

    def host_call():
        return c128_256_512_compress(*w.args(), out=host_out, route=route, validate=False, **w.format_kwargs())

    return host_call


def count_case_kernels(w, rows: list[dict], device: str) -> None:
    """Fill ``rows`` (``measure_case``'s, of workload ``w``) with the device kernels, copies and
    device time of a call from the vendor profiler, on the rows whose check passed."""
    from bench.launches import count_device_kernels

    for row in rows:
        if row["check"] != "ok":
            continue
        assert row["case"] == w.name, "count_case_kernels takes the workload its rows measured"
        counted = count_device_kernels(_host_call(w, row["route"]), device, warmup=True)
        row.update(kernels=counted["kernels"], copies=counted["copies"], kernels_how=counted["how"],
                   device_ms=counted["device_ms"], device_how=counted["device_how"])


def cpu_copy(checked):
    """The checked arguments with every tensor copied to host memory (a copy even on CPU)."""
    import torch

    return dataclasses.replace(checked, **{
        f.name: getattr(checked, f.name).to("cpu", copy=True)
        for f in dataclasses.fields(checked) if isinstance(getattr(checked, f.name), torch.Tensor)})


class _CpuOracle:
    """The float64 truth of one workload, built on host copies of its checked arguments before any
    route runs.

    Not on the device: torch-npu has no ``frexp`` or ``scatter_reduce`` kernels (it falls back to
    the CPU with a warning each time), and an op without float64 support there would abort the
    bench. A failure to build the truth is kept and raised by ``check``, inside each route's
    ``try``: it marks that case's rows as errors, not the whole run.
    """

    def __init__(self, checked, before):
        from ascend_kvc.oracle import compute_truth

        self.error = None
        try:
            self.args = cpu_copy(checked)
            self.before = before.to("cpu", copy=True)
            self.truth = compute_truth(self.args)
        except Exception as exc:
            self.error = f"the float64 truth could not be built: {type(exc).__name__}: {exc}"

    def check(self, got):
        """``check_cache`` of the written cache ``got`` (any device) against the truth."""
        from ascend_kvc.oracle import check_cache

        if self.error is not None:
            raise RuntimeError(self.error)
        return check_cache(self.args, got.to("cpu"), self.before, self.truth)


def _add_speedups(rows: list[dict]) -> None:
    base = {}
    for r in rows:
        if "ms" in r and r["route"] in ("reference", "ascend:pre-gather"):
            base[(r["case"], r["layout"], r["route"])] = r["ms"]
    for r in rows:
        if "ms" not in r:
            continue
        ref = base.get((r["case"], r["layout"], "reference"))
        pre = base.get((r["case"], r["layout"], "ascend:pre-gather"))
        r["x_ref"] = ref / r["ms"] if ref else None
        r["x_pregather"] = pre / r["ms"] if pre else None
