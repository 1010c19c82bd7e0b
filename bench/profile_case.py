"""Run one case of one route a few times, for a profiler: python -m bench.profile_case R T C [ROUTE].

On a CUDA GPU the calls run bare, for an outside profiler to wrap (Nsight Compute or Nsight
Systems). On an Ascend NPU they run inside torch_npu.profiler, whose trace is written into
--trace-dir and summed (device ops, copies, device time). The CPU has no device profiler: the
command says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys

EXAMPLES = """\
examples:
  ncu --clock-control none -k regex:_window_compress -c 1 python -m bench.profile_case 8 131072 512 gpgpu
      one gpgpu call's kernel under Nsight Compute
  nsys profile python -m bench.profile_case 1 8192 128 ascend:block-d512 --calls 5
      a timeline of five calls of one Ascend rung on a GPU
  python -m bench.profile_case 8 131072 512 ascend --trace-dir prof/
      on an Ascend NPU: torch_npu.profiler's trace of the calls into prof/, and its totals
"""


def build_parser() -> argparse.ArgumentParser:
    from bench.cli import HelpFormatter

    p = argparse.ArgumentParser(prog="python -m bench.profile_case", description=__doc__.strip(), epilog=EXAMPLES,
                                formatter_class=HelpFormatter)
    p.add_argument("R", type=int, help="requests")
    p.add_argument("T", type=int, help="tokens in all (a multiple of R)")
    p.add_argument("C", type=int, help="compress ratio: 128, 256 or 512")
    p.add_argument("route", nargs="?", default="gpgpu", help="the route to call (see python -m bench --help)")
    p.add_argument("--device", choices=["auto", "cuda", "npu", "cpu"], default="auto",
                   help="where the tensors are made; auto: an Ascend NPU, else a CUDA GPU")
    p.add_argument("--calls", type=int, default=3, help="calls of the route (>= 1), after one untimed call")
    p.add_argument("--layout", choices=["shuffled", "contiguous"], default="shuffled",
                   help="block-table layout (shuffled: in place over a non-zero cache)")
    p.add_argument("--block-size", type=int, default=8, help="state rows per block (>= 1)")
    p.add_argument("--trace-dir", default=os.path.join("bench", "out", "profile"),
                   help="on an NPU, where torch_npu.profiler writes its trace")
    return p


def _check(parser: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    from bench.cli import check_route_or_exit, parse_cases_or_exit

    parse_cases_or_exit(parser, [f"{a.R},{a.T},{a.C}"], "R T C")
    check_route_or_exit(parser, "route", a.route)
    if a.calls < 1:
        parser.error(f"--calls: must be >= 1, got {a.calls}")
    if a.block_size < 1:
        parser.error(f"--block-size: must be >= 1, got {a.block_size}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    _check(parser, a)
    from bench.machine import detect_device

    device = detect_device() if a.device in ("auto", "npu") else a.device
    if a.device == "npu" and device != "npu":
        parser.error("--device npu: no Ascend NPU is available (torch_npu missing or no device)")
    if device == "cpu":
        parser.error("no GPU or NPU here: there is no device profiler to run on CPU "
                     "(python -m bench --device cpu checks the routes under the Triton interpreter)")
    if device == "cuda":
        from bench.cli import require_cuda_or_exit

        require_cuda_or_exit(parser)

    from ascend_kvc import c128_256_512_compress
    from ascend_kvc.workloads import make_workload
    from bench.machine import synchronize

    shuffled = a.layout == "shuffled"
    w = make_workload(a.R, a.T, a.C, block_size=a.block_size, shuffle=shuffled, nonzero_cache=shuffled,
                      device=device)
    out = w.kv_cache.clone()

    def call():
        c128_256_512_compress(*w.args(), out=out, route=a.route, validate=False)

    call()  # compile and plan outside what is profiled
    synchronize(device)
    if device == "cuda":
        for _ in range(a.calls):
            call()
        synchronize(device)
        print(f"{w.name} {a.layout} {a.route}: {a.calls} calls on {device}")
        return 0
    return _profile_npu(call, a, w.name)


def _profile_npu(call, a: argparse.Namespace, name: str) -> int:
    """The calls inside ``torch_npu.profiler`` (one profiled step), the trace into ``a.trace_dir``."""
    from bench.launches import npu_profiler, npu_trace_totals
    from bench.machine import synchronize

    os.makedirs(a.trace_dir, exist_ok=True)
    with npu_profiler(a.trace_dir) as prof:
        for _ in range(a.calls):
            call()
        synchronize("npu")
        prof.step()
    print(f"{name} {a.layout} {a.route}: {a.calls} calls on npu, trace in {a.trace_dir}")
    try:
        totals = npu_trace_totals(a.trace_dir)
    except RuntimeError as exc:
        print(f"no totals: {exc}", file=sys.stderr)
        return 1
    device_ms = "?" if totals.device_us is None else f"{totals.device_us / 1e3 / a.calls:.4f}"
    print(f"per call: {totals.kernels / a.calls:.3g} device ops (copies: "
          f"{'?' if totals.copies is None else f'{totals.copies / a.calls:.3g}'}), device ms {device_ms} "
          f"({totals.how})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
