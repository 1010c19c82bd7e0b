"""Host time of one eager call on a CUDA GPU: python -m bench.host_overhead [--cases R,T,C ...] [--route ROUTE].

Times each of many calls (validate=False, in place), queued without waiting for the GPU and
again with the GPU drained before each call, and prints the median, p10 and p90 host
microseconds per case; --profile adds cProfile's top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics

import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
from bench.launches import host_samples
from bench.cli import HelpFormatter, check_route_or_exit, parse_cases_or_exit, require_cuda_or_exit


def host_us(call, n: int = 300, idle: bool = False) -> list[float]:
    """Host microseconds of each of ``n`` calls on CUDA, after 5 untimed ones, queued or each
    issued to an idle GPU (``launches.host_samples``)."""
    return host_samples(call, torch.cuda.synchronize, n, warmup=5, idle=idle)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.host_overhead", description=__doc__.strip(),
                                formatter_class=HelpFormatter,
                                epilog="example:\n"
                                       "  python -m bench.host_overhead --cases 1,8192,128 --route ascend --profile\n")
    p.add_argument("--cases", nargs="+", metavar="R,T,C", help="these cases (default: every official case)")
    p.add_argument("--route", default="gpgpu", help="the route to call")
    p.add_argument("--out-none", action="store_true", help="out=None (a new zeroed cache per call)")
    p.add_argument("--profile", action="store_true", help="also print cProfile's top functions over 300 calls")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    cases = parse_cases_or_exit(p, a.cases) or OFFICIAL_CASES
    check_route_or_exit(p, "--route", a.route)
    require_cuda_or_exit(p)
    for case in cases:
        w = make_workload(*case, shuffle=True, nonzero_cache=True, device="cuda")
        out = None if a.out_none else w.kv_cache.clone()
        args = w.args()

        def call():
            c128_256_512_compress(*args, out=out, route=a.route, validate=False)

        for idle in (False, True):
            times = host_us(call, idle=idle)
            q = statistics.quantiles(times, n=10)
            print(f"{w.name} {a.route}{' out=None' if a.out_none else ''} {'idle' if idle else 'queued'}: host us "
                  f"per call median {statistics.median(times):.1f}, p10 {q[0]:.1f}, p90 {q[-1]:.1f}", flush=True)
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(300):
                call()
            prof.disable()
            torch.cuda.synchronize()
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        del w, out, args
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
